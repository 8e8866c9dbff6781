// SPDX-License-Identifier: MIT
/*
 * The ld.so.cache reader (user/proc/ldcache.c) on any bytes: a target's
 * /etc/ld.so.cache is whatever its root holds. An image that parses must
 * give only strings inside it, and lookups must stay within its entries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proc/ldcache.h"

static int count_hit(const char *path, void *ctx)
{
	(*(size_t *)ctx)++;
	if (!path)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ldcache *c;
	size_t hits = 0;

	if (ldcache__parse(data, size, &c))
		return 0;
	for (size_t i = 0; i < ldcache__count(c); i++) {
		const char *name, *path;

		ldcache__entry(c, i, &name, &path);
		/* every string ends inside the image */
		if (strlen(name) >= size || strlen(path) >= size)
			abort();
	}
	ldcache__lookup(c, "libcuda.so.1", count_hit, &hits);
	ldcache__lookup(c, "libcudart.so.1[1-3]*", count_hit, &hits);
	if (hits > ldcache__count(c) * 2)
		abort();
	ldcache__free(c);
	return 0;
}
