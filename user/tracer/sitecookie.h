/* SPDX-License-Identifier: MIT */
/*
 * The cookie of each site for the legacy builds of the uprobe objects, for
 * kernels without BPF cookies (before 5.15; CMakeLists.txt's BPF_LEGACY;
 * cuda/cuda_legacy.c, torch/torchops_legacy.c), which such an object looks
 * up by the site (bpf/sitecookie.bpf.h) instead of the attach.
 */
#ifndef PTG_SITECOOKIE_H
#define PTG_SITECOOKIE_H

#include <stdint.h>

struct bpf_object;

/*
 * The map of obj's site cookies: its fd, or a negative errno where obj has
 * none (a normal build).
 */
int sitecookie_map(struct bpf_object *obj);
/* The cookie of the site at file offset off of the file with inode ino, in map fd. */
int sitecookie_put(int fd, uint64_t ino, uint64_t off, uint64_t cookie);

#endif /* PTG_SITECOOKIE_H */
