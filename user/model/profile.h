/* SPDX-License-Identifier: MIT */
/*
 * cProfile-style aggregation of the spans of one kind (Python functions or
 * dispatcher ops) over a trace: per function ncalls, primitive calls, tottime
 * and cumtime, and per caller -> callee edge the same four numbers, with the
 * rules of CPython's _lsprof (see docs/reports.md).
 */
#ifndef PTG_PROFILE_H
#define PTG_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "trace/trace.h"

/* One function (a symbol of the profiled kind). Times in ns. */
struct profile_func {
	uint32_t sym;
	uint32_t group;	 /* with profile__set_grouped(): what else keys the row (0: nothing) */
	uint64_t ncalls; /* new calls; generator resumptions are not calls */
	uint64_t pcalls; /* calls made while the function was not already active */
	uint64_t tt_ns;	 /* self time of all its segments */
	uint64_t ct_ns;	 /* end - start of the segments not nested in itself */
};

/* caller -> callee, as pstats stores it under the callee. Times in ns. */
struct profile_edge {
	uint32_t caller;
	uint32_t callee;
	uint64_t ncalls;
	uint64_t pcalls; /* calls made while this caller -> callee pair was not active */
	uint64_t tt_ns;
	uint64_t ct_ns;
};

struct profile;

/* kind: PTG_REC_PY_ENTER or PTG_REC_OP_ENTER. */
int profile__new(uint16_t kind, struct profile **out);
void profile__free(struct profile *p);
/*
 * Rows are keyed by (symbol, group) from now on, as key_averages() groups by
 * name and stack; caller -> callee edges are not kept.
 */
void profile__set_grouped(struct profile *p);
/*
 * Adds one closed segment of the profiled kind, with its caller and
 * recursion as the model found them, into the row (s->sym, group); group is
 * 0 unless the profile is grouped. self_ns is its self time with the self
 * time of nested spans of other kinds folded in. Returns 0 or -ENOMEM.
 */
int profile__add_group(struct profile *p, const struct model_span *s, uint32_t group,
		       uint64_t self_ns);
/*
 * Functions, in order of first appearance. Every caller of an edge has an
 * entry, with zero counts when it never closed a segment itself.
 */
const struct profile_func *profile__funcs(const struct profile *p, size_t *n);
const struct profile_edge *profile__edges(const struct profile *p, size_t *n);
/* Index in profile__funcs() of sym, or -ENOENT. */
long profile__find(const struct profile *p, uint32_t sym);
void profile__totals(const struct profile *p, uint64_t *ncalls, uint64_t *pcalls, uint64_t *tt_ns);

enum profile_group {
	PROFILE_GROUP_NONE,
	PROFILE_GROUP_MODULE, /* group = the op's nn.Module path symbol (OP_ENTER aux[0]) */
	PROFILE_GROUP_STACK,  /* group = id of its innermost stack_n Python frames */
};

/* What to aggregate from a trace. */
struct profile_opts {
	uint16_t kind; /* PTG_REC_PY_ENTER or PTG_REC_OP_ENTER */
	bool by_tid;   /* only thread tid */
	uint32_t tid;
	bool by_pid; /* only process pid (a recording of several) */
	uint32_t pid;
	bool per_thread; /* also one profile per thread */
	enum profile_group group;
	unsigned int stack_n; /* PROFILE_GROUP_STACK: frames that make a group */
	/*
	 * kind PTG_REC_OP_ENTER only: CUDA runtime/driver calls and CPU
	 * annotations (user_annotation spans, ProfilerStep#N) are rows too,
	 * nested with the ops by time, as torch.profiler's key_averages() has
	 * them: an op's self time excludes the cudaLaunchKernel it made.
	 * Python frames are transparent. Keeps the run's intervals in memory.
	 */
	bool host_calls;
};

struct profile_thread {
	uint32_t pid;
	uint32_t tid;
	uint32_t name_sym;    /* PTG_REC_THREAD name, 0 when none */
	uint32_t ns_pid;      /* in its container (PTG_REC_THREAD aux[2]), 0 when none */
	uint32_t ns_tid;      /* likewise (aux[3]) */
	struct profile *prof; /* NULL unless opts.per_thread */
};

struct profile_run {
	struct profile *all;		/* all threads, or only opts.tid */
	struct profile_thread *threads; /* threads with spans of the kind, by first appearance */
	size_t nthreads;
	/* PROFILE_GROUP_STACK: group k has the Python function symbols
	 * stacks[(k - 1) * stack_n ...], innermost first, 0 past the outermost */
	uint32_t *stacks;
	size_t nstacks;
	unsigned int stack_n;
	struct model_stats stats;
};

/*
 * One model__walk over r from its current position. Returns 0 or a negative
 * errno (the reader's error says why for a corrupt trace).
 */
int profile_run__collect(struct trace_reader *r, const struct profile_opts *o,
			 struct profile_run **out);
void profile_run__free(struct profile_run *run);

#endif /* PTG_PROFILE_H */
