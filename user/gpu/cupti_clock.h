/* SPDX-License-Identifier: MIT */
/*
 * CUPTI's clock on the trace's clock (CLOCK_MONOTONIC): the agent sends
 * paired readings of both with each flush; activity timestamps are mapped
 * through them. Plain arithmetic on numbers, no process state, so that it
 * is built (and tested) with or without CUPTI.
 */
#ifndef PTG_CUPTI_CLOCK_H
#define PTG_CUPTI_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* One paired reading of cuptiGetTimestamp() and CLOCK_MONOTONIC. */
struct cupti_clock_pair {
	uint64_t cupti_ns;
	uint64_t mono_ns;
};

/*
 * Maps a CUPTI timestamp onto CLOCK_MONOTONIC through n pairs in increasing
 * order: linear interpolation between the two pairs around t, the offset of
 * the first (last) pair before (after) them, t itself when n is 0. Rounds
 * down; never below 0.
 */
uint64_t cupti_clock_map(const struct cupti_clock_pair *pairs, size_t n, uint64_t t);

/* The pairs one agent sent, in increasing order of both clocks. Zeroed: no pair. */
struct cupti_clock {
	struct cupti_clock_pair *pairs;
	size_t n, cap;
};

/* At most this many pairs are kept: enough for days of flushes. */
#define CUPTI_CLOCK_MAX_PAIRS (1u << 20)

/*
 * Adds a pair read after the last one. Returns 1 when it is kept, 0 when it
 * is not (a clock went backwards, or CUPTI_CLOCK_MAX_PAIRS were kept
 * already), -ENOMEM.
 */
int cupti_clock__add(struct cupti_clock *c, uint64_t cupti_ns, uint64_t mono_ns);
/* cupti_clock_map() through the pairs added so far. */
uint64_t cupti_clock__map(const struct cupti_clock *c, uint64_t t);
void cupti_clock__free(struct cupti_clock *c);

#endif /* PTG_CUPTI_CLOCK_H */
