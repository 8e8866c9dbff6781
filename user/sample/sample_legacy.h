/* SPDX-License-Identifier: MIT */
#ifndef PTG_SAMPLE_LEGACY_H
#define PTG_SAMPLE_LEGACY_H

#include <stddef.h>

/* sample_legacy.c: the ELF bytes of bpf/sample.bpf.c built without bpf_loop */
const void *sample_legacy_elf(size_t *size);

#endif /* PTG_SAMPLE_LEGACY_H */
