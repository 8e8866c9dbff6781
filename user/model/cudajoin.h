/* SPDX-License-Identifier: MIT */
/*
 * One CUDA call, two sources: the uprobes' PTG_REC_CUDA_CALL (cuda/cuda.c),
 * written in the thread's stream under the right frames but with no CUPTI
 * correlation id, and CUPTI's API record (gpu/gpu.c), which has the id but
 * arrives late. record keeps the first and links it to the second's id with
 * a PTG_REC_FLOW ("join flow"); the analyses resolve a host call's id
 * through those flows. docs/cuda-sched.md describes the matching.
 * This header reads the links back from a trace (reports, export); the
 * matching itself, which capture runs, is cuda_match.h, included here for
 * the reports' tests and so that one name gives the whole story.
 */
#ifndef PTG_CUDAJOIN_H
#define PTG_CUDAJOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "trace/cuda_match.h"
#include "trace/trace.h"

/* A PTG_REC_FLOW that links a host call (aux[3]) to a CUPTI correlation id. */
static inline bool cuda_join_is_flow(const struct ptg_record *rec)
{
	return rec->kind == PTG_REC_FLOW && rec->aux[0] == 0 && rec->aux[3] > 0 && rec->corr;
}

/*
 * Reads the trace's join flows into m (host call id -> correlation id), when
 * its metadata says record wrote any; leaves the reader rewound.
 */
int cuda_join_load(struct trace_reader *r, struct u64map *m);
/*
 * What export needs to show a recorded trace's links as Kineto does: the
 * correlation id of each probed call, the cbid CUPTI gave it, and for GPU
 * records the "External id" of the op whose CUDA call launched them.
 */
struct cuda_links {
	struct u64map joins; /* host call id -> correlation id */
	struct u64map cbids; /* host call id -> CUPTI's cbid of the call */
	struct u64map exts;  /* correlation id -> ext of the CUDA call that has it */
	/*
	 * Correlation ids of the GPU ops (kernels, copies, memsets) an agent
	 * recorded, once gpu_known: only their calls start an ac2g flow, as
	 * in Kineto's traces (CUPTI numbers every API call, launch or not).
	 */
	struct u64map gpu;
	bool gpu_known;
};

/* cuda_join_load() and the rest of cuda_links in the same single pass. */
int cuda_links_load(struct trace_reader *r, struct cuda_links *l);
void cuda_links_free(struct cuda_links *l);
/* The external id of the CUDA call of correlation id corr, or 0. */
uint64_t cuda_links_ext(const struct cuda_links *l, uint64_t corr);
/* Whether the call of correlation id corr launched a GPU op (true when not known). */
bool cuda_links_launched(const struct cuda_links *l, uint64_t corr);
/* rec's CUPTI cbid: its own (aux[0]), or that of the join flow of its host call; 0 if none. */
uint64_t cuda_links_cbid(const struct cuda_links *l, const struct ptg_record *rec);

/* rec's correlation id: its own, or the one a join flow gave its host call. */
uint64_t cuda_join_corr(const struct u64map *m, const struct ptg_record *rec);

#endif /* PTG_CUDAJOIN_H */
