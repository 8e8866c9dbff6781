// SPDX-License-Identifier: MIT
/*
 * The maps reader (user/proc/procfs.c) on any text: a target names its own
 * mappings, so a line of /proc/PID/maps is whatever it chose. Every entry
 * handed out has a terminated path shorter than PATH_MAX that was in the
 * text, and no more entries come out than the text has lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/procfs.h"

struct ctx {
	const uint8_t *data;
	size_t size;
	size_t n;
};

static int check(const struct proc_map *m, void *arg)
{
	struct ctx *c = arg;
	size_t len = strnlen(m->path, sizeof(m->path));

	if (len >= sizeof(m->path) || len > c->size)
		abort();
	if (len && !memmem(c->data, c->size, m->path, len))
		abort();
	c->n++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx c = {.data = data, .size = size};
	size_t lines = 1;
	FILE *f;

	if (!size)
		return 0;
	f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	proc_maps__read(f, check, &c);
	fclose(f);
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (c.n > lines)
		abort();
	return 0;
}
