// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The cheapest uprobe program there is, for `ptrace-gpu check`'s measure of
 * what a uprobe hit costs on this machine (user/tracer/trapcost.c): the
 * cost measured is the kernel's trap, and the count proves each call hit.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 hits;

SEC("uprobe")
int trap_count(void *ctx)
{
	/* a plain add: atomics with fetch are 5.12+, and one thread calls */
	hits++;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
