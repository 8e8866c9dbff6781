/* SPDX-License-Identifier: MIT */
/*
 * The preempt builds of the uprobe objects (CMakeLists.txt's BPF_PREEMPT;
 * bpf/preempt.bpf.h): their ELF bytes, opened through the normal skeleton
 * (KFEAT_SKEL_OPEN_VARIANT) where kfeat_preempt_kfunc() says the kernel
 * has bpf_preempt_disable.
 */
#ifndef PTG_PREEMPT_BUILDS_H
#define PTG_PREEMPT_BUILDS_H

#include <stddef.h>

const void *pyframe_preempt_elf(size_t *size);
const void *cuda_preempt_elf(size_t *size);
const void *libwatch_preempt_elf(size_t *size);
const void *torchops_preempt_elf(size_t *size);

#endif /* PTG_PREEMPT_BUILDS_H */
