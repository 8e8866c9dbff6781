/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Stopping a thread we hold under ptrace where it stands, from a probe: a
 * SIGURG sent to it (bpf_send_signal_thread) becomes a signal-delivery stop
 * of ours before it runs another instruction of its own, and the recorder
 * resumes it without the signal once done (user/pyinterp/launch.c,
 * peek_signal()). Killed before that, the kernel detaches the thread and
 * delivers the SIGURG, which it ignores: that is what can_stop() checks.
 */
#ifndef PTG_HOLD_BPF_H
#define PTG_HOLD_BPF_H

#include "task.bpf.h"

#define SIGURG_NR      23
#define PT_PTRACED_BIT 0x1 /* include/linux/ptrace.h */

/*
 * Whether the current thread can be stopped by a SIGURG that, were the
 * recorder (process recorder) to die before it takes the stop, the thread
 * would ignore: under its ptrace, SIGURG at its default (ignore) or
 * ignored, not blocked, none pending to merge with.
 */
static __always_inline bool ptg_can_stop(__u32 recorder)
{
	struct task_struct *task = ptg_current_task();
	__u64 bit = 1ull << (SIGURG_NR - 1);
	unsigned long handler;

	if (!recorder || !(BPF_CORE_READ(task, ptrace) & PT_PTRACED_BIT) ||
	    BPF_CORE_READ(task, parent, tgid) != (int)recorder)
		return false;
	handler = (unsigned long)BPF_CORE_READ(task, sighand, action[SIGURG_NR - 1].sa.sa_handler);
	if (handler > 1) /* SIG_DFL 0, SIG_IGN 1 */
		return false;
	return !(BPF_CORE_READ(task, blocked.sig[0]) & bit) &&
	       !(BPF_CORE_READ(task, pending.signal.sig[0]) & bit) &&
	       !(BPF_CORE_READ(task, signal, shared_pending.signal.sig[0]) & bit);
}

#endif /* PTG_HOLD_BPF_H */
