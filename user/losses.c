// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "losses.h"

int loss_table__add(struct loss_table *t, const char *what, uint32_t cpu, uint64_t count)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, what, strlen(what)), *idx;
	struct ptg_loss *l;

	h = u64map_hash(h, &cpu, sizeof(cpu));
	/* two counters may share a hash: probe on */
	for (;; h++) {
		idx = u64map__get(&t->idx, u64map_key(h));
		if (!idx)
			break;
		l = &t->v[*idx];
		if (l->cpu == cpu && !strcmp(l->what, what)) {
			/* a corrupt file's counts must not wrap: saturate */
			l->count = l->count + count < l->count ? UINT64_MAX : l->count + count;
			return 0;
		}
	}
	if (array_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)) ||
	    u64map__put(&t->idx, u64map_key(h), t->n))
		return -ENOMEM;
	l = &t->v[t->n++];
	memset(l, 0, sizeof(*l));
	strncpy(l->what, what, sizeof(l->what) - 1);
	l->cpu = cpu;
	l->count = count;
	return 0;
}

void loss_table__free(struct loss_table *t)
{
	free(t->v);
	u64map__free(&t->idx);
}
