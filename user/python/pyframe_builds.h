/* SPDX-License-Identifier: MIT */
/*
 * The other builds of bpf/pyframe.bpf.c: the legacy build (CMakeLists.txt's
 * BPF_LEGACY, for older kernels: pyframe.c's open says which; pyframe_legacy.c)
 * and the preempt build (BPF_PREEMPT, bpf/preempt.bpf.h; pyframe_preempt.c).
 * Their skeletons have the normal build's name and layout, so each lives in
 * a file of its own, which gives the loader only its ELF bytes, opened
 * through the normal skeleton (KFEAT_SKEL_OPEN_VARIANT).
 */
#ifndef PTG_PYFRAME_BUILDS_H
#define PTG_PYFRAME_BUILDS_H

#include <stddef.h>

const void *pyframe_legacy_elf(size_t *size);
const void *pyframe_preempt_elf(size_t *size);

#endif /* PTG_PYFRAME_BUILDS_H */
