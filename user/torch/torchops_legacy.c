// SPDX-License-Identifier: MIT
/*
 * The legacy build of bpf/torchops.bpf.c (kernels before BPF cookies, 5.15: it
 * finds a site's cookie by its address, bpf/sitecookie.bpf.h): its skeleton
 * has torchops.skel.h's name and layout, so it lives in a file of its own, and
 * gives torchops.c only its ELF bytes.
 */
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "torch/torchops_builds.h"

/* the skeleton's functions other than the bytes' are torchops.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "torchops.legacy.skel.h"

const void *torchops_legacy_elf(size_t *size)
{
	return torchops_bpf__elf_bytes(size);
}
