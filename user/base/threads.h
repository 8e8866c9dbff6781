/* SPDX-License-Identifier: MIT */
/*
 * The per-thread state of a pass over events: a table keyed by (pid, tid)
 * holding one zeroed struct of the caller's size per thread. Entries keep
 * their address for the table's life (they live in fixed blocks, never
 * moved), so a caller may hold one while adding others, and are numbered in
 * the order they were added, which is the order threads__at() walks them.
 */
#ifndef PTG_THREADS_H
#define PTG_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"

struct threads {
	size_t elem;	     /* bytes of one entry, set by THREADS_INIT */
	size_t len;	     /* entries, numbered 0..len-1 in order of addition */
	uint64_t *ids;	     /* pid << 32 | tid of each entry */
	char **blocks;	     /* THREADS_BLOCK entries each */
	size_t cap;	     /* entries ids and blocks have room for */
	struct u64map index; /* id -> number + 1, for every id but 0 */
	size_t zero;	     /* number + 1 of (0, 0): u64map has no key 0 */
};

#define THREADS_BLOCK 64
/* An empty table of entries of type. */
#define THREADS_INIT(type) ((struct threads){.elem = sizeof(type)})

/* The entry of (pid, tid), or NULL. */
void *threads__find(const struct threads *t, uint32_t pid, uint32_t tid);
/*
 * The entry of (pid, tid), added zeroed when it is not there (*added, when
 * not NULL, says which). NULL when out of memory.
 */
void *threads__get(struct threads *t, uint32_t pid, uint32_t tid, bool *added);
/* Entry i (< t->len), and its pid and tid. */
void *threads__at(const struct threads *t, size_t i);
uint32_t threads__pid(const struct threads *t, size_t i);
uint32_t threads__tid(const struct threads *t, size_t i);
/* Frees the table, first calling fini (when not NULL) on each entry; t is empty again. */
void threads__free(struct threads *t, void (*fini)(void *entry));

#endif /* PTG_THREADS_H */
