/* SPDX-License-Identifier: MIT */
/*
 * The other builds of bpf/cuda.bpf.c: the legacy build (CMakeLists.txt's
 * BPF_LEGACY, for older kernels: cuda.c's open says which; cuda_legacy.c)
 * and the preempt build (BPF_PREEMPT, bpf/preempt.bpf.h; cuda_preempt.c).
 * Their skeletons have the normal build's name and layout, so each lives in
 * a file of its own, which gives the loader only its ELF bytes, opened
 * through the normal skeleton (KFEAT_SKEL_OPEN_VARIANT).
 */
#ifndef PTG_CUDA_BUILDS_H
#define PTG_CUDA_BUILDS_H

#include <stddef.h>

const void *cuda_legacy_elf(size_t *size);
const void *cuda_preempt_elf(size_t *size);

#endif /* PTG_CUDA_BUILDS_H */
