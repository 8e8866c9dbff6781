/* SPDX-License-Identifier: MIT */
/*
 * A trace as a pprof profile (export --pprof): the stacks of its flame graph
 * (Python functions, ops, GPU kernels) as Samples weighted by wall, on-CPU,
 * GPU or off-CPU nanoseconds, for pprof, Pyroscope and Parca.
 */
#ifndef PTG_TRACE_PPROF_H
#define PTG_TRACE_PPROF_H

#include "analysis/flamegraph.h" /* the collector (flamegraph_opts), not its writers */
#include "model/stacks.h"
#include "trace/trace.h"

/*
 * Reads r from its current position. Returns 0; -ENODATA, with nothing
 * written, when no stack has weight; another negative errno after one line
 * on stderr, except for a corrupt trace (the reader's error says why).
 */
int trace_pprof__write(struct trace_reader *r, const struct flamegraph_opts *o, const char *path);

#endif /* PTG_TRACE_PPROF_H */
