// SPDX-License-Identifier: MIT
/* Scheduler probes: off-CPU intervals of the target's threads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/log.h"
#include "proc/kfeat.h"
#include "ptrace_gpu/events.h"
#include "sched.skel.h"
#include "sched/sched.h"

struct sched {
	struct sched_bpf *skel;
	struct tracer *t;
	struct cudaprobe *cuda;
	uint64_t intervals;
};

/* The external id of the innermost op open on the thread. */
static uint64_t op_ext(const struct tracer_thread *th)
{
	for (uint32_t i = th->depth; i > 0; i--) {
		if (th->stack[i - 1].kind == PTG_REC_OP_ENTER)
			return th->stack[i - 1].ext;
	}
	return 0;
}

/*
 * The thread has not run since it left the CPU: the frames, op and CUDA
 * call open on it now are the ones it was in while off. Except where the
 * kernel left its switch back in out of the tracepoint: then the interval
 * is sent at its next switch out (close_unseen() in bpf/sched.bpf.c), after
 * what it did in between, and a CUDA call it began meanwhile is not the
 * one it was off in.
 */
static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct sched *s = ctx;
	struct tracer_thread *th;
	struct ptg_record r = {
	    .kind = PTG_REC_SCHED,
	    .pid = e->pid,
	    .tid = e->tid,
	    .ts = e->ts,
	    .dur = e->a,
	    .device = e->cpu,
	    .aux = {e->aux, (int64_t)e->b, (int64_t)e->c},
	};
	uint64_t call_id;

	if (e->kind != PTG_EV_SCHED_OFF)
		return 0;
	th = tracer__thread(t, e->pid, e->tid, e->ts + e->a);
	if (!th)
		return -ENOMEM;
	r.ext = op_ext(th);
	cudaprobe__current(s->cuda, e->pid, e->tid, e->ts, &r.sym, &call_id);
	r.aux[3] = (int64_t)call_id;
	s->intervals++;
	return tracer__record(t, &r);
}

static int write_losses(struct tracer *t, void *ctx)
{
	const struct sched_bpf__bss *bss = ((struct sched *)ctx)->skel->bss;
	struct trace_writer *w = tracer__writer(t);
	int err = 0;

	if (bss->lost_events)
		err = trace_writer__lost(w, PTG_LOST_SCHED_EVENT, UINT32_MAX, bss->lost_events);
	if (!err && bss->lost_state)
		err =
		    trace_writer__lost(w, PTG_LOST_SCHED_THREAD_STATE, UINT32_MAX, bss->lost_state);
	if (!err && bss->lost_unseen)
		err = trace_writer__lost(w, PTG_LOST_SCHED_SWITCH_UNSEEN, UINT32_MAX,
					 bss->lost_unseen);
	return err;
}

static int open_common(struct tracer *t, pid_t pid, int tgids_fd, struct cudaprobe *cuda,
		       struct sched **out)
{
	__u32 tgid = (__u32)pid;
	__u8 one = 1;
	struct sched *s;
	int err;

	_Static_assert(PTG_SCHED_PREEMPTED == 1 && PTG_SCHED_BLOCKED == 2,
		       "bpf/sched.bpf.c sends these values");
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->t = t;
	s->cuda = cuda;
	s->skel = sched_bpf__open();
	if (!s->skel) {
		err = -errno;
		goto cleanup;
	}
	/* prev_state: sched_switch's 4th argument since 5.18 */
	s->skel->rodata->switch_has_state = kfeat_tp_btf_args("sched_switch") >= 4;
	err = bpf_map__reuse_fd(s->skel->maps.events, tracer__ringbuf_fd(t));
	if (!err && tgids_fd >= 0)
		err = bpf_map__reuse_fd(s->skel->maps.tgids, tgids_fd);
	err = err ?: sched_bpf__load(s->skel);
	if (!err && tgids_fd < 0 &&
	    bpf_map_update_elem(bpf_map__fd(s->skel->maps.tgids), &tgid, &one, BPF_ANY))
		err = -errno;
	err =
	    err ?: tracer__on(t, PTG_EV_SCHED_OFF, PTG_EV_SCHED_OFF, handle_event, write_losses, s);
	if (err)
		goto cleanup;
	*out = s;
	return 0;
cleanup:
	log_libbpf_flush();
	pr_err("sched: cannot load the scheduler probes: %s", strerror(-err));
	sched__destroy(s);
	return err;
}

int sched__open(struct tracer *t, pid_t pid, struct cudaprobe *cuda, struct sched **out)
{
	return open_common(t, pid, -1, cuda, out);
}

int sched__open_set(struct tracer *t, int tgids_fd, struct cudaprobe *cuda, struct sched **out)
{
	return open_common(t, 0, tgids_fd, cuda, out);
}

int sched__attach(struct sched *s)
{
	int err = sched_bpf__attach(s->skel);

	if (err) {
		log_libbpf_flush();
		pr_err("sched: cannot attach to the scheduler tracepoints: %s", strerror(-err));
	}
	return err;
}

void sched__detach(struct sched *s)
{
	if (s)
		sched_bpf__detach(s->skel);
}

void sched__summary(const struct sched *s)
{
	if (s)
		pr_info("%llu off-CPU intervals of the target's threads",
			(unsigned long long)s->intervals);
}

void sched__destroy(struct sched *s)
{
	if (!s)
		return;
	sched_bpf__destroy(s->skel);
	free(s);
}
