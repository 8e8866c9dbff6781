// SPDX-License-Identifier: MIT
/*
 * The preempt build of bpf/torchops.bpf.c (its programs run with preemption
 * off): its skeleton has torchops.skel.h's name and layout, so it lives in a
 * file of its own, and gives torchops.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "torch/torchops_builds.h"

/* the skeleton's functions other than the bytes' are torchops.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "torchops.preempt.skel.h"

const void *torchops_preempt_elf(size_t *size)
{
	return torchops_bpf__elf_bytes(size);
}
