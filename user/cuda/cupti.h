/* SPDX-License-Identifier: MIT */
/*
 * GPU activity through the CUPTI agent (agent/ptg_cupti_agent.c): the
 * loader's side. cupti_decoder turns the agent's messages (CUPTI activity
 * buffers, names, clock pairs) into PTG_REC_GPU_* and PTG_REC_CUDA_CALL
 * records on CLOCK_MONOTONIC; struct cupti runs the socket the agents of
 * one recording connect to, and brings the agent into the target
 * (CUDA_INJECTION64_PATH for `record -- CMD`, ptrace for `record -p`).
 * docs/gpu.md has the whole picture. Inside: cupti.c (the agent and its
 * connections), cupti_reader.c (the socket's reader thread),
 * cupti_decode.c (messages -> records), cupti_clock.c (clock mapping),
 * cupti_proto.c (the stream's framing).
 */
#ifndef PTG_CUPTI_H
#define PTG_CUPTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cuda/cupti_clock.h"
#include "proc/procfs.h"
#include "trace/trace.h"

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

/* One message of the agent's protocol (agent/ptg_cupti_proto.h). */
typedef int (*cupti_msg_fn)(void *ctx, uint32_t type, const uint8_t *data, size_t len);

/*
 * Calls fn for each complete message at the start of buf (len bytes) and sets
 * *used to the bytes they take; what follows is the start of an incomplete
 * one. Returns 0, -EPROTO for a header announcing more than
 * PTG_CUPTI_MAX_MSG bytes, or the first error of fn.
 */
int cupti_split_msgs(const void *buf, size_t len, size_t *used, cupti_msg_fn fn, void *ctx);

struct cupti_decoder;

/* Records are written to w with pid (GPU records: tid 0; CUDA calls: the calling thread). */
int cupti_decoder__new(struct trace_writer *w, uint32_t pid, struct cupti_decoder **out);
/*
 * One message of the agent's protocol (PTG_CUPTI_MSG_CLOCK, _KERNEL_NAME,
 * _API_NAME, _BUFFER, _DROPPED; others are ignored). Returns 0, -EPROTO for a
 * malformed message, or an error of the writer.
 */
int cupti_decoder__message(struct cupti_decoder *d, uint32_t type, const void *data, size_t len);
/*
 * The messages of a byte stream as the agent sends it (headers and
 * payloads), as cupti_split_msgs() splits it; *used: the bytes of the
 * complete messages.
 */
int cupti_decoder__stream(struct cupti_decoder *d, const void *buf, size_t len, size_t *used);
/* Decodes a buffer of CUpti_Activity records (a BUFFER message's payload). */
int cupti_decoder__buffer(struct cupti_decoder *d, const void *buf, size_t len);
const struct cupti_decode_stats *cupti_decoder__stats(const struct cupti_decoder *d);
/*
 * From now on, an API record that fn matches to a host call is written as a
 * PTG_REC_FLOW linking the two (docs/trace-format.md), not as a CUDA_CALL.
 */
void cupti_decoder__set_join(struct cupti_decoder *d, cupti_join_fn fn, void *ctx);
/* Writes the loss counters (cupti_dropped, cupti_unknown, cupti_incomplete, cupti_undecoded). */
int cupti_decoder__losses(struct cupti_decoder *d);
void cupti_decoder__free(struct cupti_decoder *d);

struct cupti;

/*
 * Finds the agent (only a file that root alone can have written:
 * trusted_open()) and opens the socket that agents connect to. Returns
 * -EOPNOTSUPP (with no message) in a build without CUPTI; -EPERM after an
 * error message when $PTG_CUPTI_AGENT names a file that is missing or not
 * trusted (the user asked for that file: record fails); other errors after
 * a warning (record goes on without GPU activity). Every function below
 * accepts c == NULL and then does nothing.
 */
int cupti__open(bool quiet, struct cupti **out);
/* record -- CMD: puts CUDA_INJECTION64_PATH and the socket name in our environment, for the child.
 */
int cupti__launch_env(struct cupti *c);
/*
 * A process of record -- CMD stopped at an exec, before its first
 * instruction: where its root is not ours (a chroot, a container), the
 * agent is copied to the path its environment names, there too.
 */
void cupti__exec_stop(struct cupti *c, pid_t pid);
/*
 * Who may connect from now on (cupti__start() also sets it): call it as soon
 * as the target is known, so that a peer that is not the target gets no
 * connection slot even while the probes load.
 */
void cupti__set_target(struct cupti *c, pid_t pid, bool launched);
/*
 * The trace and the target (start_time: proc_start_time() of pid when it was
 * looked up, so that a later injection refuses another process with its
 * pid); until then, messages wait. launched: -- CMD (descendants count).
 */
int cupti__start(struct cupti *c, struct trace_writer *w, pid_t pid, uint64_t start_time,
		 bool launched);
/*
 * Several processes (record -p A,B, --children, --uid, --cgroup): agents
 * are taken from the processes in the BPF hash of tgids set_fd (proctree),
 * and from no other; each connection has its decoder, its records the
 * agent's pid. launched: -- CMD, whose processes load the agent through
 * CUDA_INJECTION64_PATH; else each process gets it injected once it maps
 * NVIDIA's driver (cupti__on_proc_map). Call it once set_fd exists, before
 * the set's processes run on.
 */
int cupti__start_set(struct cupti *c, struct trace_writer *w, int set_fd, bool launched);
/*
 * A set's libwatch_proc_fn: pid mapped NVIDIA's libcuda, so the next
 * cupti__poll() injects the agent into it, once per process image (m NULL:
 * pid exec'd, a new image that has no agent).
 */
int cupti__on_proc_map(void *ctx, pid_t pid, const struct proc_map *m);
/* Whether an agent of pid sent anything that was decoded (--per-process keeps its file). */
bool cupti__has_pid(void *ctx, pid_t pid);
/*
 * record -p: a libwatch_fn. Hearing of libcuda makes the next cupti__poll()
 * inject the agent into the target.
 */
int cupti__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias);
/* Decodes what agents sent since the last call; injects when due. Returns 0 or a writer error. */
int cupti__poll(struct cupti *c);
/*
 * Asks every agent to flush and stop, and decodes what comes until each has
 * said END (or timeout_ms passed); writes the loss counters.
 */
int cupti__stop(struct cupti *c, unsigned int timeout_ms);
/* Joins the API records of every agent's decoder (cupti_decoder__set_join). */
void cupti__set_join(struct cupti *c, cupti_join_fn fn, void *ctx);
/*
 * Where the agents' rings of CUDA calls go (fn NULL, the default: nowhere,
 * the agents' callbacks then fill their rings for no one).
 */
void cupti__set_calls(struct cupti *c, cupti_calls_fn fn, void *ctx);
/* One line about GPU activity, for record's summary. */
void cupti__summary(const struct cupti *c);
void cupti__free(struct cupti *c);

#endif /* PTG_CUPTI_H */
