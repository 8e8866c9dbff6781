// SPDX-License-Identifier: MIT
/*
 * The maps reader (proc_maps__read) on texts a target controls through its
 * mappings' names: every line whole, however long, so that no part of a
 * long path passes for a line of its own; a path that cannot fit is skipped
 * with its line; and a live process's own maps read as the kernel wrote them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/procfs.h"
#include "test.h"

struct seen {
	int n;
	struct proc_map last;
	int forged; /* entries at the forged line's address */
};

static int collect(const struct proc_map *m, void *ctx)
{
	struct seen *s = ctx;

	s->n++;
	s->last = *m;
	if (m->start == 0x41414000)
		s->forged++;
	return 0;
}

static struct seen read_text(const char *text)
{
	struct seen s = {};
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	if (!f)
		abort();
	proc_maps__read(f, collect, &s);
	fclose(f);
	return s;
}

/* A path of len bytes whose tail, cut anywhere near a buffer's size, reads as a mapping. */
static char *long_line(size_t len)
{
	const char *forged =
	    "41414000-41415000 r-xp 00000000 00:00 4242 /forged/libpython3.11.so.1.0";
	const char *head = "7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 /tmp/";
	size_t hl = strlen(head), fl = strlen(forged);
	char *s = malloc(hl + len + 3);
	size_t at = hl;

	memcpy(s, head, hl);
	/* the forged line again and again, each after a newline-free gap */
	while (at + fl + 1 < hl + len) {
		s[at++] = ' ';
		memcpy(s + at, forged, fl);
		at += fl;
	}
	while (at < hl + len)
		s[at++] = 'x';
	s[at++] = '\n';
	s[at] = '\0';
	return s;
}

int main(void)
{
	struct seen s;
	char *text;

	s = read_text("00400000-00401000 r-xp 00001000 08:01 99 /usr/bin/python3.11\n"
		      "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 \n"
		      "7ffe0000-7ffe1000 rw-p 00000000 00:00 0 [stack]\n"
		      "not a mapping\n"
		      "7fff0000-7fff1000 r--p 00000000 00:05 7 /a b/lib (deleted)");
	ASSERT_EQ(s.n, 4, "mappings");
	ASSERT_STREQ(s.last.path, "/a b/lib (deleted)", "last line without a newline, spaces kept");
	ASSERT_EQ(s.last.inode, 7, "inode");

	/* 10 KiB and 5 KiB paths: skipped whole, nothing forged from their tails */
	for (size_t len = 2000; len <= 10240; len += 3072) {
		text = long_line(len);
		s = read_text(text);
		ASSERT_EQ(s.forged, 0, "no line forged from a long path");
		if (len < PATH_MAX - 64) {
			ASSERT_EQ(s.n, 1, "a long path that fits is one mapping");
			ASSERT_EQ(strlen(s.last.path), len + strlen("/tmp/"), "all of it");
		} else {
			ASSERT_EQ(s.n, 0, "a path past PATH_MAX is skipped");
		}
		free(text);
	}

	/* a NUL inside a line is no line of the kernel's */
	{
		static const char nul[] =
		    "1000-2000 r-xp 0 00:00 1 /x\0\n41414000-41415000 r-xp 0 00:00 1 /y\n";
		struct seen t = {};
		FILE *f = fmemopen((void *)nul, sizeof(nul) - 1, "r");

		proc_maps__read(f, collect, &t);
		fclose(f);
		ASSERT_EQ(t.n, 1, "the line with a NUL skipped, the next read");
	}

	/* our own maps, through the pid reader */
	s = (struct seen){};
	ASSERT_EQ(proc_maps__for_each(getpid(), collect, &s), 0, "own maps");
	ASSERT_TRUE(s.n > 5, "own maps have mappings");

	printf("%d passed, %d failed\n", test_checks - test_failures, test_failures);
	return test_failures ? 1 : 0;
}
