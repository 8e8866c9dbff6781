/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * bpf_loop() arrived in 5.17, and a kernel before it refuses an object that
 * so much as names a callback (its func_info counts one subprogram more than
 * the kernel finds). Objects that use it are built twice: the legacy variant
 * (-DPTG_BPF_LEGACY, loaded where the kernel has no bpf_loop) runs the same
 * step in a bounded loop, which the verifier walks once per iteration, so
 * its bounds are the smaller LEGACY ones.
 */
#ifndef PTG_LOOP_BPF_H
#define PTG_LOOP_BPF_H

#ifdef PTG_BPF_LEGACY
#define PTG_LOOP(n, legacy_n, step, arg)                                                           \
	do {                                                                                       \
		for (__u32 __ptg_i = 0; __ptg_i < (legacy_n); __ptg_i++)                           \
			if (step(__ptg_i, arg))                                                    \
				break;                                                             \
	} while (0)
#else
#define PTG_LOOP(n, legacy_n, step, arg) bpf_loop(n, step, arg, 0)
#endif

#endif /* PTG_LOOP_BPF_H */
