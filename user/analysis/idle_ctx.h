/* SPDX-License-Identifier: MIT */
/*
 * The state of one idle analysis, shared by its parts: idle.c (pass 1 and
 * the GPU-side timelines), idle_queue.c (the launch queue) and
 * idle_events.c (pass 2: CPU events looked up in those timelines, and their
 * ranking). Not for other modules.
 */
#ifndef PTG_IDLE_CTX_H
#define PTG_IDLE_CTX_H

#include <stdbool.h>
#include <stdint.h>

#include "analysis/idle_report.h"
#include "base/u64map.h"
#include "trace/trace.h"

#define NONE UINT64_MAX
/* BasicEvaluation's falling phase: from a depth of at least 4 down to 0 */
#define QD_PEAK_MIN 4

#define SF_KNOWN       1
#define SF_SEED_LAUNCH 2 /* a launch call as BasicEvaluation's patterns define it */
#define SF_COMM	       4 /* a communication kernel (HTA: "nccl" in the name) */

struct gop {
	uint64_t start;
	uint64_t end;
	uint64_t launch; /* correlation id in pass 1, then start of the launching call or NONE */
	uint32_t stream;
	uint16_t device;
	uint8_t kind;
	uint8_t flags; /* SF_SEED_LAUNCH from the call, SF_COMM from the kernel */
};

struct lcall {
	uint64_t corr;
	uint64_t ts;
	uint32_t seed;
};

struct qd_point {
	uint64_t t;
	uint32_t depth;
};

struct span_iv {
	uint64_t start, end;
};

struct acc_slot {
	uint32_t pid, tid, level, used;
	uint64_t ns;
};

/* Child CUDA-call time per open frame, keyed by (pid, tid, stack level). */
struct acc_map {
	struct acc_slot *slots;
	size_t mask, n;
};

struct cand {
	uint64_t start, dur, self_ns, idle_ns;
	uint32_t sym, pysym, qd;
	uint16_t kind;
};

/* A kept gap; seq: which came first, for the order of gaps of equal length. */
struct gap_ent {
	struct idle_gap g;
	uint64_t seq;
};

struct idle_ctx {
	struct trace_reader *r;
	const struct idle_opts *o;
	struct idle_report *rep;
	uint8_t *symflags;
	size_t nsyms;
	struct gop *gops;
	size_t ngops, gcap;
	struct lcall *calls;
	size_t ncalls, ccap;
	struct u64map joins; /* host call id -> correlation id (cudajoin.h) */
	struct qd_point *points;
	size_t npoints;
	struct span_iv *decr;
	size_t ndecr;
	struct acc_map acc;
	struct idle_name *names; /* indexed by sym */
	struct cand *cands;
	size_t ncands, candcap;
	struct gap_ent *gheap; /* the top_n longest gaps so far, a min-heap */
	size_t ngheap;
	uint64_t ngap_seen;
	int err;
};

static inline int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static inline int cmp_u64p(const void *a, const void *b)
{
	return cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

/* The launch queue (idle_queue.c): depth points, distribution, falling phases. */
int idle_queue(struct idle_ctx *c);
/* Whether [s, e] lies in a falling phase of the queue depth (BasicEvaluation). */
bool idle_in_decrease(const struct idle_ctx *c, uint64_t s, uint64_t e);
/* Pass 2: one model__walk over the CPU spans. */
int idle_pass2(struct idle_ctx *c);
/* The optimizable events, ranked. */
int idle_rank(struct idle_ctx *c);
/* The most frequent names among them, moved into the report. */
void idle_top_names(struct idle_ctx *c);

#endif /* PTG_IDLE_CTX_H */
