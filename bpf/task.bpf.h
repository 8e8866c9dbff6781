/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The current task and what a program asks of a task, on every kernel from
 * 5.10 on. Reads go through BPF_CORE_READ, which takes a BTF-typed task as
 * well as an untyped one.
 */
#ifndef PTG_TASK_BPF_H
#define PTG_TASK_BPF_H

#include <bpf/bpf_core_read.h>

/*
 * bpf_get_current_task_btf() arrived in 5.11; before it, the same task
 * comes untyped. The check is a CO-RE relocation against the kernel's own
 * enum of helpers: the verifier never sees the branch this kernel lacks.
 */
static __always_inline struct task_struct *ptg_current_task(void)
{
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf))
		return bpf_get_current_task_btf();
	return (struct task_struct *)bpf_get_current_task();
}

/*
 * At sched_process_exit, whether p is its process's last thread. The
 * tracepoint gained that as its second argument only after 6.12; do_exit()
 * has taken p off signal->live before it fires, on every kernel.
 */
static __always_inline bool ptg_group_dead(struct task_struct *p)
{
	return BPF_CORE_READ(p, signal, live.counter) == 0;
}

/* task_struct's state before 5.14 renamed it __state (and made it unsigned int) */
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

/*
 * prev_state at tp_btf/sched_switch (ctx): its 4th argument since 5.18
 * (has_arg, a frozen rodata flag the loader sets from the kernel's BTF, so
 * the verifier never sees the read where the argument is missing). Before,
 * the tracepoint's own TP_printk read prev's state at this same point.
 */
static __always_inline unsigned int ptg_switch_prev_state(__u64 *ctx, bool has_arg,
							  struct task_struct *prev)
{
	struct task_struct___old *old = (void *)prev;

	if (has_arg)
		return (unsigned int)*(volatile __u64 *)&ctx[3];
	if (bpf_core_field_exists(old->state))
		return BPF_CORE_READ(old, state);
	return BPF_CORE_READ(prev, __state);
}

#endif /* PTG_TASK_BPF_H */
