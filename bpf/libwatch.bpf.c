// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The dynamic loader calls _dl_debug_state() (the r_brk hook debuggers use)
 * before and after it maps or unmaps objects: one event each time tells the
 * loader to look for libraries that appeared (libtorch imported late,
 * libcuda loaded at first CUDA use); and one at each exec of the target.
 * At each of those notices, and when a traced process ends, it also reports
 * the CUDA and PyTorch libraries the process has mapped that no probe of
 * ours is on yet (PTG_LIB_MAP): their calls go unrecorded until the probes
 * are in, and user space says so even when it looks too late to see it.
 * A thread we hold under ptrace that maps one is stopped right there, at
 * the notice, until the probes are in (bpf/hold.bpf.h): its first call into
 * the library is then recorded however it was loaded.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "hold.bpf.h"
#include "ptrace_gpu/events.h"
#include "preempt.bpf.h"

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

/*
 * inode -> 1: the watched libraries whose probes are in, put here by user
 * space once they are (user/libwatch/libwatch.c mark_probed()).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} probed SEC(".maps");

/* open-coded VMA iterator (6.7+); weak: without it, nothing is reported */
extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __ksym __weak;
extern struct vm_area_struct *bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __ksym __weak;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __ksym __weak;

/* ours: a thread of the recorded processes under our ptrace (a held one) may be stopped */
const volatile __u32 recorder_tgid = 0;

/*
 * tid -> when, and whose: the threads stopped at a notice, so that user
 * space tells our SIGURG from another's at the stop (user/libwatch/libwatch.c
 * libwatch__held_stop()), whether or not it has read the notice yet.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct ptg_lib_held);
} held SEC(".maps");

/*
 * tgid -> 1: a held process that runs no Python yet (an embedding program):
 * a libpython it maps unprobed stops it as well, until its interpreter is
 * found and probed (user/record/target.c).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* a set's held members (PROCTREE_MAX) */
	__type(key, __u32);
	__type(value, __u8);
} nopy SEC(".maps");

__u64 lost = 0;

static __always_inline struct ptg_event *reserve_notice(__u32 aux)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct ptg_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost, 1);
		return NULL;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts = bpf_ktime_get_ns();
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->kind = PTG_EV_LIB_CHANGE;
	e->aux = aux;
	e->cpu = bpf_get_smp_processor_id();
	return e;
}

#define VM_EXEC 0x00000004 /* include/linux/mm.h: a #define, not in BTF */

/*
 * The base names user space watches (libwatch.c watched_libs: libcuda.so*,
 * libcudart.so*, libcudart-*.so*, libtorch_cpu.so*), by prefix: user space
 * checks the whole pattern.
 */
static __always_inline bool prefix(const char *s, const char *p, int n)
{
	for (int i = 0; i < n; i++) {
		if (s[i] != p[i])
			return false;
	}
	return true;
}

static __always_inline bool watched_name(const char *s)
{
	return prefix(s, "libcuda.so", 10) || prefix(s, "libcudart", 9) ||
	       prefix(s, "libtorch_cpu.so", 15);
}

static __always_inline void send_unprobed(__u32 tgid, __u64 ino, const char *name, __u64 when)
{
	struct ptg_lib_map_event *m;

	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	__builtin_memset(&m->e, 0, sizeof(m->e));
	__builtin_memcpy(m->name, name, sizeof(m->name));
	m->e.ts = bpf_ktime_get_ns();
	m->e.pid = tgid;
	m->e.tid = (__u32)bpf_get_current_pid_tgid();
	m->e.kind = PTG_EV_LIB_CHANGE;
	m->e.aux = PTG_LIB_MAP;
	m->e.cpu = bpf_get_smp_processor_id();
	m->e.a = ino;
	m->e.b = when;
	bpf_ringbuf_submit(m, BPF_RB_FORCE_WAKEUP);
}

