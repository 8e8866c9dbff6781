// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "base/u64map.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Fibonacci hashing: addresses share their low bits */
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

uint64_t *u64map__get(const struct u64map *m, uint64_t key)
{
	if (!m->cap || !key)
		return NULL;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return &m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

static int grow(struct u64map *m)
{
	struct u64map n = {.cap = m->cap ? m->cap * 2 : 64};

	n.keys = calloc(n.cap, sizeof(*n.keys));
	n.vals = calloc(n.cap, sizeof(*n.vals));
	if (!n.keys || !n.vals) {
		free(n.keys);
		free(n.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i])
			u64map__put(&n, m->keys[i], m->vals[i]);
	}
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

int u64map__put(struct u64map *m, uint64_t key, uint64_t val)
{
	uint64_t *v;

	if (!key)
		return -EINVAL;
	v = u64map__get(m, key);
	if (v) {
		*v = val;
		return 0;
	}
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m))
		return -ENOMEM;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->keys[i]) {
			m->keys[i] = key;
			m->vals[i] = val;
			m->len++;
			return 0;
		}
	}
}

void u64map__free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
	m->cap = m->len = 0;
}

uint64_t u64map_hash(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

uint64_t u64map_key(uint64_t h)
{
	return h | 1ULL << 63;
}
