/* SPDX-License-Identifier: MIT */
/*
 * nn.Module paths of ops in eager mode, in the form of torch.profiler's
 * "Module Hierarchy" (PR 61792): TOP(Net)::forward.fc1(Linear)::forward.
 *
 * A module call is a Python frame of torch.nn.Module._call_impl; its
 * PY_START carries the frame's first local, the module object. Each thread
 * keeps the module frames open on its tracer stack; a path names each module
 * by its attribute in the parent's _modules dict (read from the target's
 * memory, CPython's dict layout from the version table), or by its class and
 * a per-class instance number when the parent does not hold it. Names are
 * read while the process runs; one first needed after it exited is "?".
 */
#ifndef PTG_MODPATH_H
#define PTG_MODPATH_H

#include <stdint.h>
#include <sys/types.h>

#include "pyinterp/pyinterp.h"
#include "tracer/tracer.h"

struct modpath;

struct modpath_stats {
	uint64_t paths;	     /* distinct paths written */
	uint64_t unnamed;    /* modules not found in their parent's _modules */
	uint64_t unreadable; /* module frames or names that could not be read */
};

/* Registers for Python frame events: open it after pyframe__open(). */
int modpath__open(struct tracer *t, const struct py_interp *py, struct modpath **out);
/*
 * The same for the processes of a set (record -p A,B, --children): each
 * read in its own memory, with the interpreter interp_of(ctx, pid) says it
 * runs (NULL: none known, its ops get no path). Open it after the set's
 * router of frame events (proctree__load()); an exec or exit of a process
 * (PTG_EV_PROC_*) ends what was known of it.
 */
typedef const struct py_interp *(*modpath_interp_fn)(void *ctx, pid_t pid);
int modpath__open_set(struct tracer *t, modpath_interp_fn interp_of, void *ctx,
		      struct modpath **out);
/* Symbol (PTG_SYM_STRING) of the path of th's innermost open module call, 0 if none. */
uint32_t modpath__current(struct modpath *mp, const struct tracer_thread *th);
void modpath__stats(const struct modpath *mp, struct modpath_stats *st);
void modpath__destroy(struct modpath *mp);

#endif /* PTG_MODPATH_H */
