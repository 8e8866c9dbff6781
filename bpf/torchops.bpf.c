// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * PyTorch dispatcher op probes: one uprobe at the entry of each
 * at::_ops::<op>::call and one on the way to each of its exits (the
 * stack-protector check before a ret, the ret itself where there is none,
 * the jump of a tail call), never a uretprobe: a C++ exception that unwinds
 * through a uretprobe's trampoline ends the target in std::terminate.
 *
 * The bpf_cookie of each site says which op it belongs to, whether it is the
 * entry or an exit, and where the stack pointer of the op's entry is at that
 * site (PTG_OP_COOKIE in events.h); before 5.15 the legacy build finds it by
 * the site (sitecookie.bpf.h). The event carries that stack pointer: it
 * is the same at the entry and at every exit of one invocation, so user
 * space pairs an exit with its entry by it, and knows that an op whose entry
 * stack pointer is at or below a later event's was left by an exception.
 *
 * The same program is loaded twice: op_multi for one BPF_TRACE_UPROBE_MULTI
 * link per library (kernel 6.6+), op_single for the fallback of one perf
 * event per site. op_trigger is record -- CMD's one probe (below).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "hold.bpf.h"
#include "ptrace_gpu/events.h"
#include "preempt.bpf.h"
#include "ringbuf.bpf.h"
#include "traced.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* replaced by the tracer's ring buffer */
} events SEC(".maps");

/*
 * Several processes (record -p A,B, --children): the sites sit on the
 * library file for every process that maps it (traced.bpf.h). The cookie
 * is relative to the function, so one attach serves every process wherever
 * it maps the file.
 */

__u64 lost[PTG_MAX_CPUS] = {};

/*
 * record -- CMD: ops from the RecordFunction callback instead of these
 * probes (user/record/record_python.c, on_urg()). The command's main
 * thread is under our ptrace; its first op stops it at op_trigger (a
 * SIGURG, whose delivery is a ptrace stop of ours), the op agent goes in
 * right there, and the op itself is then seen by the callback, as is every
 * op after it. The op probes go in only where the agent does not: none of
 * the thousands of sites is attached (or, without uprobe_multi, closed one
 * grace period each) for a command that gets the agent or never runs an op.
 * recorder_tgid: ours, the tracer the thread must have.
 */
const volatile __u32 recorder_tgid = 0;
/* set by user space once a process is armed: until then no op pays the map lookup */
bool handover_any = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); /* tgid */
	__type(value, struct ptg_op_handover);
} handover SEC(".maps");

#ifdef PTG_BPF_LEGACY
/*
 * Before 5.12 (atomics) no compare-and-swap: the first thread to create its
 * process's claim moves the hand-over (an update with BPF_NOEXIST is atomic),
 * and the claim says to those after it where it went, though h's state may
 * not say so yet. torchops__handover_arm() deletes it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);   /* tgid */
	__type(value, __u64); /* enum ptg_op_handover_state */
} handover_claim SEC(".maps");

#include "sitecookie.bpf.h"

/* Moves h from ARMED to want, 1, unless another thread moved it first: 0, where to in *now. */
static __always_inline int handover_move(struct ptg_op_handover *h, __u32 tgid, __u64 want,
					 __u64 *now)
{
	__u64 *won;

	if (!bpf_map_update_elem(&handover_claim, &tgid, &want, BPF_NOEXIST)) {
		h->state = want;
		return 1;
	}
	won = bpf_map_lookup_elem(&handover_claim, &tgid);
	*now = won ? *won : PTG_OP_HANDOVER_OFF;
	return 0;
}

static __always_inline int site_cookie(struct pt_regs *ctx, __u64 *cookie)
{
	return ptg_site_cookie(ctx, cookie);
}
#else
static __always_inline int handover_move(struct ptg_op_handover *h, __u32 tgid, __u64 want,
					 __u64 *now)
{
	*now = __sync_val_compare_and_swap(&h->state, PTG_OP_HANDOVER_ARMED, want);
	return *now == PTG_OP_HANDOVER_ARMED;
}

static __always_inline int site_cookie(struct pt_regs *ctx, __u64 *cookie)
{
	*cookie = bpf_get_attach_cookie(ctx);
	return 0;
}
#endif

/*
 * 1 when this op is not the probes' to record (see handover above): the
 * callback's, or its process waits for the agent or for these probes to go
 * in (op_trigger counts the ops meanwhile).
 */
