/* SPDX-License-Identifier: MIT */
/*
 * The preempt build of bpf/libwatch.bpf.c (CMakeLists.txt's BPF_PREEMPT;
 * bpf/preempt.bpf.h; libwatch_preempt.c): its skeleton has the normal
 * build's name and layout, so it lives in a file of its own, which gives
 * the loader only its ELF bytes, opened through the normal skeleton
 * (KFEAT_SKEL_OPEN_VARIANT) where kfeat_preempt_kfunc() says the kernel
 * has bpf_preempt_disable.
 */
#ifndef PTG_LIBWATCH_BUILDS_H
#define PTG_LIBWATCH_BUILDS_H

#include <stddef.h>

const void *libwatch_preempt_elf(size_t *size);

#endif /* PTG_LIBWATCH_BUILDS_H */
