// SPDX-License-Identifier: MIT
/*
 * The preempt builds' skeletons have their normal builds' names and layouts,
 * so they live in a file of their own, which gives the loaders only their
 * ELF bytes.
 */
#include <errno.h>
#include <stdlib.h>

#include <bpf/libbpf.h>

#include "probes/preempt_builds.h"
#include "ptrace_gpu/events.h"
#include "ptrace_gpu/pyoffsets.h"

/* the skeletons' functions other than the bytes' are their loaders' to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "cuda.preempt.skel.h"
#include "libwatch.preempt.skel.h"
#include "pyframe.preempt.skel.h"
#include "torchops.preempt.skel.h"

const void *pyframe_preempt_elf(size_t *size)
{
	return pyframe_bpf__elf_bytes(size);
}

const void *cuda_preempt_elf(size_t *size)
{
	return cuda_bpf__elf_bytes(size);
}

const void *libwatch_preempt_elf(size_t *size)
{
	return libwatch_bpf__elf_bytes(size);
}

const void *torchops_preempt_elf(size_t *size)
{
	return torchops_bpf__elf_bytes(size);
}
