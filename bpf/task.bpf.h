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

#endif /* PTG_TASK_BPF_H */
