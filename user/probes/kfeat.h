/* SPDX-License-Identifier: MIT */
/*
 * What the running kernel offers the BPF objects, for the loaders that pick a
 * variant or a setting per kernel (docs: DESIGN.md, "Kernels"), and the one
 * line that names what a kernel lacks.
 */
#ifndef PTG_KFEAT_H
#define PTG_KFEAT_H

#include <stdbool.h>

/* Arguments of a BTF tracepoint (btf_trace_NAME), or a negative errno. */
int kfeat_tp_btf_args(const char *name);
/* bpf_loop (Linux 5.17) */
bool kfeat_loop(void);
/* BPF cookies: bpf_get_attach_cookie (Linux 5.15) */
bool kfeat_cookies(void);
/*
 * Logs "WHAT: needs FEATURE (Linux SINCE); this kernel is RELEASE" and
 * returns -EOPNOTSUPP, for a loader to return.
 */
int kfeat_missing(const char *what, const char *feature, const char *since);

#endif /* PTG_KFEAT_H */
