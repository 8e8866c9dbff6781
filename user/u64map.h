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

#endif /* PTG_U64MAP_H */
