/* SPDX-License-Identifier: MIT */
/*
 * One CUDA call, two sources: the uprobes' PTG_REC_CUDA_CALL (cudaprobe.c),
 * written in the thread's stream under the right frames but with no CUPTI
 * correlation id, and CUPTI's API record (cupti.c), which has the id but
 * arrives late. record keeps the first and links it to the second's id with
 * a PTG_REC_FLOW ("join flow"); the analyses resolve a host call's id
 * through those flows. docs/cuda-sched.md describes the matching.
 */
#ifndef PTG_CUDAJOIN_H
#define PTG_CUDAJOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "u64map.h"

/*
 * How far CUPTI's [start, end] may stick out of the host call's and still
 * match: CUPTI's clock is mapped onto CLOCK_MONOTONIC by interpolating paired
 * readings, each pair read back to back (well under 1 us apart). A neighbour
 * of the same name within reach loses to the call that encloses CUPTI's
 * interval outright (cuda_join_find), and a uprobe costs about 1 us at entry
 * and again at return, so neighbours are rarely that close anyway.
 */
#define CUDA_JOIN_TOLERANCE_NS 2000
/* Host calls kept per thread for matching: CUPTI flushes within seconds. */
#define CUDA_JOIN_HISTORY 4096

/* A host-side call as the uprobes saw it. */
struct cuda_host_call {
	uint64_t start, end; /* CLOCK_MONOTONIC ns */
	uint64_t id;	     /* host call id (aux[3] of its record) */
	const char *name;    /* as exported: cuLaunchKernel_ptsz, cuMemcpyAsync_v2 */
	bool driver;
	bool joined; /* a CUPTI record took it already */
};

/* A CUPTI runtime or driver API record, on CLOCK_MONOTONIC. */
struct cuda_cupti_call {
	const char *name; /* cbid name, cudaLaunchKernel_v7000 or with _v7000 stripped */
	bool driver;
	uint64_t start, end;
};

/*
 * Whether two API names are the same function: compared without their
 * version (_v2, _v7000) and per-thread-stream (_ptsz, _ptds) suffixes.
 */
bool cuda_api_same(const char *a, const char *b);

/*
 * The host call that c duplicates, among one thread's calls in return order
 * (so their ends never decrease): same API name and kind, not joined yet,
 * holding c's start and enclosing c within CUDA_JOIN_TOLERANCE_NS. Of
 * several, the one c sticks out of least, then the innermost. Returns its
 * index, or -1.
 */
long cuda_join_find(const struct cuda_host_call *calls, size_t n, const struct cuda_cupti_call *c);

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
};

/* cuda_join_load() and the rest of cuda_links in the same single pass. */
int cuda_links_load(struct trace_reader *r, struct cuda_links *l);
void cuda_links_free(struct cuda_links *l);
/* The external id of the CUDA call of correlation id corr, or 0. */
uint64_t cuda_links_ext(const struct cuda_links *l, uint64_t corr);
/* rec's CUPTI cbid: its own (aux[0]), or that of the join flow of its host call; 0 if none. */
uint64_t cuda_links_cbid(const struct cuda_links *l, const struct ptg_record *rec);

/* rec's correlation id: its own, or the one a join flow gave its host call. */
uint64_t cuda_join_corr(const struct u64map *m, const struct ptg_record *rec);

#endif /* PTG_CUDAJOIN_H */
