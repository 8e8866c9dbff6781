// SPDX-License-Identifier: MIT
/*
 * The clock pairs an agent sends, as cupti_clock keeps them: which pairs are
 * kept (both clocks forward, at most CUPTI_CLOCK_MAX_PAIRS), and what the
 * kept ones map a CUPTI timestamp to. Needs no CUPTI header: built and run
 * everywhere.
 */
#include <stdint.h>

#include "gpu/cupti_clock.h"
#include "test.h"

static void test_add(void)
{
	struct cupti_clock c = {};

	ASSERT_EQ(cupti_clock__map(&c, 777), 777, "no pair yet: the timestamp itself");
	ASSERT_EQ(cupti_clock__add(&c, 1000, 5000), 1, "first pair kept");
	ASSERT_EQ(cupti_clock__add(&c, 1000, 6000), 0, "same CUPTI time: dropped");
	ASSERT_EQ(cupti_clock__add(&c, 900, 6000), 0, "CUPTI clock backwards: dropped");
	ASSERT_EQ(cupti_clock__add(&c, 1500, 4999), 0, "monotonic clock backwards: dropped");
	ASSERT_EQ(cupti_clock__add(&c, 2000, 7000), 1, "second pair kept");
	ASSERT_EQ(cupti_clock__add(&c, 2500, 7000), 1, "monotonic clock standing still: kept");
	ASSERT_EQ(c.n, 3, "three pairs kept");
	ASSERT_EQ(c.pairs[1].cupti_ns, 2000, "in the order given");
	ASSERT_EQ(cupti_clock__map(&c, 1500), 6000, "between the first two: 5000 + 500 * 2");
	ASSERT_EQ(cupti_clock__map(&c, 2250), 7000, "between pairs with no monotonic time");
	ASSERT_EQ(cupti_clock__map(&c, 3000), 7500, "after the last: its offset");
	ASSERT_EQ(cupti_clock__map(&c, 400), 4400, "before the first: its offset");
	cupti_clock__free(&c);
	ASSERT_EQ(c.n, 0, "free empties");
	ASSERT_TRUE(c.pairs == NULL, "free releases the pairs");
	ASSERT_EQ(cupti_clock__map(&c, 1500), 1500, "after free: the timestamp itself");
}

/* Drift: the mapping follows the pairs, not just the first offset. */
static void test_drift(void)
{
	struct cupti_clock c = {};
	uint64_t base = 1700000000000000000ull, mono = 100000000000ull;

	/* CUPTI runs 1 ppm fast: 1,000,001 CUPTI ns per 1,000,000 monotonic ns */
	for (uint64_t i = 0; i < 100; i++)
		ASSERT_EQ(cupti_clock__add(&c, base + i * 1000001000ull, mono + i * 1000000000ull),
			  1, "a pair a second");
	ASSERT_EQ(cupti_clock__map(&c, base + 50 * 1000001000ull), mono + 50 * 1000000000ull,
		  "at pair 50: exact");
	ASSERT_EQ(cupti_clock__map(&c, base + 50 * 1000001000ull + 500000500ull),
		  mono + 50 * 1000000000ull + 500000000ull, "half way to pair 51");
	ASSERT_EQ(cupti_clock__map(&c, base + 99 * 1000001000ull + 1000),
		  mono + 99 * 1000000000ull + 1000, "past the last pair: its offset");
	cupti_clock__free(&c);
}

/* A hostile agent sending pairs forever: the table stops growing. */
static void test_bound(void)
{
	struct cupti_clock c = {};
	uint64_t kept = 0;
	int ret = 0;

	for (uint64_t i = 1; i <= CUPTI_CLOCK_MAX_PAIRS + 10ull && ret >= 0; i++) {
		ret = cupti_clock__add(&c, i * 10, i * 10);
		if (ret == 1)
			kept++;
	}
	ASSERT_TRUE(ret >= 0, "no allocation failure");
	ASSERT_EQ(kept, CUPTI_CLOCK_MAX_PAIRS, "kept: CUPTI_CLOCK_MAX_PAIRS");
	ASSERT_EQ(c.n, CUPTI_CLOCK_MAX_PAIRS, "table size: CUPTI_CLOCK_MAX_PAIRS");
	ASSERT_EQ(cupti_clock__map(&c, (CUPTI_CLOCK_MAX_PAIRS + 5ull) * 10),
		  (CUPTI_CLOCK_MAX_PAIRS + 5ull) * 10, "beyond: the last pair's offset");
	cupti_clock__free(&c);
}

int main(void)
{
	test_add();
	test_drift();
	test_bound();
	return TEST_DONE();
}
