/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/sched.bpf.c: off-CPU intervals of the target's
 * threads, written as PTG_REC_SCHED records into each thread's stream when
 * the thread runs again, so they nest in the Python frames, op and CUDA call
 * it was in. docs/cuda-sched.md describes the records.
 */
#ifndef PTG_SCHEDPROBE_H
#define PTG_SCHEDPROBE_H

#include <stdint.h>
#include <sys/types.h>

#include "cuda/cuda.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

struct sched;

/* Loads the scheduler programs for the threads of process pid; cuda may be NULL. */
int sched__open(struct tracer *t, pid_t pid, struct cudaprobe *cuda, struct sched **out);
/* The same for the processes of a BPF hash of tgids that others keep (user/procs/proctree.c). */
int sched__open_set(struct tracer *t, int tgids_fd, struct cudaprobe *cuda, struct sched **out);
int sched__attach(struct sched *s);
void sched__detach(struct sched *s);
/* record's closing line about off-CPU intervals; nothing for NULL. */
void sched__summary(const struct sched *s);
void sched__destroy(struct sched *s);

#endif /* PTG_SCHEDPROBE_H */
