// SPDX-License-Identifier: MIT
/*
 * The preempt build of bpf/libwatch.bpf.c (its programs run with preemption
 * off): its skeleton has libwatch.skel.h's name and layout, so it lives in a
 * file of its own, and gives libwatch.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "libwatch/libwatch_builds.h"
#include "ptrace_gpu/events.h"

/* the skeleton's functions other than the bytes' are libwatch.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "libwatch.preempt.skel.h"

const void *libwatch_preempt_elf(size_t *size)
{
	return libwatch_bpf__elf_bytes(size);
}
