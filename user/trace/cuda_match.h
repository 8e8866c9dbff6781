/* SPDX-License-Identifier: MIT */
/*
 * The matching of a CUPTI API record to the host call the uprobes saw
 * (cudajoin.h tells the whole story): what capture (cuda/cuda.c) needs to
 * join the two while recording, and nothing that reads a trace, so that
 * capture links no trace-reading code.
 */
#ifndef PTG_CUDA_MATCH_H
#define PTG_CUDA_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A host-side call as the uprobes (or the CUPTI agent's callbacks) saw it. */
struct cuda_host_call {
	uint64_t start, end; /* CLOCK_MONOTONIC ns */
	uint64_t id;	     /* host call id (aux[3] of its record) */
	uint32_t corr;	     /* CUPTI's correlation id when its callbacks gave it, else 0 */
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

#endif /* PTG_CUDA_MATCH_H */
