/* SPDX-License-Identifier: MIT */
#ifndef PTG_PYFRAME_LEGACY_H
#define PTG_PYFRAME_LEGACY_H

#include <stddef.h>

/* pyframe_legacy.c: the ELF bytes of bpf/pyframe.bpf.c built without bpf_loop */
const void *pyframe_legacy_elf(size_t *size);

#endif /* PTG_PYFRAME_LEGACY_H */
