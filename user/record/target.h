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

#include "libwatch/libwatch.h"
#include "pyinterp/pyinterp.h"

struct target;

/*
 * The target runs a supported Python from now on: load and attach the
 * Python probes for py. how: "exec", or the object that was mapped.
 */
typedef int (*target_python_fn)(void *ctx, const struct py_interp *py, const char *how);
/*
 * A libpython the target may load later, found ahead on its loader's search
 * path and analyzed from the file alone (py_interp__from_target_file: no
 * load address): put the Python probes on the file now, so that they go
 * live as the loader maps it. Once per file (inode).
 */
typedef int (*target_ahead_fn)(void *ctx, const struct py_interp *py);
/*
 * The target ran Python and exec'd an interpreter (py; maybe the same file,
 * mapped anew), or exec'd the file dev, ino and ended before its new image
 * could be looked at (py NULL): what record does of it.
 */
typedef void (*target_exec_fn)(void *ctx, const struct py_interp *py, dev_t dev, ino_t ino);
/* The held child pid stopped at an exec: nothing of the new program ran yet. */
typedef void (*target_exec_stop_fn)(void *ctx, pid_t pid);

struct target_opts {
	pid_t pid;
	bool held;	       /* a -- CMD child stopped at its exec, still under ptrace */
	bool seize;	       /* -p: hold its next exec too (launch__seize), where it can be */
	bool has_python;       /* Python found at start: nothing left to look for */
	struct libwatch *libs; /* re-armed at each exec of a held child */
	target_python_fn fn;
	target_ahead_fn ahead;	       /* NULL: nothing is probed ahead */
	target_exec_fn exec;	       /* NULL: an exec after Python is not looked at */
	target_exec_stop_fn exec_stop; /* NULL: nothing */
	bool keep_held; /* held: stays so once it runs Python (until target__let_go()) */
	void *ctx;
};

int target__new(const struct target_opts *o, struct target **out);
/*
 * Offers o.ahead every libpython3.X.so.1.0 and libpython3.X.so (X each
 * version known) along the target's search path (user/proc/libsearch.h):
 * the executable's and every mapped object's RPATH/RUNPATH, LD_LIBRARY_PATH,
 * ld.so.cache, the loader's own folders. Called at attach, and by
 * target__poll at each exec of a held child (its new image). 0 or -errno.
 */
int target__probe_ahead(struct target *tg);
/*
 * Looks for Python in the process now, as when the loader maps it; for a
 * Python event that arrives before the loader's notice was handled. When
 * the process has ended meanwhile (its maps are gone, its events are still
 * to be read), gone (if not NULL) is taken as what it ran.
 */
int target__look(struct target *tg, const struct py_interp *gone);
/*
 * A libwatch exec subscriber (libwatch__on_exec): a target that runs Python
 * exec'd; target__poll_exec then looks at what it runs now.
 */
void target__exec_seen(void *ctx, dev_t dev, ino_t ino, uint64_t ts);
/* Without blocking: after target__exec_seen, whether the new image runs Python (o.exec). */
void target__poll_exec(struct target *tg);
/* A libwatch subscriber: a mapped object that may be Python (an exec'd interpreter, libpython). */
int target__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias);
/*
 * Lets a held child run on; it stays under ptrace until it runs Python
 * (target__poll). A -p target seized is running already: only the wake-up.
 */
int target__run(struct target *tg);
bool target__held(const struct target *tg);
/* In target_python_fn: the process is stopped at its exec, none of the new program ran yet. */
bool target__at_exec_stop(const struct target *tg);
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
