// SPDX-License-Identifier: MIT
/*
 * Checking a file by path and then handing out the path again leaves a gap:
 * whoever can write any directory on the way can swap the file in between.
 * So the check walks the path one descriptor at a time, and what the target
 * process gets is a copy made from the descriptor that passed, in a
 * directory of its own file system that only root can write.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/trusted.h"
#include "base/u64map.h"

#define MAX_LIB_SIZE (256u << 20) /* a copy larger than this is not a library of ours */

#ifndef PTG_AGENT_RELDIR
#define PTG_AGENT_RELDIR "" /* not from CMake: only beside the executable */
#endif

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

/*
 * Whether what fd is could only have been written by root; else why not, in
 * err. A directory of root's that others may write but with the sticky bit
 * (/tmp) passes: nobody but root can rename or remove root's entries in it,
 * and each entry is checked in its turn (as systemd's safe path walk does).
 */
static int check_owner(int fd, const char *what, bool dir, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st))
		return fail(err, errlen, -errno, "%s: %s", what, strerror(errno));
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return fail(err, errlen, -EPERM, "%s is not a %s", what,
			    dir ? "directory" : "regular file");
	if (st.st_uid != 0)
		return fail(err, errlen, -EPERM, "%s is owned by uid %u, not by root", what,
			    (unsigned int)st.st_uid);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(dir && (st.st_mode & S_ISVTX)))
		return fail(err, errlen, -EPERM, "%s is writable by %s (mode %04o)", what,
			    st.st_mode & S_IWOTH ? "others" : "its group",
			    (unsigned int)(st.st_mode & 07777));
	return 0;
}

