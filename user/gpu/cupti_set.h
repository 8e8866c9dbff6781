/* SPDX-License-Identifier: MIT */
/*
 * The CUPTI agent in each process of a set (record -p A,B, --children,
 * --uid, --cgroup): which processes map NVIDIA's driver, and the agent
 * injected once per process image.
 */
#ifndef PTG_CUPTI_SET_H
#define PTG_CUPTI_SET_H

#include <stdbool.h>
#include <sys/types.h>

#include "proc/procfs.h"
#include "trace/trace.h"

struct cupti;

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

#endif /* PTG_CUPTI_SET_H */
