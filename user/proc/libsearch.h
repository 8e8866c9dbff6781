/* SPDX-License-Identifier: MIT */
/*
 * Where a target's dynamic loader looks for a library named without a
 * slash (dlopen("libcuda.so.1"), a DT_NEEDED entry), in the loader's order:
 * DT_RPATH of the executable and of mapped objects that have no DT_RUNPATH,
 * LD_LIBRARY_PATH, DT_RUNPATH of the executable and of mapped objects (with
 * $ORIGIN, $LIB and $PLATFORM expanded), the target's /etc/ld.so.cache, and
 * the loader's trusted directories; in each directory its glibc-hwcaps
 * subdirectories (x86-64-v4, v3, v2) first. Paths are as the target sees them (its
 * root); files are looked at through /proc/PID/root.
 *
 * An RPATH or RUNPATH applies only to what its own object (and, for RPATH,
 * what it loaded) looks up; the caller of dlopen is not known ahead, so
 * every mapped object's directories count: this finds a superset of what the
 * loader may pick, which is what probing ahead needs.
 */
#ifndef PTG_LIBSEARCH_H
#define PTG_LIBSEARCH_H

#include <sys/types.h>

struct libsearch;

/* Reads the target's environment, executable, platform and ld.so.cache. 0 or -errno. */
int libsearch__open(pid_t pid, struct libsearch **out);
/*
 * Adds the DT_RPATH/DT_RUNPATH directories of an object: path as
 * /proc/PID/maps or the target names it, open_path where it can be read
 * from here. 0 (also for an object without them, or unreadable), or -ENOMEM.
 */
int libsearch__add_object(struct libsearch *s, const char *path, const char *open_path);
/* Changes each time a directory is added: a new place to look ahead in. */
unsigned libsearch__generation(const struct libsearch *s);
/*
 * Calls cb(ctx, dir, file) for each regular file named pattern (an fnmatch
 * pattern or a plain name) on the search path, in the loader's order, at
 * most once per path. A non-zero return of cb stops and is returned.
 */
int libsearch__find(struct libsearch *s, const char *pattern,
		    int (*cb)(void *ctx, const char *dir, const char *file), void *ctx);
void libsearch__free(struct libsearch *s);
/*
 * Drops "." and empty components of an absolute path and folds "dir/.."
 * away, in place, as names go: for showing a path found through
 * "$ORIGIN/../..", never for opening it (a symbolic link before a ".."
 * makes the loader's file another one).
 */
void clean_path(char *path);

#endif /* PTG_LIBSEARCH_H */
