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
 * site (PTG_OP_COOKIE in events.h). The event carries that stack pointer: it
 * is the same at the entry and at every exit of one invocation, so user
 * space pairs an exit with its entry by it, and knows that an op whose entry
 * stack pointer is at or below a later event's was left by an exception.
 *
 * The same program is loaded twice: op_multi for one BPF_TRACE_UPROBE_MULTI
 * link per library (kernel 6.6+), op_single for the fallback of one perf
 * event per site.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/events.h"
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

static __always_inline int emit(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u64 sp = PT_REGS_SP(ctx), fp = PT_REGS_FP(ctx);
	__u32 tgid = id >> 32;
	struct ptg_event *e;

	if (ptg_not_traced(tgid))
		return 0;
	/* two plain loads: the verifier refuses a context access at a computed offset */
	barrier_var(sp);
	barrier_var(fp);

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
	return emit(ctx);
}

SEC("uprobe")
int op_single(struct pt_regs *ctx)
{
	return emit(ctx);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
