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
 * Two odd 64-bit multipliers (the golden ratio's and murmur3's) mix the two
 * pointers; bits 16-47 of the result are the fingerprint. The line is xored
 * in unmixed, so only a first line of 65536 or more changes it: the name
 * pointers are what tell code objects apart (the values are kept as they
 * were, tests/unit/test_fingerprint.c). No loop, no branch: the verifier
 * takes it anywhere, and user space gets the same bits.
 */
static __always_inline __u32 ptg_code_fingerprint(__u64 qualname, __u64 filename, __u32 firstlineno)
{
	return (__u32)((qualname * 0x9e3779b97f4a7c15ull ^ filename * 0xc2b2ae3d27d4eb4full ^
			firstlineno) >>
		       16);
}

#endif /* PTRACE_GPU_FINGERPRINT_H */
