/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The running thread's PyThreadState, the same way on every CPython from
 * 3.11 on. 3.12+ keep the current thread state in a thread-local variable
 * (_Py_tss_tstate) whose address BPF cannot compute for a dlopen'ed
 * libpython, and free-threaded builds have no single GIL holder; but every
 * thread state is on its interpreter's list with the thread's native id.
 * So: walk the lists once per thread, cache tid -> tstate, and check the
 * cached one on each use (thread states and tids are both reused).
 */
#ifndef PTG_PYSTATE_BPF_H
#define PTG_PYSTATE_BPF_H

#include <bpf/bpf_core_read.h>

#include "ptrace_gpu/pyoffsets.h"

#define PY_MAX_TSTATE_WALK 1024

/*
 * The offsets are passed as pointers to volatile: record keeps them in a
 * `const volatile` .rodata variable set before load, and through a plain
 * const pointer clang would fold every read to the variable's initializer (0).
 */

/* The cached PyThreadState of a thread and its id as that thread's namespace sees it. */
struct py_thread {
	__u64 tstate;
	__u32 ns_tid;
	__u32 pad;
};

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (!addr || bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/*
 * PyThreadState.native_thread_id is gettid() in the target's pid namespace:
 * in a container it differs from the host tid that BPF sees first.
 */
static __always_inline __u32 py_ns_tid(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pid *pid = BPF_CORE_READ(task, thread_pid);
	unsigned int level = BPF_CORE_READ(pid, level);
	struct upid up = {};

	bpf_core_read(&up, sizeof(up), &pid->numbers[level & 31]);
	return (__u32)up.nr;
}

struct py_tstate_walk {
	const volatile struct ptg_py_offsets *off;
	__u64 interp;
	__u64 t;
	__u64 found;
	__u32 tid;
};

static long py_tstate_step(__u32 i, void *arg)
{
	struct py_tstate_walk *w = arg;
	const volatile struct ptg_py_offsets *off = w->off;

	if (!w->t) {
		/* subinterpreters keep their own thread lists */
		w->interp = py_read_ptr(w->interp + off->interp_next);
		if (!w->interp)
			return 1;
		w->t = py_read_ptr(w->interp + off->interp_threads_head);
		return 0;
	}
	if ((__u32)py_read_ptr(w->t + off->tstate_native_tid) == w->tid) {
		w->found = w->t;
		return 1;
	}
	w->t = py_read_ptr(w->t + off->tstate_next);
	return 0;
}

/* The PyThreadState whose native_thread_id is ns_tid, or 0. */
static __always_inline __u64 py_walk_tstates(const volatile struct ptg_py_offsets *off,
					     __u64 runtime_addr, __u32 ns_tid)
{
	struct py_tstate_walk w = {.off = off, .tid = ns_tid};

	w.interp = py_read_ptr(runtime_addr + off->runtime_interp_head);
	if (!w.interp)
		return 0;
	w.t = py_read_ptr(w.interp + off->interp_threads_head);
	/* bpf_loop: the verifier checks the step once, not each iteration */
	bpf_loop(PY_MAX_TSTATE_WALK, py_tstate_step, &w, 0);
	return w.found;
}

/*
 * The innermost frame of a thread state: through _PyCFrame up to 3.12,
 * directly from 3.13. 0 when unreadable.
 */
static __always_inline __u64 py_tstate_frame(const volatile struct ptg_py_offsets *off,
					     __u64 tstate)
{
	__u64 holder = tstate;

	if (off->tstate_cframe != PTG_OFF_NONE) {
		holder = py_read_ptr(tstate + off->tstate_cframe);
		if (!holder)
			return 0;
	}
	return py_read_ptr(holder + off->cframe_current_frame);
}

#endif /* PTG_PYSTATE_BPF_H */
