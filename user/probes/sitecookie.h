/* SPDX-License-Identifier: MIT */
/*
 * The legacy builds of the uprobe objects, for kernels without BPF cookies
 * (before 5.15; CMakeLists.txt's BPF_LEGACY): their ELF bytes, opened
 * through the normal skeleton (KFEAT_SKEL_OPEN_VARIANT), and the cookie of
 * each site, which such an object looks up by the site
 * (bpf/sitecookie.bpf.h) instead of the attach.
 */
#ifndef PTG_SITECOOKIE_H
#define PTG_SITECOOKIE_H

#include <stddef.h>
#include <stdint.h>

struct bpf_object;

const void *cuda_legacy_elf(size_t *size);
const void *torchops_legacy_elf(size_t *size);

/*
 * The map of obj's site cookies: its fd, or a negative errno where obj has
 * none (a normal build).
 */
int sitecookie_map(struct bpf_object *obj);
/* The cookie of the site at file offset off of the file with inode ino, in map fd. */
int sitecookie_put(int fd, uint64_t ino, uint64_t off, uint64_t cookie);

#endif /* PTG_SITECOOKIE_H */
