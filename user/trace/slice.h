/* SPDX-License-Identifier: MIT */
/*
 * Cutting a time window [t0, t1] out of a recorded trace into a trace of its
 * own, as torch.profiler's schedule keeps only its active steps: frames and
 * ops open at t0 start there (PTG_F_ENTER_PREEXISTING), those open at t1 end
 * there (PTG_F_EXIT_STOP), so every report reads the window alone.
 */
#ifndef PTG_SLICE_H
#define PTG_SLICE_H

#include <stddef.h>
#include <stdint.h>

struct slice_meta {
	const char *key;
	const char *value;
};

/*
 * Writes the window of the trace at in to a new trace at out, with in's
 * metadata, symbols (same ids) and loss counters, then extra metadata
 * (written last, so it overrides keys in has). Returns 0 or -errno after a
 * message on stderr.
 */
int trace_slice(const char *in, const char *out, uint64_t t0, uint64_t t1,
		const struct slice_meta *extra, size_t nextra);

/*
 * The records of process pid of the trace at in (a recording of several,
 * record --per-process) into a new trace at out, with in's metadata, then
 * extra, its symbols and its loss counters (those of the whole recording).
 */
int trace_slice_pid(const char *in, const char *out, uint32_t pid, const struct slice_meta *extra,
		    size_t nextra);

#endif /* PTG_SLICE_H */
