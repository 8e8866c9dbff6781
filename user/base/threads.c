// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "base/threads.h"

static uint64_t thread_id(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

void *threads__at(const struct threads *t, size_t i)
{
	return t->blocks[i / THREADS_BLOCK] + i % THREADS_BLOCK * t->elem;
}

uint32_t threads__pid(const struct threads *t, size_t i)
{
	return (uint32_t)(t->ids[i] >> 32);
}

uint32_t threads__tid(const struct threads *t, size_t i)
{
	return (uint32_t)t->ids[i];
}

void *threads__find(const struct threads *t, uint32_t pid, uint32_t tid)
{
	uint64_t id = thread_id(pid, tid), *n;

	if (!id)
		return t->zero ? threads__at(t, t->zero - 1) : NULL;
	n = u64map__get(&t->index, id);
	return n ? threads__at(t, *n - 1) : NULL;
}

/*
 * Room for entry t->len: at a block boundary, a new block and its ids. Once a
 * block, not once an entry, so plain realloc() of the two small arrays.
 */
static int threads_grow(struct threads *t)
{
	size_t nblocks = t->cap / THREADS_BLOCK;
	char **blocks, *block;
	uint64_t *ids;

	if (t->len < t->cap)
		return 0;
	/* a table not made by THREADS_INIT would hand out one address for all */
	if (!t->elem)
		return -EINVAL;
	block = calloc(THREADS_BLOCK, t->elem);
	blocks = block ? realloc(t->blocks, (nblocks + 1) * sizeof(*blocks)) : NULL;
	if (blocks)
		t->blocks = blocks;
	ids = blocks ? realloc(t->ids, (t->cap + THREADS_BLOCK) * sizeof(*ids)) : NULL;
	if (!ids) {
		free(block);
		return -ENOMEM;
	}
	t->ids = ids;
	t->blocks[nblocks] = block;
	t->cap += THREADS_BLOCK;
	return 0;
}

void *threads__get(struct threads *t, uint32_t pid, uint32_t tid, bool *added)
{
	uint64_t id = thread_id(pid, tid);
	void *e = threads__find(t, pid, tid);

	if (added)
		*added = false;
	if (e)
		return e;
	if (threads_grow(t))
		return NULL;
	if (!id)
		t->zero = t->len + 1;
	else if (u64map__put(&t->index, id, t->len + 1))
		return NULL;
	t->ids[t->len] = id;
	if (added)
		*added = true;
	return threads__at(t, t->len++);
}

void threads__free(struct threads *t, void (*fini)(void *entry))
{
	size_t elem = t->elem;

	for (size_t i = 0; fini && i < t->len; i++)
		fini(threads__at(t, i));
	for (size_t i = 0; i < t->cap / THREADS_BLOCK; i++)
		free(t->blocks[i]);
	free(t->blocks);
	free(t->ids);
	u64map__free(&t->index);
	*t = (struct threads){.elem = elem};
}
