// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "record/record_cost.h"
#include "tracer/trapcost.h"

/* 3 runs of this many calls, bare and probed: ~10 ms where a hit costs 4 us */
#define COST_CALLS 500

void record_say_trap_cost(const struct recording *rc)
{
	static bool done;
	const struct record_opts *o = rc->o;
	struct trapcost tc;
	char err[256];
	double call_ns;

	/* advice, not a fault of this recording: -q asks for none */
	/* -- CMD moves to the agent where its script starts: the uprobes see its start-up */
	if (done || o->in_process || o->quiet || rc->py_handover)
		return;
	done = true;
	if (trapcost_measure(COST_CALLS, &tc, err, sizeof(err))) {
		pr_debug("uprobe hit cost not measured: %s", err);
		return;
	}
	call_ns = 2 * tc.hit_ns;
	pr_debug("uprobe hit: %.0f ns here (a recorded Python call: two hits, %.0f ns, and its "
		 "BPF programs)",
		 tc.hit_ns, call_ns);
	if (call_ns <= RECORD_COST_WARN_NS)
		return;
	if (rc->child || o->children || o->by_uid || o->cgroup)
		pr_warn(
		    "a uprobe hit costs %.1f us on this machine: each recorded Python call pays "
		    "two (%.1f us; cProfile adds ~0.1 us); a running process recorded with "
		    "-p PID (no --children) has its calls taken in-process for ~0.15 us instead",
		    tc.hit_ns / 1e3, call_ns / 1e3);
	else if (!strcmp(rc->py_why, "--uprobes"))
		pr_warn(
		    "a uprobe hit costs %.1f us on this machine: each recorded Python call pays "
		    "two (%.1f us; cProfile adds ~0.1 us); without --uprobes the same calls are "
		    "taken in-process for ~0.15 us each",
		    tc.hit_ns / 1e3, call_ns / 1e3);
	else
		pr_warn(
		    "a uprobe hit costs %.1f us on this machine: each recorded Python call pays "
		    "two (%.1f us; cProfile adds ~0.1 us); in-process recording (~0.15 us a "
		    "call) cannot be used here: %s",
		    tc.hit_ns / 1e3, call_ns / 1e3, rc->py_why);
}
