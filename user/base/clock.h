/* SPDX-License-Identifier: MIT */
/* Reading the time. */
#ifndef PTG_CLOCK_H
#define PTG_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now on clk (CLOCK_MONOTONIC, the clock of BPF's ktime, or CLOCK_REALTIME), in ns. */
uint64_t now_ns(clockid_t clk);
/* The same in ms. */
uint64_t now_ms(clockid_t clk);

#endif /* PTG_CLOCK_H */
