/* SPDX-License-Identifier: MIT */
/*
 * CUDA calls from CUPTI's callbacks instead of uprobes (docs/cuda-sched.md,
 * "From the CUPTI agent"): the calls the agent takes, and the ring it writes
 * them into.
 *
 * The agent subscribes to the driver and runtime API callbacks of the calls
 * in PTG_CUPTI_CALLS, the very entry points that user/cuda/cuda.c probes,
 * under the names it gives them, and writes one ENTER at CUPTI_API_ENTER and
 * one EXIT at CUPTI_API_EXIT into a ring in shared memory, as the uprobes
 * write CUDA_ENTER and CUDA_EXIT into the BPF ring buffer: the loader reads
 * both the same way, in time order with the thread's other events. The
 * agent makes the ring (a memfd sealed against shrink and grow, so the
 * loader can map it safely) and passes it once with
 * PTG_CUPTI_MSG_CALL_RING. Agent and loader come from one build: native
 * byte order, the same table. The loader expands the table for the names
 * alone (ptg_cupti_call_names): it never compiles the parameter expressions.
 */
#ifndef PTG_CUPTI_CALLS_H
#define PTG_CUPTI_CALLS_H

#include <stdint.h>

#define PTG_CUPTI_CALLS_MAGIC 0x736c6c6163677470ull /* "ptgcalls" */
#define PTG_CUPTI_CALLS_OFF   4096u		    /* records start at this offset */
#define PTG_CUPTI_CALLS_NRECS (1u << 16)	    /* 3 MiB of 48-byte records */

enum ptg_cupti_call_kind {
	PTG_CUPTI_CALL_ENTER = 1,
	PTG_CUPTI_CALL_EXIT = 2,
};

/*
 * 48 bytes; seq is (the record's index + 1) mod 2^32, stored last (release)
 * once the rest is written. what = kind | call index << 8 | result << 16
 * (EXIT: CUresult / cudaError_t, 0xffff for anything larger).
 */
struct ptg_cupti_call_rec {
	uint32_t seq;
	uint32_t tid;	 /* gettid() in the target's pid namespace */
	uint64_t ts;	 /* CLOCK_MONOTONIC ns, the BPF clock */
	uint64_t start;	 /* the ENTER's ts (in both, so an EXIT stands alone) */
	uint64_t stream; /* as passed, 0 for calls that take none */
	uint64_t bytes;	 /* copies and 1D memsets that give a count, else 0 */
	uint32_t what;
	uint32_t corr; /* CUPTI's correlation id of the call */
};

/*
 * The memfd's first page: magic .. nrecs set before it is passed; head and
 * dropped are the agent's, tail the loader's (each on a cache line of its own).
 */
struct ptg_cupti_call_ring {
	uint64_t magic;
	uint32_t rec_size; /* sizeof(struct ptg_cupti_call_rec) */
	uint32_t ncalls;   /* entries of PTG_CUPTI_CALLS: the same table on both sides */
	uint64_t nrecs;	   /* a power of two; the file is PTG_CUPTI_CALLS_OFF + nrecs * rec_size */
	/*
	 * Set by a loader that takes no CUDA calls (record --no-cuda): the
	 * agent turns its callbacks off, so that the application's calls cost
	 * nothing for a ring nobody reads
	 */
	uint32_t unread;
	uint8_t pad0[36];
	uint64_t head; /* records reserved by the agent */
	uint8_t pad1[56];
	uint64_t tail; /* records consumed by the loader */
	uint8_t pad2[56];
	uint64_t dropped; /* calls the agent found no room for (the ring was full) */
};

