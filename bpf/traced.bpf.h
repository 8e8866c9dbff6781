/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The traced set, for probe objects that sit on a file rather than on one
 * process (record -p A,B, --children, a libpython probed ahead): the probes
 * fire in every process that maps the file, and only those of the set go
 * on. The set itself is bpf/proctree.bpf.c's (or a one-process map of the
 * loader's), shared through bpf_map__reuse_fd().
 */
#ifndef PTG_TRACED_BPF_H
#define PTG_TRACED_BPF_H

/* set by the loader when the probes are on a file for several processes */
const volatile bool filter_tgids = false;

/* tgid -> 1: the processes recorded, read with filter_tgids */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* replaced by the loader's map */
	__type(key, __u32);
	__type(value, __u8);
} traced SEC(".maps");

/* Whether process tgid's events are to be dropped: filtering, and not in the set. */
static __always_inline bool ptg_not_traced(__u32 tgid)
{
	return filter_tgids && !bpf_map_lookup_elem(&traced, &tgid);
}

#endif /* PTG_TRACED_BPF_H */
