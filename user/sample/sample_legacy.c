// SPDX-License-Identifier: MIT
/*
 * The legacy build of bpf/sample.bpf.c (no bpf_loop, for kernels before
 * 5.17): its skeleton has sample.skel.h's name and layout, so it lives in a
 * file of its own, and gives sample.c only its ELF bytes.
 */
#include "sample/sample_legacy.h"

/* the skeleton's functions other than the bytes' are sample.c's to use */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "sample.legacy.skel.h"

const void *sample_legacy_elf(size_t *size)
{
	return sample_bpf__elf_bytes(size);
}
