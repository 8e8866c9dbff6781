// SPDX-License-Identifier: MIT
/* A target's files opened as it mapped them, never as its paths say (procopen.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "proc/procopen.h"

/* Said one by one up to here, then only with -v: a host of hostile processes must not flood. */
#define REFUSALS_SAID 16

struct kept {
	dev_t dev;
	ino_t ino;
	int fd;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept *kept;
static size_t nkept;
static unsigned long refusals;

unsigned long proc_open_refusals(void)
{
	return __atomic_load_n(&refusals, __ATOMIC_RELAXED);
}

static int refuse(pid_t pid, const char *path, int err, const char *why)
{
	unsigned long n = __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);

	if (n <= REFUSALS_SAID)
		pr_warn("pid %d: not reading %s: %s%s", pid, path, why,
			n == REFUSALS_SAID ? " (further ones with -v)" : "");
	else
		pr_debug("pid %d: not reading %s: %s", pid, path, why);
	return err;
}

static int openat2_path(int dirfd, const char *path, bool follow, bool dir)
{
	struct open_how how = {
	    /* O_PATH opens nothing: a FIFO does not block it, a device never sees it */
	    .flags = O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (follow ? 0 : RESOLVE_NO_SYMLINKS),
	};
	int fd;

	while (*path == '/')
		path++;
	fd = (int)syscall(SYS_openat2, dirfd, path[0] ? path : ".", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

static int open_root(pid_t pid)
{
	char link[64];
	int fd;

	snprintf(link, sizeof(link), "/proc/%d/root", pid);
	fd = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The target's fsuid, fsgid and supplementary groups (/proc/PID/status). */
struct creds {
	unsigned int uid, gid;
	bool in_group;
};

static int read_creds(pid_t pid, gid_t want, struct creds *c)
{
	unsigned int r, e, s, found = 0;
	char path[64], *line = NULL;
	size_t cap = 0;
	FILE *f;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		if (sscanf(line, "Uid: %u %u %u %u", &r, &e, &s, &c->uid) == 4)
			found |= 1;
		else if (sscanf(line, "Gid: %u %u %u %u", &r, &e, &s, &c->gid) == 4)
			found |= 2;
		else if (!strncmp(line, "Groups:", 7)) {
			for (char *p = line + 7, *end;; p = end) {
				unsigned long g = strtoul(p, &end, 10);

				if (end == p)
					break;
				c->in_group |= g == want;
			}
		}
	}
	free(line);
	fclose(f);
	c->in_group |= c->gid == want;
	return found == 3 ? 0 : -ENOENT;
}

/*
 * Whether the target could read the file itself, by its mode bits (not
 * ACLs): a link the target planted in its search path must not make us,
 * root, read a file of someone else's for it (RESOLVE_IN_ROOT keeps links
 * inside its root, which for most targets is ours).
 */
static bool target_may_read(pid_t pid, const struct stat *st)
{
	struct creds c;

	if (read_creds(pid, st->st_gid, &c))
		return false;
	if (c.uid == 0)
		return true;
	if (st->st_uid == c.uid)
		return st->st_mode & S_IRUSR;
	if (c.in_group)
		return st->st_mode & S_IRGRP;
	return st->st_mode & S_IROTH;
}

int proc_root_open(pid_t pid, const char *path, bool follow, bool dir)
{
	struct stat st;
	int root, fd;

	root = open_root(pid);
	if (root < 0)
		return root;
	fd = openat2_path(root, path, follow, dir);
	close(root);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))) {
		close(fd);
		/* one of the many names a search tries: not worth a word but with -v */
		pr_debug("pid %d: not reading %s: not a %s", pid, path,
			 dir ? "directory" : "regular file");
		return -EPERM;
	}
	if (!target_may_read(pid, &st)) {
		close(fd);
		return refuse(pid, path, -EACCES, "the process itself may not read it");
	}
	return fd;
}

