// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * record --children: the set of recorded processes follows forks in the
 * kernel itself. A fork of a recorded process is put in the set in the
 * parent's fork, before the child first runs, so the probes' filter
 * (bpf/pyframe.bpf.c) lets its very first call through; user space hears of
 * it afterwards, in order with the events of the parent. Exec keeps a
 * process in the set (its new program may run Python, or start processes
 * that do); the end of its last thread takes it out.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/events.h"
#include "task.bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* replaced by the tracer's shared ring buffer */
} events SEC(".maps");

/* tgid -> 1: the processes recorded; shared with every probe object that filters by it */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* replaced by the loader's map */
	__type(key, __u32);
	__type(value, __u8);
} traced SEC(".maps");

/* --uid: an exec by this user (real uid) puts its process in the set; -1: none */
const volatile __u32 watch_uid = (__u32)-1;

/* --cgroup: an exec by a task of this cgroup v2 (or one below) puts its process in the set */
const volatile bool watch_cgroup = false;

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cgroups SEC(".maps");

__u64 lost_events = 0; /* ring buffer full: user space learns of the process at its first event */
__u64 lost_full = 0;   /* the set is full: a child not recorded */

static __always_inline void send(__u16 kind, __u32 pid, __u32 tid, __u32 parent)
{
	struct ptg_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->pid = pid;
	e->tid = tid;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->a = parent;
	/* rare; an exec into an interpreter not probed yet waits for the loader */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* Runs in the parent, after the child is made and before it is first woken up. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(tree_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	/* a new thread shares its process's tgid: only new processes matter */
	if (child->pid != child->tgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0;
	if (bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY)) {
		__sync_fetch_and_add(&lost_full, 1);
		return 0;
	}
	send(PTG_EV_PROC_FORK, ctgid, ctgid, ptgid);
	return 0;
}

static __always_inline bool watched(void)
{
	if (watch_uid != (__u32)-1 && (__u32)bpf_get_current_uid_gid() == watch_uid)
		return true;
	return watch_cgroup && bpf_current_task_under_cgroup(&cgroups, 0) == 1;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tree_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	__u8 one = 1;

	/* runs in the task that exec()s: the current uid and cgroup are its own */
	if (!bpf_map_lookup_elem(&traced, &tgid)) {
		if (!watched())
			return 0;
		if (bpf_map_update_elem(&traced, &tgid, &one, BPF_ANY)) {
			__sync_fetch_and_add(&lost_full, 1);
			return 0;
		}
	}
	send(PTG_EV_PROC_EXEC, tgid, p->pid, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tree_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (!ptg_group_dead(p) || bpf_map_delete_elem(&traced, &tgid))
		return 0;
	send(PTG_EV_PROC_EXIT, tgid, p->pid, 0);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
