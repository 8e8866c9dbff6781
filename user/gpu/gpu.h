/* SPDX-License-Identifier: MIT */
/*
 * GPU activity through the CUPTI agent (agent/ptg_cupti_agent.c): the
 * loader's side. struct cupti runs the socket the agents of one recording
 * connect to, and brings the agent into the target (CUDA_INJECTION64_PATH
 * for `record -- CMD`, ptrace for `record -p`; a set's processes:
 * cupti_set.h). docs/gpu.md has the whole picture. Inside, top down:
 * gpu.c (the agent and its connections), cupti_set.c (an agent in each
 * process of a set), cupti_inject.c (into one process), cupti_reader.c (the
 * socket's reader thread), cupti_decode.c (messages -> records),
 * cupti_clock.c (clock mapping), cupti_proto.c (the stream's framing).
 */
#ifndef PTG_GPU_H
#define PTG_GPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu/cupti_types.h"
#include "proc/procfs.h"
#include "trace/trace.h"

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

#endif /* PTG_GPU_H */
