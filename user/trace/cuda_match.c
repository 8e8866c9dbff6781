// SPDX-License-Identifier: MIT
/*
 * Matching CUPTI's API records to the uprobes' host calls (cuda_match.h):
 * capture-side, pure functions on calls held in memory.
 */
#include <stdint.h>
#include <string.h>

#include "trace/cuda_match.h"

/* Length of name without its trailing _vN, _ptsz and _ptds suffixes, in any order. */
static size_t base_len(const char *name)
{
	size_t len = strlen(name), i;

	for (;;) {
		if (len > 5 && (!strncmp(name + len - 5, "_ptsz", 5) ||
				!strncmp(name + len - 5, "_ptds", 5))) {
			len -= 5;
			continue;
		}
		for (i = len; i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9'; i--)
			;
		if (i < len && i > 2 && name[i - 1] == 'v' && name[i - 2] == '_') {
			len = i - 2;
			continue;
		}
		return len;
	}
}

bool cuda_api_same(const char *a, const char *b)
{
	size_t la = base_len(a), lb = base_len(b);

	return la == lb && !strncmp(a, b, la);
}

/* How far c sticks out of h: 0 when h encloses it. */
static uint64_t overhang(const struct cuda_host_call *h, const struct cuda_cupti_call *c)
{
	return (h->start > c->start ? h->start - c->start : 0) +
	       (c->end > h->end ? c->end - h->end : 0);
}

long cuda_join_find(const struct cuda_host_call *calls, size_t n, const struct cuda_cupti_call *c)
{
	uint64_t tol = CUDA_JOIN_TOLERANCE_NS, best_out = UINT64_MAX, best_dur = UINT64_MAX;
	size_t lo = 0, hi = n, i;
	long best = -1;

	if (c->end < c->start)
		return -1;
	/* the first call that ends late enough to enclose c */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (calls[mid].end + tol < c->end)
			lo = mid + 1;
		else
			hi = mid;
	}
	/*
	 * Calls nest, so one returning later that starts after c ended cannot
	 * hold c except around that later call, and the one that holds c
	 * returned before it.
	 */
	for (i = lo; i < n && calls[i].start <= c->end + tol; i++) {
		const struct cuda_host_call *h = &calls[i];
		uint64_t out, dur;

		/* CUPTI's start, taken inside the function, is inside the call */
		if (h->joined || h->driver != c->driver || h->start > c->start + tol ||
		    c->start > h->end || !cuda_api_same(h->name, c->name))
			continue;
		out = overhang(h, c);
		dur = h->end - h->start;
		if (out > best_out || (out == best_out && dur >= best_dur))
			continue;
		best = (long)i;
		best_out = out;
		best_dur = dur;
	}
	return best;
}
