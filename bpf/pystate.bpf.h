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
#include "loop.bpf.h"
#include "task.bpf.h"

#define PY_MAX_TSTATE_WALK	  1024
#define PY_MAX_TSTATE_WALK_LEGACY 64 /* loop.bpf.h */

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
	struct task_struct *task = ptg_current_task();
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
	PTG_LOOP(PY_MAX_TSTATE_WALK, PY_MAX_TSTATE_WALK_LEGACY, py_tstate_step, &w);
	return w.found;
}

/*
 * The innermost frame of a thread state: through _PyCFrame up to 3.12,
 * directly from 3.13. 0 when unreadable. *holder: the struct it was read from
 * (the _PyCFrame up to 3.12, the thread state after).
 */
static __always_inline __u64 py_tstate_frame_in(const volatile struct ptg_py_offsets *off,
						__u64 tstate, __u64 *holder)
{
	*holder = tstate;
	if (off->tstate_cframe != PTG_OFF_NONE) {
		*holder = py_read_ptr(tstate + off->tstate_cframe);
		if (!*holder)
			return 0;
	}
	return py_read_ptr(*holder + off->cframe_current_frame);
}

static __always_inline __u64 py_tstate_frame(const volatile struct ptg_py_offsets *off,
					     __u64 tstate)
{
	__u64 holder;

	return py_tstate_frame_in(off, tstate, &holder);
}

/*
 * The verifier takes ctx loads at a constant offset from ctx only, and the
 * compiler would fold the cases below into one load from a computed
 * address: each case is its own load instruction.
 */
#define ctx_reg(ctx, field)                                                                        \
	({                                                                                         \
		__u64 __v;                                                                         \
		asm volatile("%0 = *(u64 *)(%1 + %2)"                                              \
			     : "=r"(__v)                                                           \
			     : "r"(ctx), "i"(__builtin_offsetof(struct pt_regs, field)));          \
		__v;                                                                               \
	})

/*
 * A general register of the target at the probe, by its pt_regs slot
 * (user/proc/probesite.h: the frame register of a handler's probe site).
 */
static __always_inline __u64 reg_value(const struct pt_regs *ctx, __u32 slot)
{
	switch (slot) {
	case 0:
		return ctx_reg(ctx, r15);
	case 1:
		return ctx_reg(ctx, r14);
	case 2:
		return ctx_reg(ctx, r13);
	case 3:
		return ctx_reg(ctx, r12);
	case 4:
		return ctx_reg(ctx, bp);
	case 5:
		return ctx_reg(ctx, bx);
	case 6:
		return ctx_reg(ctx, r11);
	case 7:
		return ctx_reg(ctx, r10);
	case 8:
		return ctx_reg(ctx, r9);
	case 9:
		return ctx_reg(ctx, r8);
	case 10:
		return ctx_reg(ctx, ax);
	case 11:
		return ctx_reg(ctx, cx);
	case 12:
		return ctx_reg(ctx, dx);
	case 13:
		return ctx_reg(ctx, si);
	case 14:
		return ctx_reg(ctx, di);
	}
	return 0;
}

/*
 * Fields of a block read at once (see PTG_PY_FRAME_BLOCK_MAX): at is the
 * field's offset less the block's start, a constant the verifier knows from
 * the read-only offsets; the bound is for it to see, user space checked it.
 */
static __always_inline __u64 blk_u64(const __u64 *blk, __u32 max, __u32 at)
{
	if (at > max - 8)
		return 0;
	return *(const __u64 *)((const __u8 *)blk + at);
}

static __always_inline __u32 blk_u32(const __u64 *blk, __u32 max, __u32 at)
{
	if (at > max - 4)
		return 0;
	return *(const __u32 *)((const __u8 *)blk + at);
}

static __always_inline __u8 blk_u8(const __u64 *blk, __u32 max, __u32 at)
{
	if (at > max - 1)
		return 0;
	return *((const __u8 *)blk + at);
}

#endif /* PTG_PYSTATE_BPF_H */
