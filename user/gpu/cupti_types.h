/* SPDX-License-Identifier: MIT */
/*
 * What the CUPTI side's files and record share below struct cupti: the
 * decoder's counters, and the two callbacks record hands in, which join
 * the agents' CUDA calls to the probed ones (user/cuda/cuda.c's
 * cudaprobe__join and cudaprobe__agent_ring).
 */
#ifndef PTG_CUPTI_TYPES_H
#define PTG_CUPTI_TYPES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cupti_decode_stats {
	uint64_t kernels, memcpys, memsets, syncs, api_calls;
	uint64_t incomplete; /* records without a valid start and end: not written */
	uint64_t undecoded;  /* bytes of buffers that did not parse */
	uint64_t cupti_dropped;
	uint64_t agent_unknown;
	uint64_t api_joined;   /* API records that matched a probed host call: written as FLOW */
	uint64_t api_unjoined; /* API records that matched none, with the join on */
};

/*
 * Finds the probed host call that a CUPTI API record of thread (pid, tid)
 * duplicates (cudaprobe__join); corr: the record's correlation id. Returns 1
 * with its id and start, else 0.
 */
typedef int (*cupti_join_fn)(void *ctx, uint32_t pid, uint32_t tid, const char *name, bool driver,
			     uint32_t corr, uint64_t start, uint64_t end, uint64_t *call_id,
			     uint64_t *call_ts);
/*
 * An agent of pid takes the CUDA calls from CUPTI's callbacks: fd, its ring
 * (agent/ptg_cupti_calls.h) of size bytes, is the callee's to dup or let be
 * (cudaprobe__agent_ring). 0, or -EPROTO for a ring that is none.
 */
typedef int (*cupti_calls_fn)(void *ctx, pid_t pid, int fd, uint64_t size);

#endif /* PTG_CUPTI_TYPES_H */
