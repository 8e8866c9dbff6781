/* SPDX-License-Identifier: MIT */
/*
 * Uprobe programs run with preemption on (uprobe_prog_run() and the perf
 * path only disable migration), and from Linux 6.13 a program frame of 64
 * bytes or more may get a private stack: one per CPU and program. A program
 * preempted on a CPU and the same program run there for another thread then
 * share that stack, and the second overwrites what the first spilled (seen
 * on 7.2 with preempt=lazy: a pointer spilled by py_probe came back as
 * another thread's user address, and the kernel oopsed on it).
 *
 * The preempt build of each uprobe object (-DPTG_BPF_PREEMPT, CMakeLists.txt's
 * BPF_PREEMPT), loaded where the kernel gives private stacks and has the
 * kfuncs (6.10; kfeat_preempt_build()), runs every uprobe program with
 * preemption off (6.12, which has the kfuncs but no private stacks, also
 * refuses a global subprogram's call with preemption off):
 * SEC("uprobe") int prog(ctx) { return PTG_NO_PREEMPT(prog_body(ctx)); }
 * Elsewhere no program has a private stack, and the per-CPU buffers the
 * programs share are claimed by slot (pycache.bpf.h), so the other builds
 * do without.
 */
#ifndef PTG_PREEMPT_BPF_H
#define PTG_PREEMPT_BPF_H

#ifdef PTG_BPF_PREEMPT
extern void bpf_preempt_disable(void) __ksym;
extern void bpf_preempt_enable(void) __ksym;

#define PTG_NO_PREEMPT(call)                                                                       \
	({                                                                                         \
		int __ret;                                                                         \
		bpf_preempt_disable();                                                             \
		__ret = (call);                                                                    \
		bpf_preempt_enable();                                                              \
		__ret;                                                                             \
	})
#else
#define PTG_NO_PREEMPT(call) (call)
#endif

#endif /* PTG_PREEMPT_BPF_H */
