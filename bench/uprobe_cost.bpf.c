// SPDX-License-Identifier: GPL-2.0 OR MIT
/* The cheapest possible probe programs: the cost measured is the kernel's. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

__u64 hits;

SEC("uprobe")
int noop_entry(void *ctx)
{
	return 0;
}

SEC("uretprobe")
int noop_return(void *ctx)
{
	return 0;
}

/* one counter add: to check that every call did hit */
SEC("uprobe")
int count_entry(void *ctx)
{
	__sync_fetch_and_add(&hits, 1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
