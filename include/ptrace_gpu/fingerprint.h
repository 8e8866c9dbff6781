/* SPDX-License-Identifier: MIT */
/*
 * The code-object fingerprint: what tells a new code object at the address
 * of a freed one apart (docs/design.md). A hash of the pointers to its
 * qualname and filename str objects and of its first line, as read from the
 * PyCodeObject. Record's BPF side sends it with each start event
 * (bpf/pyframe.bpf.c), the sampler's with each sampled frame
 * (bpf/sample.bpf.c), and user space computes it of what it reads through
 * /proc/PID/mem (user/pyinterp/pycode.c) to check that the names it read
 * belong to the object the event saw. One rule, here, for all three: values
 * that differ would make every name "[unknown code]".
 *
 * Kernel fixed-width types: BPF programs get them from vmlinux.h.
 */
#ifndef PTRACE_GPU_FINGERPRINT_H
#define PTRACE_GPU_FINGERPRINT_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/*
 * Three odd 64-bit multipliers (the golden ratio's, murmur3's and xxhash's)
 * mix the two pointers and the line; bits 16-47 of the result are the
 * fingerprint, so every bit of each input can change it (before this rule
 * was one function the line went in unmixed below bit 16, where it was cut
 * off). No loop, no branch: the verifier takes it anywhere, and user space
 * gets the same bits (tests/unit/test_fingerprint.c).
 */
static __always_inline __u32 ptg_code_fingerprint(__u64 qualname, __u64 filename, __u32 firstlineno)
{
	return (__u32)((qualname * 0x9e3779b97f4a7c15ull ^ filename * 0xc2b2ae3d27d4eb4full ^
			(__u64)firstlineno * 0x165667b19e3779f9ull) >>
		       16);
}

#endif /* PTRACE_GPU_FINGERPRINT_H */
