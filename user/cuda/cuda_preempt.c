// SPDX-License-Identifier: MIT
/*
 * The preempt build of bpf/cuda.bpf.c (its programs run with preemption
 * off): its skeleton has cuda.skel.h's name and layout, so it lives in a
 * file of its own, and gives cuda.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "cuda/cuda_builds.h"
#include "ptrace_gpu/events.h"

/* the skeleton's functions other than the bytes' are cuda.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "cuda.preempt.skel.h"

const void *cuda_preempt_elf(size_t *size)
{
	return cuda_bpf__elf_bytes(size);
}
