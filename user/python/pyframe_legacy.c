// SPDX-License-Identifier: MIT
/*
 * The legacy build of bpf/pyframe.bpf.c (no bpf_loop, no cookies: kernels
 * before 5.17): its skeleton has pyframe.skel.h's name and layout, so it lives
 * in a file of its own, and gives pyframe.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "ptrace_gpu/pyoffsets.h"
#include "python/pyframe_builds.h"

/* the skeleton's functions other than the bytes' are pyframe.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "pyframe.legacy.skel.h"

const void *pyframe_legacy_elf(size_t *size)
{
	return pyframe_bpf__elf_bytes(size);
}
