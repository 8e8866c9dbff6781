// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Off-CPU intervals of the traced processes' threads, from the scheduler's
 * BTF tracepoints. A thread's interval ends when it is switched back in: the
 * event is sent then, from the switch, so it reaches the ring buffer after
 * every event the thread sent before it left and before any it sends next.
 *
 *   sched_switch (prev traced)  -> remember when and why it left
 *   sched_waking                -> who woke it (runs in the waker's context)
 *   sched_wakeup(_new)          -> when it became runnable again
 *   sched_switch (next traced)  -> SCHED_OFF: off-CPU time, run-queue delay
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/events.h"
#include "ringbuf.bpf.h"
#include "task.bpf.h"

#define TASK_DEAD 0x80 /* include/linux/sched.h */

/* enum ptg_sched_reason of user/trace/trace.h */
#define SCHED_PREEMPTED 1
#define SCHED_BLOCKED	2

struct off_cpu {
	__u64 off_ts;  /* 0: on a CPU, or not seen leaving one */
	__u64 wake_ts; /* 0: not woken yet */
	__u32 waker;
	__u32 reason;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* replaced by the tracer's shared ring buffer */
} events SEC(".maps");

/* Filled by user space with the tgids to trace. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

/*
 * Not an LRU map: one that replaces elements at each switch can evict a
 * sleeping thread's entry long before it is full, and lose that interval.
 * Entries are changed in place and removed at their thread's last switch.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct off_cpu);
} off_cpu SEC(".maps");

/*
 * Whether sched_switch passes prev_state, its 4th argument since 5.18; set by
 * the loader from the kernel's BTF. Frozen, it is a constant to the verifier,
 * which then never checks the 4th argument's read on a kernel without it.
 * Off by default, so the object loads anywhere as it is (bpftool).
 */
const volatile bool switch_has_state = false;

__u64 lost_events = 0; /* ring buffer full */
__u64 lost_state = 0;  /* a thread's state could not be stored */
__u64 lost_unseen = 0; /* an unseen switch-in whose time cannot be estimated */

static __always_inline bool traced(const struct task_struct *p)
{
	__u32 tgid = p->tgid;

	return bpf_map_lookup_elem(&tgids, &tgid) != NULL;
}

static __always_inline void send_interval(struct task_struct *p, struct off_cpu *oc, __u64 end)
{
	struct ptg_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->ts = oc->off_ts;
	e->pid = p->tgid;
	e->tid = p->pid;
	e->kind = PTG_EV_SCHED_OFF;
	e->cpu = bpf_get_smp_processor_id();
	e->aux = oc->reason;
	e->a = end - oc->off_ts;
	/* runnable all along when preempted; else since the wakeup */
	if (oc->reason == SCHED_PREEMPTED)
		e->b = e->a;
	else
		e->b = oc->wake_ts && oc->wake_ts < end ? end - oc->wake_ts : 0;
	e->c = oc->waker;
	e->d = 0;
	/*
	 * Waking the loader at each switch-in would let it preempt the thread
	 * that just switched in, whose next switch-in wakes it again: the
	 * shared rule wakes it only when the buffer fills (it polls anyway).
	 */
	bpf_ringbuf_submit(e, ptg_wakeup_flags(&events));
}

/*
 * The thread is leaving a CPU while still off since its previous switch:
 * the switch that put it back never reached this program (a kernel can
 * leave switches out of the tracepoint: here, those from some tasks of the
 * host's own agent). The interval is closed now, ending when the thread was
 * last picked: before this switch by the CPU time it got since
 * (sum_exec_runtime counts from prev_sum_exec_runtime, set when picked).
 */
static __always_inline void close_unseen(struct task_struct *p, struct off_cpu *oc, __u64 ts)
{
	__u64 ran = p->se.sum_exec_runtime - p->se.prev_sum_exec_runtime;

	if (ran < ts - oc->off_ts)
		send_interval(p, oc, ts - ran);
	else
		__sync_fetch_and_add(&lost_unseen, 1);
	oc->off_ts = 0;
}

static __always_inline void leave(struct task_struct *p, __u64 ts, __u32 reason, __u64 wake_ts,
				  __u32 waker)
{
	struct off_cpu *oc, init = {};
	__u32 tid = p->pid;

	oc = bpf_map_lookup_elem(&off_cpu, &tid);
	if (!oc) {
		if (bpf_map_update_elem(&off_cpu, &tid, &init, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&off_cpu, &tid)) {
			__sync_fetch_and_add(&lost_state, 1);
			return;
		}
		oc = bpf_map_lookup_elem(&off_cpu, &tid);
		if (!oc)
			return;
	}
	/* a new thread with the tid of one whose last switches were not seen */
	if (oc->off_ts)
		__sync_fetch_and_add(&lost_unseen, 1);
	oc->wake_ts = wake_ts;
	oc->waker = waker;
	oc->reason = reason;
	oc->off_ts = ts;
}

static __always_inline void arrive(struct task_struct *p, __u64 ts)
{
	struct off_cpu *oc;
	__u32 tid = p->pid;

	oc = bpf_map_lookup_elem(&off_cpu, &tid);
	/* off since before recording started: when it left is unknown */
	if (!oc || !oc->off_ts)
		return;
	send_interval(p, oc, ts);
	oc->off_ts = 0;
}

/* Not BPF_PROG: that reads all four arguments up front, the 4th one included. */
SEC("tp_btf/sched_switch")
int sched_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	__u64 ts = bpf_ktime_get_ns();

	/*
	 * A task preempted between set_current_state() and schedule() has a
	 * sleeping prev_state but stays on the run queue: preempt says so.
	 */
	if (traced(prev)) {
		unsigned int prev_state = ptg_switch_prev_state(ctx, switch_has_state, prev);
		__u32 tid = prev->pid;
		struct off_cpu *oc = bpf_map_lookup_elem(&off_cpu, &tid);

		if (oc && oc->off_ts)
			close_unseen(prev, oc, ts);
		if (prev_state & TASK_DEAD)
			bpf_map_delete_elem(&off_cpu, &tid);
		else
			leave(prev, ts,
			      preempt || prev_state == 0 ? SCHED_PREEMPTED : SCHED_BLOCKED, 0, 0);
	}
	if (traced(next))
		arrive(next, ts);
	return 0;
}

/* sched_waking runs in the waker's context; sched_wakeup may run on the wakee's CPU. */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct off_cpu *oc;
	__u32 tid;

	if (!traced(p))
		return 0;
	tid = p->pid;
	oc = bpf_map_lookup_elem(&off_cpu, &tid);
	if (oc && oc->off_ts)
		oc->waker = (__u32)bpf_get_current_pid_tgid();
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	struct off_cpu *oc;
	__u32 tid;

	if (!traced(p))
		return 0;
	tid = p->pid;
	oc = bpf_map_lookup_elem(&off_cpu, &tid);
	if (oc && oc->off_ts && !oc->wake_ts)
		oc->wake_ts = bpf_ktime_get_ns();
	return 0;
}

/*
 * A new thread waits on the run queue before it first runs: an off-CPU
 * interval, runnable throughout, that its creator started.
 */
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	__u64 ts;

	if (!traced(p))
		return 0;
	ts = bpf_ktime_get_ns();
	leave(p, ts, SCHED_PREEMPTED, ts, (__u32)bpf_get_current_pid_tgid());
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
