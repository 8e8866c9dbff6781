/* SPDX-License-Identifier: MIT */
/*
 * Files that ptrace-gpu runs or makes other processes run: only those that
 * no one but root can have written, and a private copy of one where a
 * process, in whatever mount namespace, loads exactly the bytes checked.
 */
#ifndef PTG_TRUSTED_H
#define PTG_TRUSTED_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Opens path (O_RDONLY | O_CLOEXEC) if it is a regular file that only root
 * can have written: the file and every directory from / down to it, with
 * symbolic links resolved, are owned by root and writable by neither group
 * nor others (a sticky bit does not count: /tmp's files are not root's to
 * vouch for). Each step is checked on the descriptor that is then opened
 * from, so a rename meanwhile cannot slip another file in. Returns the fd,
 * or a negative errno with a one-line reason in err.
 */
int trusted_open(const char *path, char *err, size_t errlen);
/*
 * A library of ptrace-gpu's own (an agent that runs in targets): the file
 * $env names, else name next to this executable (where a build tree puts
 * it), else in the agents' directory of an install, found from this
 * executable's (../lib/ptrace-gpu); never a build path compiled in, which an
 * installed ptrace-gpu must not load from. Its path goes to path, for
 * messages; returns trusted_open()'s fd or its error.
 */
int trusted_open_own(const char *env, const char *name, char *path, size_t len, char *err,
		     size_t errlen);

struct lib_copy;

/*
 * Copies the file open at fd into a new directory that only root can write,
 * in the first of /tmp, /dev/shm and /var/tmp of pid's root that can hold
 * it (owned by root, writable by others only with the sticky bit, not
 * mounted noexec, and the copy written there), as name. The copy's path as pid sees it:
 * lib_copy__path(). Returns 0, or a negative errno with a one-line reason in err
 * (-EPERM, and none is made, when pid's mount namespace belongs to a user
 * namespace other than ours: its owner chose what its /tmp is).
 */
int lib_copy__new(int fd, pid_t pid, const char *name, struct lib_copy **out, char *err,
		  size_t errlen);
/*
 * Another copy of fd, as like is, at like's very path in pid's root (for a
 * process whose root is not the one like was made for: a chroot, a
 * container), where nothing has that name yet. 0, or a negative errno with
 * a one-line reason in err (-EEXIST: something is there already).
 */
int lib_copy__new_as(int fd, const struct lib_copy *like, pid_t pid, struct lib_copy **out,
		     char *err, size_t errlen);
/*
 * Whether lc's path, resolved in pid's root without links, is lc's file: 1,
 * 0 when nothing is there, -EEXIST when another file is, -ESRCH when pid
 * is gone, or a negative errno.
 */
int lib_copy__seen_by(const struct lib_copy *lc, pid_t pid);
const char *lib_copy__path(const struct lib_copy *lc);
/* Removes the copy and its directory (mappings of it stay valid). Accepts NULL. */
void lib_copy__free(struct lib_copy *lc);

#endif /* PTG_TRUSTED_H */
