/* SPDX-License-Identifier: MIT */
/*
 * What a recording follows of its target beyond what it has at start: a
 * Python interpreter that appears later, when the process execs one (a
 * shell that runs python3) or maps libpython (a C program that embeds it),
 * and the -- CMD child, held under ptrace until it runs Python so that its
 * exec into Python stops it before the first Python instruction.
 */
#ifndef PTG_TARGET_H
#define PTG_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "probes/libwatch.h"
#include "pyinterp/pyinterp.h"

struct target;

/*
 * The target runs a supported Python from now on: load and attach the
 * Python probes for py. how: "exec", or the object that was mapped.
 */
typedef int (*target_python_fn)(void *ctx, const struct py_interp *py, const char *how);

struct target_opts {
	pid_t pid;
	bool held;	       /* a -- CMD child stopped at its exec, still under ptrace */
	bool has_python;       /* Python found at start: nothing left to look for */
	struct libwatch *libs; /* re-armed at each exec of a held child */
	target_python_fn fn;
	void *ctx;
};

int target__new(const struct target_opts *o, struct target **out);
/* A libwatch subscriber: a mapped object that may be Python (an exec'd interpreter, libpython). */
int target__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias);
/* Lets a held child run on; it stays under ptrace until it runs Python (target__poll). */
int target__run(struct target *tg);
bool target__held(const struct target *tg);
/*
 * Without blocking, handles what the held child did: signals passed on,
 * an exec into Python (the callback, then the child is let go), another
 * exec (libwatch re-armed). 1 when it ended (*wstatus), else 0.
 */
int target__poll(struct target *tg, int *wstatus);
/* Lets go of a held child that still runs: 1 when it ended meanwhile (*wstatus), else 0. */
int target__let_go(struct target *tg, int *wstatus);
void target__free(struct target *tg);

#endif /* PTG_TARGET_H */