static __always_inline int handed_over(__u32 tgid)
{
	struct ptg_op_handover *h = bpf_map_lookup_elem(&handover, &tgid);

	return h && h->state >= PTG_OP_HANDOVER_STOPPED;
}

static __always_inline int emit(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sp = PT_REGS_SP(ctx), fp = PT_REGS_FP(ctx);
	__u32 tgid = id >> 32;
	struct ptg_event *e;
	__u64 cookie;

	/* two plain loads: the verifier refuses a context access at a computed offset */
	barrier_var(sp);
	barrier_var(fp);
	if (ptg_not_traced(tgid) || site_cookie(ctx, &cookie) ||
	    (handover_any && handed_over(tgid)))
		return 0;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost[bpf_get_smp_processor_id() & (PTG_MAX_CPUS - 1)], 1);
		return 0;
	}
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind =
	    PTG_OP_COOKIE_SITE(cookie) == PTG_OP_SITE_ENTRY ? PTG_EV_OP_ENTER : PTG_EV_OP_EXIT;
	e->cpu = bpf_get_smp_processor_id();
	e->aux = PTG_OP_COOKIE_SITE(cookie);
	e->a = PTG_OP_COOKIE_OP(cookie);
	/* the stack pointer the op had at its entry, wherever in the op this is */
	e->b = (PTG_OP_COOKIE_FP(cookie) ? fp : sp) + (__s64)PTG_OP_COOKIE_DELTA(cookie);
	e->c = 0;
	e->d = 0;
	bpf_ringbuf_submit(e, ptg_wakeup_flags(&events));
	return 0;
}

/* expected_attach_type is set to BPF_TRACE_UPROBE_MULTI before load: libbpf 1.1 knows no such
 * section */
SEC("uprobe")
int op_multi(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(emit(ctx));
}

SEC("uprobe")
int op_single(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(emit(ctx));
}

/*
 * The hand-over's one probe, at the entry of at::getStepCallbacksUnlessEmpty(),
 * which c10::Dispatcher::call (inlined in every at::_ops::<op>::call) calls
 * before it runs the op and before it reads the RecordFunction callbacks: the
 * main thread stopped here reads them only once resumed, after the agent
 * registered its own, so the op that stopped it is the callback's first. Its
 * return address names that op, for the probes when the agent cannot go in.
 */
static __always_inline int op_trigger_body(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sp = PT_REGS_SP(ctx), fp = PT_REGS_FP(ctx);
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ptg_op_handover *h;
	bool stop, agent;
	__u64 now;

	barrier_var(sp);
	barrier_var(fp);
	h = bpf_map_lookup_elem(&handover, &tgid);
	if (!h)
		return 0;
	if (h->state != PTG_OP_HANDOVER_ARMED) {
		/* another thread's op while the first waits for the agent or the probes */
		if (h->state == PTG_OP_HANDOVER_STOPPED || h->state == PTG_OP_HANDOVER_UNSTOPPED)
			__sync_fetch_and_add(&h->missed, 1);
		return 0;
	}
	/*
	 * its main thread: the one the agent goes in through (user/inject/inject.c);
	 * another thread, or the signal could reach it: the probes go in instead,
	 * while that other thread waits in the same stop where it can
	 */
	stop = ptg_can_stop(recorder_tgid);
	agent = stop && tid == tgid;
	if (!handover_move(h, tgid, agent ? PTG_OP_HANDOVER_STOPPED : PTG_OP_HANDOVER_UNSTOPPED,
			   &now)) {
		/* another thread moved it first: as above, had it seen that */
		if (now == PTG_OP_HANDOVER_STOPPED || now == PTG_OP_HANDOVER_UNSTOPPED)
			__sync_fetch_and_add(&h->missed, 1);
		return 0;
	}
	h->tid = tid;
	h->ts = bpf_ktime_get_ns();
	h->cpu = bpf_get_smp_processor_id();
	h->sp = sp + 8; /* the caller's, before its call pushed the return address */
	h->fp = fp;
	if (bpf_probe_read_user(&h->ret, sizeof(h->ret), (void *)sp))
		h->ret = 0;
	h->held = stop;
	if (stop)
		bpf_send_signal_thread(SIGURG_NR);
	else /* this op runs on unrecorded: nothing is probed yet */
		__sync_fetch_and_add(&h->missed, 1);
	return 0;
}

SEC("uprobe")
int op_trigger(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(op_trigger_body(ctx));
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