/*
 * The watched libraries task has mapped executable with no probe on them:
 * at a loader notice, before the code of what it just mapped runs (the
 * notice after mapping comes before relocation and constructors), so one
 * not reported here had its probes in before its first call; at the end of
 * the process, for one whose loader has no probe of ours (a chroot's ld.so).
 * when: PTG_LIB_MAP_* (events.h). Returns whether any was reported (a
 * flag, not a count: a count would be a new verifier state at each VMA).
 */
static __always_inline bool report_unprobed(struct task_struct *task, __u32 tgid, __u64 when,
					    bool python)
{
	struct bpf_iter_task_vma it;
	struct vm_area_struct *v;
	char name[PTG_LIB_NAME_LEN];
	bool any = false;

	if (!bpf_iter_task_vma_new) /* libbpf sets a missing weak kfunc to 0 */
		return false;
	bpf_iter_task_vma_new(&it, task, 0);
	/* the iterator ends by itself, at the last of the process's VMAs */
	while ((v = bpf_iter_task_vma_next(&it))) {
		struct file *f = v->vm_file;
		__u64 ino;

		if (!f || !(v->vm_flags & VM_EXEC))
			continue;
		ino = BPF_CORE_READ(f, f_inode, i_ino);
		if (bpf_map_lookup_elem(&probed, &ino))
			continue;
		if (bpf_probe_read_kernel_str(name, sizeof(name),
					      BPF_CORE_READ(f, f_path.dentry, d_name.name)) < 0 ||
		    !(watched_name(name) || (python && prefix(name, "libpython3", 10))))
			continue;
		send_unprobed(tgid, ino, name, when);
		any = true;
	}
	bpf_iter_task_vma_destroy(&it);
	return any;
}

/*
 * The notice is reserved first and sent last, so that it is read before the
 * reports it comes with (a record reserved earlier is read first). A thread
 * of ours that mapped an unprobed watched library stops at the notice: the
 * notice says so (a = 1), and user space resumes it once the probes are in.
 */
static __always_inline int dl_debug_state_body(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ptg_event *e;
	bool stop;

	if (filter_tgids && !bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	e = reserve_notice(0);
	/* without the notice (ring buffer full) nothing would tell user space to resume it */
	stop = e && ptg_can_stop(recorder_tgid);
	if (report_unprobed(ptg_current_task(), tgid, stop ? PTG_LIB_MAP_HELD : PTG_LIB_MAP_NOTICE,
			    stop && bpf_map_lookup_elem(&nopy, &tgid)) &&
	    stop && e /* known to the verifier */) {
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct ptg_lib_held h = {.ts = e->ts, .tgid = tgid};

		/* a thread not stopped after all is said as one probed late (a = 0) */
		if (!bpf_map_update_elem(&held, &tid, &h, BPF_ANY) &&
		    !bpf_send_signal_thread(SIGURG_NR))
			e->a = 1;
		else
			bpf_map_delete_elem(&held, &tid);
	}
	if (e)
		bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("uprobe")
int dl_debug_state(void *ctx)
{
	return PTG_NO_PREEMPT(dl_debug_state_body(ctx));
}

/*
 * The target replaced its image: every mapping is new, and the loader that
 * runs next may be another file (a chroot's) than the one probed.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(lib_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct ptg_event *e;
	struct inode *ino;

	if (!bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	e = reserve_notice(PTG_LIB_EXEC);
	if (!e)
		return 0;
	/*
	 * The file it now runs: user space decides with it alone whether the
	 * probes still fit a process that ended before its new image was read
	 */
	ino = BPF_CORE_READ(bprm, file, f_inode);
	e->a = BPF_CORE_READ(ino, i_ino);
	e->b = BPF_CORE_READ(ino, i_sb, s_dev);
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
	return 0;
}

/*
 * The last thread of a traced process ends, its mappings still there: attached
 * before proctree's exit program, which takes the process out of the set.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(lib_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (!ptg_group_dead(p) || !bpf_map_lookup_elem(&tgids, &tgid))
		return 0;
	report_unprobed(p, tgid, PTG_LIB_MAP_EXIT, false);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
