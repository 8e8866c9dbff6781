/* SPDX-License-Identifier: MIT */
/*
 * Why is the GPU idle: the analyses of torch.profiler's BasicEvaluation
 * (self time, launch-queue depth, idle overlap, optimizable events) and of
 * Holistic Trace Analysis (temporal breakdown, idle time per stream, launch
 * delay, time on a full launch queue), computed in two streaming passes over
 * a trace. Definitions: docs/idle.md.
 */
#ifndef PTG_IDLE_H
#define PTG_IDLE_H

#include <stdint.h>

#include "analysis/idle_report.h"
#include "trace/trace.h"

void idle_opts__defaults(struct idle_opts *o);

/* Reads r from the start twice. Returns 0 or a negative errno (corrupt trace, memory). */
int idle_analyze(struct trace_reader *r, const struct idle_opts *o, struct idle_report **out);
void idle_report__free(struct idle_report *rep);

#endif /* PTG_IDLE_H */
