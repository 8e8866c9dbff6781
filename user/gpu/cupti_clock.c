// SPDX-License-Identifier: MIT
/* CUPTI's clock on CLOCK_MONOTONIC (cupti_clock.h). */
#include <errno.h>
#include <stdlib.h>

#include "gpu/cupti_clock.h"

uint64_t cupti_clock_map(const struct cupti_clock_pair *pairs, size_t n, uint64_t t)
{
	const struct cupti_clock_pair *a, *b;
	size_t lo = 0, hi;
	unsigned __int128 x;

	if (!n)
		return t;
	if (t <= pairs[0].cupti_ns)
		return pairs[0].mono_ns > pairs[0].cupti_ns - t
			   ? pairs[0].mono_ns - (pairs[0].cupti_ns - t)
			   : 0;
	if (t >= pairs[n - 1].cupti_ns)
		return pairs[n - 1].mono_ns + (t - pairs[n - 1].cupti_ns);
	/* the last pair at or before t: pairs[lo].cupti_ns <= t < pairs[lo + 1].cupti_ns */
	hi = n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (pairs[mid].cupti_ns <= t)
			lo = mid;
		else
			hi = mid;
	}
	a = &pairs[lo];
	b = &pairs[lo + 1];
	x = (unsigned __int128)(t - a->cupti_ns) * (b->mono_ns - a->mono_ns);
	return a->mono_ns + (uint64_t)(x / (b->cupti_ns - a->cupti_ns));
}

int cupti_clock__add(struct cupti_clock *c, uint64_t cupti_ns, uint64_t mono_ns)
{
	const struct cupti_clock_pair *last = c->n ? &c->pairs[c->n - 1] : NULL;
	struct cupti_clock_pair *p;

	/* both clocks only go forward: a pair that does not is a bad reading */
	if (last && (cupti_ns <= last->cupti_ns || mono_ns < last->mono_ns))
		return 0;
	/* later pairs would only refine what the last one extrapolates */
	if (c->n == CUPTI_CLOCK_MAX_PAIRS)
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;

		p = realloc(c->pairs, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		c->pairs = p;
		c->cap = cap;
	}
	c->pairs[c->n++] = (struct cupti_clock_pair){cupti_ns, mono_ns};
	return 1;
}

uint64_t cupti_clock__map(const struct cupti_clock *c, uint64_t t)
{
	return cupti_clock_map(c->pairs, c->n, t);
}

void cupti_clock__free(struct cupti_clock *c)
{
	free(c->pairs);
	*c = (struct cupti_clock){};
}
