/* SPDX-License-Identifier: MIT */
/*
 * How torch.profiler / Kineto events are held in .ptg records: the
 * conventions that the recorder (gpu/gpu.c), the importer (kineto.c) and the
 * exporters (chrome.c) share, so that export -> import -> export is
 * byte-identical. 0 in corr / ext means "absent":
 *   cpu_op              OP_ENTER/OP_EXIT, sym PTG_SYM_OP, ext = External id,
 *                       ENTER aux[0] = Sequence number + 1, aux[1] = Fwd thread id + 1
 *   python_function     PY_ENTER/PY_EXIT, sym PTG_SYM_PY_FUNC (file, line, name),
 *                       ENTER aux[0] = Python id + 1, aux[1] = Python parent id + 1
 *   user_annotation,    SPAN, sym = name, aux[0] = category sym, ext;
 *   gpu_user_annotation the GPU one also has device = pid, stream = tid
 *   cuda_runtime,       CUDA_CALL, sym PTG_SYM_CUDA_API, corr, ext, aux[0] = cbid,
 *   cuda_driver         aux[1] = KINETO_CALL_DRIVER for cuda_driver
 *   kernel              GPU_KERNEL, sym PTG_SYM_KERNEL, grid/block as in trace.h
 *   gpu_memcpy/memset   GPU_MEMCPY/GPU_MEMSET, aux[0] = bytes (memcpy aux[1] = copy kind)
 *   cuda_sync           GPU_SYNC, aux[0] = cuda_sync_kind sym, aux[1] = wait_on_stream + 1,
 *                       aux[2] = wait_on_cuda_event_record_corr_id + 1,
 *                       aux[3] = wait_on_cuda_event_id + 1
 *   flows (s, t, f)     FLOW, sym = name, corr = id, aux[0] = phase char,
 *                       aux[1] = 1 for "bp": "e", aux[2] = category sym
 *   metadata (M)        THREAD, sym = name or labels, aux[0] = enum kineto_meta,
 *                       aux[1] = sort index
 *   anything else       EVENT (trace.h): an "i" instant, the Trace span (string pid),
 *                       an unknown category; its args blob is the whole event
 * Every event's members that its record has no field for (all of an X event's
 * "args", unknown keys) are its args blob (kineto_args.h), which export
 * writes back in place of the args it would derive from the fields.
 * Top-level keys other than traceEvents are kept as META "kineto.<key>" whose
 * value is the key's JSON text, spaced as Kineto writes it; META
 * "import.events_at" is how many of them came before traceEvents.
 */
#ifndef PTG_TRACE_KINETO_H
#define PTG_TRACE_KINETO_H

#define KINETO_META_PREFIX "kineto."
#define KINETO_CALL_DRIVER 1

/* aux[0] of PTG_REC_THREAD; 0 is what a recorder writes for a thread name. */
enum kineto_meta {
	KINETO_M_THREAD_NAME = 0,
	KINETO_M_PROCESS_NAME = 1,
	KINETO_M_PROCESS_LABELS = 2,
	KINETO_M_PROCESS_SORT_INDEX = 3,
	KINETO_M_THREAD_SORT_INDEX = 4,
	KINETO_M_NR
};

/* Names of the "M" events, indexed by enum kineto_meta. */
extern const char *const kineto_meta_names[KINETO_M_NR];

#endif