int trusted_open(const char *path, char *err, size_t errlen)
{
	char real[PATH_MAX], *comp, *next;
	int dfd, fd, ret;

	if (!realpath(path, real))
		return fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail(err, errlen, -errno, "/: %s", strerror(errno));
	ret = check_owner(dfd, "/", true, err, errlen);
	/* real is absolute and has no "." or "..": each '/' ends a directory */
	for (comp = real + 1; !ret; comp = next + 1) {
		next = strchr(comp, '/');
		if (!next)
			break;
		*next = '\0';
		/* O_NOFOLLOW: a link here now was put in since realpath() */
		fd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		ret = fd < 0 ? fail(err, errlen, -errno, "%s: %s", real, strerror(errno))
			     : check_owner(fd, real, true, err, errlen);
		*next = '/';
		close(dfd);
		dfd = fd;
	}
	if (ret) {
		if (dfd >= 0)
			close(dfd);
		return ret;
	}
	/* O_NONBLOCK: a FIFO put there must not hang us before fstat says what it is */
	fd = openat(dfd, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return fail(err, errlen, -errno, "%s: %s", real, strerror(errno));
	ret = check_owner(fd, real, false, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

struct lib_copy {
	int parent;	 /* the directory of pid's file system that holds ours */
	int dir;	 /* ours */
	char dname[32];	 /* its name in parent */
	const char *rel; /* parent, from pid's root: one of parents[] */
	dev_t dev;	 /* the copy's file */
	ino_t ino;
	char name[NAME_MAX + 1];
	char path[PATH_MAX];
};

/* All of fd's bytes, at most MAX_LIB_SIZE. */
static int read_all(int fd, uint8_t **out, size_t *len)
{
	size_t cap = 1u << 20, n = 0;
	uint8_t *buf = NULL, *p;
	ssize_t r;

	for (;;) {
		if (n == cap || !buf) {
			cap = buf ? cap * 2 : cap;
			if (cap > MAX_LIB_SIZE) {
				free(buf);
				return -EFBIG;
			}
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		r = pread(fd, buf + n, cap - n, (off_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return -errno;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	ssize_t r;

	while (len) {
		r = write(fd, buf, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		buf += r;
		len -= (size_t)r;
	}
	return 0;
}

/*
 * A directory of root under pid's root that a new directory of ours can go
 * in: nobody else can rename ours away (not writable by others, or sticky),
 * and a library in it can be mapped executable.
 */
static int open_parent(int root, const char *rel)
{
	struct open_how how = {
	    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    /* the target's own links must not lead us out of its root or anywhere else */
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct statvfs vfs;
	struct stat st;
	int fd;

	fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || fstatvfs(fd, &vfs) || st.st_uid != 0 ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) ||
	    (vfs.f_flag & (ST_NOEXEC | ST_RDONLY))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/*
 * A new directory in parent, mode 0700 until the copy is complete: named
 * want, or else by content.
 */
static int make_dir(struct lib_copy *lc, uint64_t hash, const char *want)
{
	uint32_t rnd;

	if (want) {
		snprintf(lc->dname, sizeof(lc->dname), "%s", want);
		return mkdirat(lc->parent, lc->dname, 0700) ? -errno : 0;
	}
	/* named by content first: a second load into the same process then finds the first */
	snprintf(lc->dname, sizeof(lc->dname), "ptg-%016llx", (unsigned long long)hash);
	if (!mkdirat(lc->parent, lc->dname, 0700))
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EAGAIN;
	snprintf(lc->dname, sizeof(lc->dname), "ptg-%016llx.%08x", (unsigned long long)hash, rnd);
	return mkdirat(lc->parent, lc->dname, 0700) ? -errno : 0;
}

static int fill_dir(struct lib_copy *lc, const uint8_t *buf, size_t len)
{
	struct stat st;
	int fd, err;

	lc->dir = openat(lc->parent, lc->dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (lc->dir < 0)
		return -errno;
	fd = openat(lc->dir, lc->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	err = write_all(fd, buf, len);
	/* explicit modes: our umask must not keep the target from reading it */
	if (!err && (fchmod(fd, 0444) || fstat(fd, &st)))
		err = -errno;
	if (!err) {
		lc->dev = st.st_dev;
		lc->ino = st.st_ino;
	}
	close(fd);
	if (!err && fchmod(lc->dir, 0755))
		err = -errno;
	return err;
}

/* Removes what copy_into() made of the copy; lc can be tried again. */
static void undo_copy(struct lib_copy *lc)
{
	if (lc->dir >= 0) {
		unlinkat(lc->dir, lc->name, 0);
		close(lc->dir);
	}
	if (lc->parent >= 0) {
		if (lc->dname[0])
			unlinkat(lc->parent, lc->dname, AT_REMOVEDIR);
		close(lc->parent);
	}
	lc->parent = lc->dir = -1;
	lc->dname[0] = '\0';
}

/*
 * The copy in rel of root (in a directory named dname, or by content when
 * NULL): 0, -EPERM if rel does not qualify, or why it failed there.
 */
static int copy_into(struct lib_copy *lc, int root, const char *rel, const char *dname,
		     const uint8_t *buf, size_t len)
{
	struct stat st;
	int err;

	/* missing or unfit alike: the next candidate, please */
	lc->parent = open_parent(root, rel);
	if (lc->parent < 0)
		return -EPERM;
	lc->rel = rel;
	err = make_dir(lc, u64map_hash(U64MAP_HASH_SEED, buf, len), dname);
	if (err) {
		lc->dname[0] = '\0';
		return err;
	}
	err = fill_dir(lc, buf, len);
	/* ours, as mkdirat() made it: nobody else can have replaced it in such a parent */
	if (!err && (fstat(lc->dir, &st) || st.st_uid != 0))
		err = -EPERM;
	if (!err)
		snprintf(lc->path, sizeof(lc->path), "/%s/%s/%s", rel, lc->dname, lc->name);
	return err;
}

static const char *const parents[] = {"tmp", "dev/shm", "var/tmp"};

/*
 * Whether pid's mounts are our user namespace's: else whoever owns that
 * namespace (anyone, with unshare -Urm) can bind any directory of root's
 * over its /tmp, and a copy made there as root would land in it. Asked
 * after pid's root is open: a process that leaves a namespace of ours for
 * one of its own keeps that root of ours, and none comes back.
 */
static int mounts_ours(pid_t pid, char *err, size_t errlen)
{
	struct stat owner, ours;
	char path[64];
	int mnt, user, ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
	mnt = open(path, O_RDONLY | O_CLOEXEC);
	if (mnt < 0)
		return fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	user = ioctl(mnt, NS_GET_USERNS);
	if (user < 0 || fstat(user, &owner) || stat("/proc/self/ns/user", &ours))
		ret = -errno;
	close(mnt);
	if (user >= 0)
		close(user);
	/* EPERM: a namespace above ours, no less foreign */
	if (ret && ret != -EPERM)
		return fail(err, errlen, ret, "the user namespace of pid %d's mounts: %s", pid,
			    strerror(-ret));
	if (!ret && owner.st_dev == ours.st_dev && owner.st_ino == ours.st_ino)
		return 0;
	return fail(err, errlen, -EPERM,
		    "pid %d's mounts belong to another user namespace (unshare -U, a rootless "
		    "container), whose owner can put any directory at its /tmp: no copy of the "
		    "library is made there",
		    pid);
}

/* A lib_copy named name with fd's bytes in *buf, and pid's root open in *root. */
static int copy_begin(int fd, pid_t pid, const char *name, struct lib_copy **out, uint8_t **buf,
		      size_t *len, int *root, char *err, size_t errlen)
{
	struct lib_copy *lc;
	char rootp[64];
	int ret;

	*out = NULL;
	*buf = NULL;
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return fail(err, errlen, -ENOMEM, "out of memory");
	lc->parent = lc->dir = -1;
	snprintf(lc->name, sizeof(lc->name), "%s", name);
	ret = read_all(fd, buf, len);
	if (ret) {
		free(lc);
		return fail(err, errlen, ret, "cannot read the library: %s", strerror(-ret));
	}
	snprintf(rootp, sizeof(rootp), "/proc/%d/root", pid);
	*root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*root < 0)
		ret = fail(err, errlen, -errno, "%s: %s", rootp, strerror(errno));
	else
		ret = mounts_ours(pid, err, errlen);
	if (ret) {
		if (*root >= 0)
			close(*root);
		free(*buf);
		*buf = NULL;
		free(lc);
		return ret;
	}
	*out = lc;
	return 0;
}

int lib_copy__new(int fd, pid_t pid, const char *name, struct lib_copy **out, char *err,
		  size_t errlen)
{
	const char *where = NULL;
	struct lib_copy *lc;
	uint8_t *buf;
	size_t len = 0, i;
	int root, ret;

	ret = copy_begin(fd, pid, name, out, &buf, &len, &root, err, errlen);
	if (ret)
		return ret;
	lc = *out;
	*out = NULL;
	/* the first that works: a full or read-only /tmp should not cost the GPU data */
	for (i = 0; i < sizeof(parents) / sizeof(parents[0]); i++) {
		ret = copy_into(lc, root, parents[i], NULL, buf, len);
		if (!ret)
			break;
		if (ret != -EPERM && !where) {
			where = parents[i];
			fail(err, errlen, ret, "cannot copy the library into /%s of pid %d: %s",
			     where, pid, strerror(-ret));
		}
		undo_copy(lc);
	}
	close(root);
	free(buf);
	if (ret && !where)
		fail(err, errlen, ret,
		     "pid %d has no /tmp, /dev/shm or /var/tmp owned by root, writable only with "
		     "the sticky bit, and mounted with exec",
		     pid);
	if (ret) {
		lib_copy__free(lc);
		return ret;
	}
	*out = lc;
	return 0;
}

int lib_copy__new_as(int fd, const struct lib_copy *like, pid_t pid, struct lib_copy **out,
		     char *err, size_t errlen)
{
	struct lib_copy *lc;
	uint8_t *buf;
	size_t len = 0;
	int root, ret;

	ret = copy_begin(fd, pid, like->name, out, &buf, &len, &root, err, errlen);
	if (ret)
		return ret;
	lc = *out;
	*out = NULL;
	ret = copy_into(lc, root, like->rel, like->dname, buf, len);
	close(root);
	free(buf);
	if (ret == -EPERM)
		fail(err, errlen, ret,
		     "its /%s is not owned by root, writable only with the sticky bit and "
		     "mounted with exec",
		     like->rel);
	else if (ret == -EEXIST)
		fail(err, errlen, ret, "/%s/%s exists there already", like->rel, like->dname);
	else if (ret)
		fail(err, errlen, ret, "cannot copy the library into its /%s: %s", like->rel,
		     strerror(-ret));
	/* a mistake of ours: the same name must give the same path */
	if (!ret && strcmp(lc->path, like->path))
		ret = fail(err, errlen, -EINVAL, "the copy is at %s, not %s", lc->path, like->path);
	if (ret) {
		/* a directory of that name that was there before is not ours to remove */
		if (ret == -EEXIST)
			lc->dname[0] = '\0';
		lib_copy__free(lc);
		return ret;
	}
	*out = lc;
	return 0;
}

int lib_copy__seen_by(const struct lib_copy *lc, pid_t pid)
{
	struct open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	char rootp[64];
	struct stat st;
	int root, fd, ret;

	snprintf(rootp, sizeof(rootp), "/proc/%d/root", pid);
	root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	fd = (int)syscall(SYS_openat2, root, lc->path + 1, &how, sizeof(how));
	ret = fd < 0 ? -errno : 0;
	close(root);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	ret = fstat(fd, &st)				       ? -errno
	      : (st.st_dev == lc->dev && st.st_ino == lc->ino) ? 1
							       : -EEXIST;
	close(fd);
	return ret;
}

const char *lib_copy__path(const struct lib_copy *lc)
{
	return lc->path;
}

void lib_copy__free(struct lib_copy *lc)
{
	if (!lc)
		return;
	undo_copy(lc);
	free(lc);
}

/*
 * The directory of this executable, or of its agents when installed:
 * PTG_AGENT_RELDIR (from CMake's install dirs, e.g. "../lib/ptrace-gpu") taken
 * from it, each leading ".." dropping a component so that messages name the
 * real place.
 */
static int own_dir(bool installed, char *dir, size_t len, char *err, size_t errlen)
{
	const char *rel = installed ? PTG_AGENT_RELDIR : "";
	char *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", dir, len - 1);
	if (n <= 0)
		return fail(err, errlen, -ENOENT, "/proc/self/exe: %s", strerror(errno));
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	while (!strncmp(rel, "../", 3) || !strcmp(rel, "..")) {
		slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		rel += rel[2] ? 3 : 2;
	}
	n = (ssize_t)strlen(dir);
	if (rel[0] && snprintf(dir + n, len - (size_t)n, "/%s", rel) >= (int)(len - (size_t)n))
		return fail(err, errlen, -ENAMETOOLONG, "%s/%s: too long", dir, rel);
	return 0;
}

int trusted_open_own(const char *env, const char *name, char *path, size_t len, char *err,
		     size_t errlen)
{
	const char *set = getenv(env);
	char dir[PATH_MAX - 32], first[PATH_MAX - 32];
	int ret;

	if (set && set[0]) {
		snprintf(path, len, "%s", set);
		return trusted_open(path, err, errlen);
	}
	/* beside the executable (a build tree), else where an install puts agents */
	ret = own_dir(false, first, sizeof(first), err, errlen);
	if (ret)
		return ret;
	snprintf(path, len, "%s/%s", first, name);
	ret = trusted_open(path, err, errlen);
	if (ret != -ENOENT || !PTG_AGENT_RELDIR[0])
		return ret;
	ret = own_dir(true, dir, sizeof(dir), err, errlen);
	if (ret)
		return ret;
	snprintf(path, len, "%s/%s", dir, name);
	ret = trusted_open(path, err, errlen);
	if (ret == -ENOENT)
		fail(err, errlen, ret, "%s is neither in %s nor in %s", name, first, dir);
	return ret;
}
