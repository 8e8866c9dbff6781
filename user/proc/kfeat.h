/* SPDX-License-Identifier: MIT */
/*
 * What the running kernel offers the BPF objects, for the loaders that pick a
 * variant or a setting per kernel (docs: DESIGN.md, "Kernels"), and the one
 * line that names what a kernel lacks.
 */
#ifndef PTG_KFEAT_H
#define PTG_KFEAT_H

#include <stdbool.h>
#include <stddef.h>

/* Arguments of a BTF tracepoint (btf_trace_NAME), or a negative errno. */
int kfeat_tp_btf_args(const char *name);
/* bpf_loop (Linux 5.17) */
bool kfeat_loop(void);
/* BPF cookies: bpf_get_attach_cookie (Linux 5.15) */
bool kfeat_cookies(void);
/* The BPF ring buffer map (Linux 5.8) */
bool kfeat_ringbuf(void);
/* bpf_get_current_task_btf (Linux 5.11), as bpf/task.bpf.h's CO-RE check sees it */
bool kfeat_task_btf(void);
/* Atomic operations with fetch and cmpxchg (Linux 5.12) */
bool kfeat_atomics(void);
/*
 * Private stacks for uprobe programs (Linux 6.13, where the JIT has them):
 * a call chain of more than 512 bytes is taken. No object relies on it.
 */
bool kfeat_private_stack(void);
/*
 * The kfuncs bpf_preempt_disable and bpf_preempt_enable (Linux 6.10): the
 * uprobe objects' preempt builds (bpf/preempt.bpf.h) run with preemption off.
 */
bool kfeat_preempt_kfunc(void);
/*
 * Whether the loaders take the preempt builds: the kfuncs, on a kernel that
 * gives uprobe programs private stacks (kfeat_private_stack()).
 */
bool kfeat_preempt_build(void);
/*
 * Logs "WHAT: needs FEATURE (Linux SINCE); this kernel is RELEASE" and
 * returns -EOPNOTSUPP, for a loader to return.
 */
int kfeat_missing(const char *what, const char *feature, const char *since);

/*
 * Defines static struct NAME *NAME__open_variant(data, size): the skeleton
 * NAME (e.g. sample_bpf) opened from the ELF bytes of another build of its
 * object, NAME.legacy.skel.h's (the CMakeLists.txt's BPF_LEGACY), which has
 * the same maps, programs and globals in the same order. NULL and errno on
 * failure.
 */
#define KFEAT_SKEL_OPEN_VARIANT(NAME)                                                              \
	static struct NAME *NAME##__open_variant(const void *data, size_t size)                    \
	{                                                                                          \
		struct NAME *obj = calloc(1, sizeof(*obj));                                        \
		int err;                                                                           \
                                                                                                   \
		if (!obj) {                                                                        \
			errno = ENOMEM;                                                            \
			return NULL;                                                               \
		}                                                                                  \
		err = NAME##__create_skeleton(obj);                                                \
		if (!err) {                                                                        \
			obj->skeleton->data = (void *)data;                                        \
			obj->skeleton->data_sz = size;                                             \
			err = bpf_object__open_skeleton(obj->skeleton, NULL);                      \
		}                                                                                  \
		if (err) {                                                                         \
			NAME##__destroy(obj);                                                      \
			errno = -err;                                                              \
			return NULL;                                                               \
		}                                                                                  \
		return obj;                                                                        \
	}

#endif /* PTG_KFEAT_H */