/*
 * The calls: user/cuda/cuda.c's table (the same names: the exported
 * symbol, _ptsz/_ptds twins apart), with where each finds its stream and
 * byte count in CUPTI's parameter struct p (generated_cuda_meta.h,
 * generated_cuda_runtime_api_meta.h).
 *   D(name, stream, bytes): driver API, CUPTI_DRIVER_TRACE_CBID_name,
 *                           parameters name_params
 *   R(name, cbid, stream, bytes): runtime API, CUPTI_RUNTIME_TRACE_CBID_cbid,
 *                                 parameters cbid_params
 *   Z(driver, name, cbid): no parameters (no stream, no bytes)
 */
/* clang-format off */
#define PTG_CUPTI_DRV_PT(D, n, s, b) D(n, s, b) D(n##_ptsz, s, b)
#define PTG_CUPTI_CALLS(D, R, Z)							\
	PTG_CUPTI_DRV_PT(D, cuLaunchKernel, p->hStream, 0)				\
	D(cuLaunchKernelEx, p->config ? p->config->hStream : 0, 0)			\
	D(cuLaunchKernelEx_ptsz, p->config ? p->config->hStream : 0, 0)		\
	PTG_CUPTI_DRV_PT(D, cuLaunchCooperativeKernel, p->hStream, 0)			\
	PTG_CUPTI_DRV_PT(D, cuLaunchHostFunc, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuGraphLaunch, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuMemcpyAsync, p->hStream, p->ByteCount)			\
	PTG_CUPTI_DRV_PT(D, cuMemcpyHtoDAsync_v2, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpyDtoHAsync_v2, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpyDtoDAsync_v2, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpyHtoAAsync_v2, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpyAtoHAsync_v2, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpyPeerAsync, p->hStream, p->ByteCount)		\
	PTG_CUPTI_DRV_PT(D, cuMemcpy2DAsync_v2, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuMemcpy3DAsync_v2, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuMemcpy3DPeerAsync, p->hStream, 0)			\
	PTG_CUPTI_DRV_PT(D, cuMemsetD8Async, p->hStream, p->N)				\
	PTG_CUPTI_DRV_PT(D, cuMemsetD16Async, p->hStream, p->N << 1)			\
	PTG_CUPTI_DRV_PT(D, cuMemsetD32Async, p->hStream, p->N << 2)			\
	PTG_CUPTI_DRV_PT(D, cuMemsetD2D8Async, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuMemsetD2D16Async, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuMemsetD2D32Async, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuStreamSynchronize, p->hStream, 0)			\
	PTG_CUPTI_DRV_PT(D, cuStreamWaitEvent, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuEventRecord, p->hStream, 0)				\
	PTG_CUPTI_DRV_PT(D, cuEventRecordWithFlags, p->hStream, 0)			\
	Z(1, cuCtxSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize)		\
	D(cuCtxSynchronize_v2, 0, 0)							\
	D(cuEventSynchronize, 0, 0)							\
	D(cuMemcpy, 0, p->ByteCount)							\
	D(cuMemcpy_ptds, 0, p->ByteCount)						\
	D(cuMemcpyHtoD_v2, 0, p->ByteCount)						\
	D(cuMemcpyHtoD_v2_ptds, 0, p->ByteCount)					\
	D(cuMemcpyDtoH_v2, 0, p->ByteCount)						\
	D(cuMemcpyDtoH_v2_ptds, 0, p->ByteCount)					\
	D(cuMemcpyDtoD_v2, 0, p->ByteCount)						\
	D(cuMemcpyDtoD_v2_ptds, 0, p->ByteCount)					\
	R(cudaLaunchKernel, cudaLaunchKernel_v7000, p->stream, 0)			\
	R(cudaLaunchKernel_ptsz, cudaLaunchKernel_ptsz_v7000, p->stream, 0)		\
	R(cudaLaunchKernelExC, cudaLaunchKernelExC_v11060, p->config ? p->config->stream : 0, 0) \
	R(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC_ptsz_v11060,			\
	  p->config ? p->config->stream : 0, 0)						\
	R(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel_v9000, p->stream, 0) \
	R(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel_ptsz_v9000, p->stream, 0) \
	R(cudaLaunchHostFunc, cudaLaunchHostFunc_v10000, p->stream, 0)			\
	R(cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc_ptsz_v10000, p->stream, 0)	\
	R(cudaGraphLaunch, cudaGraphLaunch_v10000, p->stream, 0)			\
	R(cudaGraphLaunch_ptsz, cudaGraphLaunch_ptsz_v10000, p->stream, 0)		\
	R(cudaMemcpyAsync, cudaMemcpyAsync_v3020, p->stream, p->count)			\
	R(cudaMemcpyAsync_ptsz, cudaMemcpyAsync_ptsz_v7000, p->stream, p->count)	\
	R(cudaMemcpy2DAsync, cudaMemcpy2DAsync_v3020, p->stream, 0)			\
	R(cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync_ptsz_v7000, p->stream, 0)		\
	R(cudaMemcpyPeerAsync, cudaMemcpyPeerAsync_v4000, p->stream, p->count)		\
	R(cudaMemcpyToSymbolAsync, cudaMemcpyToSymbolAsync_v3020, p->stream, p->count)	\
	R(cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync_ptsz_v7000, p->stream, p->count) \
	R(cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync_v3020, p->stream, p->count) \
	R(cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync_ptsz_v7000, p->stream, \
	  p->count)									\
	R(cudaMemsetAsync, cudaMemsetAsync_v3020, p->stream, p->count)			\
	R(cudaMemsetAsync_ptsz, cudaMemsetAsync_ptsz_v7000, p->stream, p->count)	\
	R(cudaMemset2DAsync, cudaMemset2DAsync_v3020, p->stream, 0)			\
	R(cudaMemset2DAsync_ptsz, cudaMemset2DAsync_ptsz_v7000, p->stream, 0)		\
	R(cudaStreamSynchronize, cudaStreamSynchronize_v3020, p->stream, 0)		\
	R(cudaStreamSynchronize_ptsz, cudaStreamSynchronize_ptsz_v7000, p->stream, 0)	\
	R(cudaStreamWaitEvent, cudaStreamWaitEvent_v3020, p->stream, 0)			\
	R(cudaStreamWaitEvent_ptsz, cudaStreamWaitEvent_ptsz_v7000, p->stream, 0)	\
	R(cudaEventRecord, cudaEventRecord_v3020, p->stream, 0)				\
	R(cudaEventRecord_ptsz, cudaEventRecord_ptsz_v7000, p->stream, 0)		\
	R(cudaEventRecordWithFlags, cudaEventRecordWithFlags_v11010, p->stream, 0)	\
	R(cudaEventRecordWithFlags_ptsz, cudaEventRecordWithFlags_ptsz_v11010, p->stream, 0) \
	Z(0, cudaDeviceSynchronize, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020) \
	R(cudaEventSynchronize, cudaEventSynchronize_v3020, 0, 0)			\
	R(cudaMemcpy, cudaMemcpy_v3020, 0, p->count)					\
	R(cudaMemcpy_ptds, cudaMemcpy_ptds_v7000, 0, p->count)				\
	R(cudaMemset, cudaMemset_v3020, 0, p->count)					\
	R(cudaMemset_ptds, cudaMemset_ptds_v7000, 0, p->count)
/* clang-format on */

#define PTG_CUPTI_NAME_D(n, s, b)    #n,
#define PTG_CUPTI_NAME_R(n, c, s, b) #n,
#define PTG_CUPTI_NAME_N(d, n, c)    #n,
/* The calls' names, in the table's order: a record's call index is into this. */
static const char *const ptg_cupti_call_names[] = {
    PTG_CUPTI_CALLS(PTG_CUPTI_NAME_D, PTG_CUPTI_NAME_R, PTG_CUPTI_NAME_N)};
#define PTG_CUPTI_NCALLS (sizeof(ptg_cupti_call_names) / sizeof(ptg_cupti_call_names[0]))

#endif /* PTG_CUPTI_CALLS_H */
