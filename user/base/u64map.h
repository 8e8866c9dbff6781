/* SPDX-License-Identifier: MIT */
/* Open-addressing hash map from u64 keys to u64 values (key 0 is reserved). */
#ifndef PTG_U64MAP_H
#define PTG_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	size_t cap; /* power of two */
	size_t len;
};

/* Value of key, or NULL. */
uint64_t *u64map__get(const struct u64map *m, uint64_t key);
/* Inserts or overwrites; -ENOMEM on failure. key must not be 0. */
int u64map__put(struct u64map *m, uint64_t key, uint64_t val);
void u64map__free(struct u64map *m);

/* FNV-1a offset basis: the first h of u64map_hash() */
#define U64MAP_HASH_SEED 14695981039346656037ull
/* FNV-1a hash of len bytes at data, going on from h. */
uint64_t u64map_hash(uint64_t h, const void *data, size_t len);
/* A key u64map takes (never 0) made from h, which may be 0: sets the top bit. */
uint64_t u64map_key(uint64_t h);

#endif /* PTG_U64MAP_H */
