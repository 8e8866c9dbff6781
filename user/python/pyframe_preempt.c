// SPDX-License-Identifier: MIT
/*
 * The preempt build of bpf/pyframe.bpf.c (its programs run with preemption
 * off): its skeleton has pyframe.skel.h's name and layout, so it lives in a
 * file of its own, and gives pyframe.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "ptrace_gpu/pyoffsets.h"
#include "python/pyframe_builds.h"

/* the skeleton's functions other than the bytes' are pyframe.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "pyframe.preempt.skel.h"

const void *pyframe_preempt_elf(size_t *size)
{
	return pyframe_bpf__elf_bytes(size);
}
