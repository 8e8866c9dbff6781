/* SPDX-License-Identifier: MIT */
/*
 * The sampling profiler: loads bpf/sample.bpf.c, finds the Python processes
 * to sample (a list of pids, or every one on the host), resolves the stacks
 * the BPF side counts while their processes live, and hands out one
 * sample_set per interval: rows of (process, thread, stack, count, ns) over
 * shared tables of functions and frames, for the pprof, folded and SVG
 * writers (user/sample/sample_write.c).
 */
#ifndef PTG_SAMPLE_H
#define PTG_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "sample/sample_types.h"

struct sampler;

/* Checks privileges, loads and attaches; errors are printed, one line each. */
int sampler__open(const struct sample_opts *o, struct sampler **out);
void sampler__free(struct sampler *s);
/*
 * Waits up to timeout_ms for stacks to resolve; once a second also looks
 * for new processes (-a), notices exits and resolves what the first pass
 * missed. Returns 0 or a negative errno.
 */
int sampler__poll(struct sampler *s, int timeout_ms);
/* Processes being sampled now (alive). */
size_t sampler__live(const struct sampler *s);
/*
 * Ends the interval: everything counted since the last call, resolved. The
 * set stays valid until the next call to sampler__take() or sampler__free().
 */
int sampler__take(struct sampler *s, const struct sample_set **out);
/* Samples taken (pr_info), stacks lost and why, per kind (pr_warn): the summary. */
void sampler__print_stats(const struct sampler *s);

/* Maps a 3.11 instruction's byte offset to its line through co_linetable; -1 if none. */
int py_linetable_line(const uint8_t *table, size_t len, int firstlineno, int addr);

#endif /* PTG_SAMPLE_H */