DIR *proc_root_opendir(pid_t pid, const char *path)
{
	int pathfd = proc_root_open(pid, path, true, true), fd;
	DIR *d;

	if (pathfd < 0)
		return NULL;
	fd = openat(pathfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(pathfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

bool proc_root_is(pid_t pid, const char *path, bool dir)
{
	int fd = proc_root_open(pid, path, true, dir);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* fd is the file of m: regular, with m's inode and device. 0, or a reason. */
static const char *mismatch(int fd, const struct proc_map *m)
{
	struct statfs sfs;
	struct stat st;

	if (fstat(fd, &st))
		return "cannot stat it";
	if (!S_ISREG(st.st_mode))
		return "not a regular file";
	if (st.st_ino != m->inode)
		return "another file than the one mapped there";
	if (st.st_dev == m->dev || !m->dev)
		return NULL;
	/*
	 * Kernels before 6.8 show in maps the device of an overlayfs file's
	 * real (upper or lower) inode, while opening it gives the overlay's.
	 */
	if (!fstatfs(fd, &sfs) && sfs.f_type == OVERLAYFS_SUPER_MAGIC)
		return NULL;
	return "another file than the one mapped there";
}

static int open_map_files(pid_t pid, const struct proc_map *m)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start,
		 m->end);
	/* the kernel's own link to the mapped file: nothing of the target's is resolved */
	fd = open(path, O_PATH | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static bool is_deleted(const char *path)
{
	size_t n = strlen(path);

	return n > 10 && !strcmp(path + n - 10, " (deleted)");
}

/*
 * m's path inside the target's root: maps names files from our root, so a
 * chrooted target's are under its root's path (cut off here); one in
 * another mount namespace names them as it sees them. The path is the
 * kernel's (no link in it): every symbolic link is refused.
 */
static int open_by_path(pid_t pid, const struct proc_map *m)
{
	char link[64], root[PATH_MAX];
	const char *rel = m->path;
	int dirfd, fd = -ENOENT;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/root", pid);
	n = readlink(link, root, sizeof(root) - 1);
	if (n > 1) {
		root[n] = '\0';
		if (!strncmp(rel, root, (size_t)n) && rel[n] == '/')
			rel += n;
	}
	dirfd = open_root(pid);
	if (dirfd >= 0) {
		fd = openat2_path(dirfd, rel, false, false);
		close(dirfd);
		/* in our root: nowhere else to look */
		if (fd != -ENOENT || n == 1)
			return fd;
	}
	/*
	 * Gone (its objects are still read for its samples), or a chroot's file
	 * on a mount only our root reaches: as maps names it, from our root.
	 */
	dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	fd = openat2_path(dirfd, m->path, false, false);
	close(dirfd);
	return fd;
}

int proc_map_open(pid_t pid, const struct proc_map *m)
{
	const char *why;
	int fd = -ENOENT;

	if (m->start < m->end)
		fd = open_map_files(pid, m);
	if (fd < 0 && fd != -ESRCH) {
		/* the name of a deleted file names another one, or none */
		if (is_deleted(m->path) && (fd == -EPERM || fd == -EACCES))
			return refuse(pid, m->path, -ESTALE,
				      "deleted, and /proc/PID/map_files is closed to us");
		if (is_deleted(m->path))
			return fd;
		fd = open_by_path(pid, m);
	}
	if (fd == -ELOOP || fd == -EXDEV)
		return refuse(pid, m->path, -EPERM, "its path has a symbolic link in it");
	if (fd < 0)
		return fd;
	why = mismatch(fd, m);
	if (why) {
		close(fd);
		return refuse(pid, m->path, strcmp(why, "not a regular file") ? -ESTALE : -EPERM,
			      why);
	}
	return fd;
}

int proc_fd_reopen(int pathfd)
{
	char path[32];
	int fd;

	proc_fd_path(pathfd, path, sizeof(path));
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void proc_fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

int proc_keep_fd(int fd, char *buf, size_t len)
{
	struct kept *n;
	struct stat st;
	int err = 0;

	if (fstat(fd, &st)) {
		err = -errno;
		close(fd);
		return err;
	}
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nkept; i++) {
		if (kept[i].dev == st.st_dev && kept[i].ino == st.st_ino) {
			close(fd);
			fd = kept[i].fd;
			goto out;
		}
	}
	n = realloc(kept, (nkept + 1) * sizeof(*n));
	if (!n) {
		close(fd);
		err = -ENOMEM;
		goto out;
	}
	kept = n;
	kept[nkept++] = (struct kept){st.st_dev, st.st_ino, fd};
out:
	pthread_mutex_unlock(&lock);
	if (!err)
		proc_fd_path(fd, buf, len);
	return err;
}

int proc_map_path(pid_t pid, const struct proc_map *m, char *buf, size_t len)
{
	int fd = proc_map_open(pid, m);

	return fd < 0 ? fd : proc_keep_fd(fd, buf, len);
}

int proc_root_path(pid_t pid, const char *path, bool follow, char *buf, size_t len)
{
	int fd = proc_root_open(pid, path, follow, false);

	return fd < 0 ? fd : proc_keep_fd(fd, buf, len);
}
