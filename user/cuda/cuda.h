/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/cuda.bpf.c: probes the CUDA driver (libcuda)
 * and runtime (libcudart) entry points that launch work, copy, set memory or
 * wait, in every copy of those libraries the target maps, now or later; and
 * writes one PTG_REC_CUDA_CALL per call, nested in the thread's Python
 * frames and ops. Where a CUPTI agent is in the process, the same calls come
 * from CUPTI's callbacks instead (cudaprobe__agent_ring), with no trap.
 * docs/cuda-sched.md describes the records.
 */
#ifndef PTG_CUDAPROBE_H
#define PTG_CUDAPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "libwatch/libwatch.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

struct cudaprobe;

struct cudaprobe_stats {
	uint64_t calls;		/* CUDA_CALL records written */
	uint64_t agent_calls;	/* of them, from CUPTI agents' callbacks (cudaprobe__agent_ring) */
	uint32_t libraries;	/* libraries probed */
	uint32_t entry_points;	/* entry points probed in them */
	uint32_t attach_failed; /* entry points that could not be probed */
};

/*
 * Loads the probes into the tracer's ring buffer and subscribes to lw, so
 * that each CUDA library the target maps is probed when it appears. quiet:
 * no line on stderr per library probed.
 */
int cudaprobe__open(struct tracer *t, struct libwatch *lw, pid_t pid, bool quiet,
		    struct cudaprobe **out);
/*
 * The same for several processes (record -p A,B, --children): each CUDA
 * library file that lw reports for any of them is probed once, for
 * processes pids (npids 0: every process that maps it), and only the calls
 * of the processes in the BPF hash of tgids traced_fd
 * (user/procs/proctree.c) are recorded.
 */
int cudaprobe__open_shared(struct tracer *t, struct libwatch *lw, int traced_fd, const pid_t *pids,
			   size_t npids, bool quiet, struct cudaprobe **out);
/* Removes the probes; calls still open are not written. */
void cudaprobe__detach(struct cudaprobe *cp);
void cudaprobe__stats(const struct cudaprobe *cp, struct cudaprobe_stats *st);
/* Whether process pid made CUDA calls (ctx a struct cudaprobe, or NULL: none). */
bool cudaprobe__has_pid(void *ctx, pid_t pid);
/* record's closing line about CUDA calls; nothing for NULL. */
void cudaprobe__summary(const struct cudaprobe *cp);
/*
 * The innermost CUDA call that thread (pid, tid) is in and that had begun
 * by since, as its API symbol and call id (aux[3] of its record); 0 and 0
 * when none.
 */
void cudaprobe__current(struct cudaprobe *cp, uint32_t pid, uint32_t tid, uint64_t since,
			uint32_t *sym, uint64_t *call_id);
/*
 * A cupti_join_fn (gpu/cupti_types.h), ctx a struct cudaprobe: the host call of thread
 * (pid, tid) that CUPTI's record of API name, [start, end] (CLOCK_MONOTONIC)
 * describes, among the thread's last CUDA_JOIN_HISTORY or more (cudajoin.h).
 * Returns 1 and its id and start, or 0 when none matches.
 */
int cudaprobe__join(void *ctx, uint32_t pid, uint32_t tid, const char *name, bool driver,
		    uint32_t corr, uint64_t start, uint64_t end, uint64_t *call_id,
		    uint64_t *call_ts);
/*
 * A cupti_calls_fn (gpu/cupti_types.h), ctx a struct cudaprobe: process pid's CUPTI
 * agent takes its CUDA calls from CUPTI's callbacks into the ring fd (size
 * bytes; fd stays the caller's). From then on its calls come from there,
 * merged in time order with the ring buffer's events and written as the
 * uprobes' are; the uprobes record no call it starts, and come out of it
 * once none they recorded is open (cudaprobe__poll). Returns 0, or -EPROTO
 * for a ring that is none (or a second one).
 */
int cudaprobe__agent_ring(void *ctx, pid_t pid, int fd, uint64_t size);
/* Takes the uprobes out of the processes handed to their agents, when it is safe; NULL: none. */
void cudaprobe__poll(struct cudaprobe *cp);
void cudaprobe__destroy(struct cudaprobe *cp);

#endif /* PTG_CUDAPROBE_H */
