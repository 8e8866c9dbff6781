/* SPDX-License-Identifier: MIT */
/*
 * Flame graphs of a trace: a trie of stacks (stacks.h: Python functions,
 * ops, GPU kernels as "[gpu] name" leaves) weighted by wall, on-CPU, GPU or
 * off-CPU nanoseconds, collected by flamegraph.c and written by
 * flamegraph_write.c as folded stacks (flamegraph.pl, inferno, speedscope)
 * or as a self-contained interactive SVG (stacks_svg.c).
 */
#ifndef PTG_FLAMEGRAPH_H
#define PTG_FLAMEGRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/stacks.h"
#include "trace/trace.h"

enum flamegraph_weight {
	FG_WEIGHT_WALL,	  /* self time of each span */
	FG_WEIGHT_CPU,	  /* self time minus off-CPU intervals in it */
	FG_WEIGHT_GPU,	  /* kernel time, under the stack of its launch */
	FG_WEIGHT_OFFCPU, /* off-CPU intervals, under the stack they interrupted */
};

/* Parses wall|cpu|gpu|offcpu; -EINVAL otherwise. */
int flamegraph_weight_parse(const char *s, enum flamegraph_weight *out);
const char *flamegraph_weight_name(enum flamegraph_weight w);

/* Frames kept per stack (stacks.h): the rest fold into "[... N frames cut]". */
#define FLAMEGRAPH_MAX_STACK	 STACKS_MAX_STACK
#define FLAMEGRAPH_MAX_STACK_MAX STACKS_MAX_STACK_MAX

struct flamegraph_opts {
	enum flamegraph_weight weight;
	bool by_tid; /* only stacks of thread tid */
	uint32_t tid;
	unsigned int max_stack; /* 0: FLAMEGRAPH_MAX_STACK */
};

struct flamegraph;

/*
 * One model__walk over r from its current position. Memory grows with the
 * number of distinct stacks (and, for gpu, of CUDA calls), not with the
 * length of the trace. Returns 0 or a negative errno.
 */
int flamegraph__collect(struct trace_reader *r, const struct flamegraph_opts *o,
			struct flamegraph **out);
void flamegraph__free(struct flamegraph *fg);
/* Sum of all weights, in ns. */
uint64_t flamegraph__total(const struct flamegraph *fg);
enum flamegraph_weight flamegraph__weight(const struct flamegraph *fg);
/* The trie of fg, its frames named by r's symbols, for the writers. */
struct stacks *flamegraph__stacks(struct flamegraph *fg, const struct trace_reader *r);

#endif /* PTG_FLAMEGRAPH_H */
