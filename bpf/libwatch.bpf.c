// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The dynamic loader calls _dl_debug_state() (the r_brk hook debuggers use)
 * before and after it maps or unmaps objects: one event each time tells the
 * loader to look for libraries that appeared (libtorch imported late,
 * libcuda loaded at first CUDA use); and one at each exec of the target.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/events.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* replaced by the tracer's shared ring buffer */
} events SEC(".maps");

/*
 * Filled by user space with the tgids whose execs to report; for a set of
 * processes (filter_tgids), the recorded set itself (bpf/proctree.bpf.c),
 * and then the loader probe sits on the file for every process and reports
 * only those of the set.
 */
const volatile bool filter_tgids = false;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

__u64 lost = 0;

static __always_inline int notify(__u32 aux)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ptg_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = PTG_EV_LIB_CHANGE;
	e->aux = aux;
	e->cpu = bpf_get_smp_processor_id();
	/* rare, and probes for the new library should go in at once */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("uprobe")
int dl_debug_state(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (filter_tgids && !bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	return notify(0);
}

/*
 * The target replaced its image: every mapping is new, and the loader that
 * runs next may be another file (a chroot's) than the one probed.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(lib_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;

	if (!bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	return notify(PTG_LIB_EXEC);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
