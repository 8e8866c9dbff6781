/* SPDX-License-Identifier: MIT */
/* Module paths inside: what modpath.c and modpath_dict.c share. */
#ifndef PTG_MODPATH_INT_H
#define PTG_MODPATH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/u64map.h"
#include "pyinterp/pyinterp.h"

struct modpath;
struct code_kind;
struct path;

/*
 * One process: its memory, what its code objects are and the paths of its
 * modules (addresses mean something in one process only).
 */
struct mod_proc {
	struct modpath *mp;
	pid_t pid;
	const struct py_version_info *vi;
	int memfd;		/* /proc/PID/mem; -1 once the process ended */
	struct u64map code_idx; /* code -> index + 1 in kinds */
	struct code_kind *kinds;
	size_t nkinds, kinds_cap;
	struct u64map path_idx; /* hash of (parent, self, method name) -> index + 1 */
	struct path *paths;
	size_t npaths, paths_cap;
	struct u64map instance;	   /* unnamed module object -> its number + 1 in its class */
	struct u64map class_count; /* type object -> modules of it numbered so far */
	struct u64map modules;	   /* objects found to hold a _modules attribute -> 1 */
};

/* obj is an nn.Module, as far as its attributes say: it has _modules. */
bool modpath_is_module(struct mod_proc *pp, uint64_t obj);
/* parent._modules: the name under which it holds child; -ENOENT when it holds none. */
int modpath_attr_name(struct mod_proc *pp, uint64_t parent, uint64_t child, char *buf, size_t len);

#endif /* PTG_MODPATH_INT_H */
