/* SPDX-License-Identifier: MIT */
/*
 * What one uprobe hit costs on this machine, measured in this process
 * (bpf/trapcost.bpf.c; bench/uprobe_cost.c measures it in more detail):
 * the price of each probed Python call, op and CUDA call, for
 * `ptrace-gpu check`.
 */
#ifndef PTG_TRAPCOST_H
#define PTG_TRAPCOST_H

#include <stddef.h>

struct trapcost {
	double bare_ns; /* a call of the probed function, nothing attached */
	double hit_ns;	/* what a uprobe running an empty program adds to it */
	unsigned long calls;
};

/*
 * Attaches a uprobe to a function of this executable (its first
 * instruction a mov, which the kernel single-steps, as at the eval loop's
 * handlers), calls it `calls` times bare and probed (the median of three
 * runs, in this thread's CPU time) and checks that every call hit. Returns
 * 0, or a negative errno with a one-line reason in err.
 */
int trapcost_measure(unsigned long calls, struct trapcost *out, char *err, size_t errlen);

#endif /* PTG_TRAPCOST_H */
