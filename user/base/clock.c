// SPDX-License-Identifier: MIT
#include "base/clock.h"

uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_ms(clockid_t clk)
{
	return now_ns(clk) / 1000000;
}
