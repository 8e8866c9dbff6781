// SPDX-License-Identifier: MIT
/*
 * The processes a tree recording starts with: -p A,B, --uid, --children
 * (the descendants of those) and --cgroup. What they fork and exec later
 * joins the set through the BPF side (user/procs/proctree.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "proc/procfs.h"
#include "procs/proctree.h"
#include "procs/proctree_int.h"

/*
 * Kept until proctree__load(): the processes are all checked before anything
 * is loaded. py NULL: a program that is no Python (yet), recorded for what it
 * starts or execs.
 */
static int add_root(struct proctree *pt, pid_t pid, int pidfd, const struct py_interp *py)
{
	struct py_interp *n;
	struct tree_proc *p;

	if (pt->t)
		return -EBUSY;
	n = realloc(pt->roots_py, (pt->nprocs + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	pt->roots_py = n;
	p = tree_new_proc(pt, pid, pidfd);
	if (!p)
		return -ENOMEM;
	p->ran_python = py != NULL;
	p->not_python = !py;
	tree_read_identity(p);
	if (!py)
		return 0;
	n[pt->nprocs - 1] = *py;
	if (pt->nprocs == 1)
		pt->first_py = *py;
	return 0;
}

int proctree__add(struct proctree *pt, pid_t pid, const struct py_interp *py)
{
	pt->own_pid = pid;
	return add_root(pt, pid, -1, py);
}

/*
 * A process with no program to record: a kernel thread (PF_KTHREAD in the
 * flags, field 9 of /proc/PID/stat) or one that exited and is not reaped
 * yet (state Z or X, field 3). -ENOENT with the reason, else 0.
 */
static int no_program(pid_t pid, char *err, size_t errlen)
{
	char path[64], buf[1024], comm[32] = "?", *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* said by py_interp__find(), which looks anyway */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) {
		snprintf(err, errlen, "pid %d exited", pid);
		return -ENOENT;
	}
	for (int field = 3; p && field <= 9; field++)
		p = strchr(p + 1, ' ');
	if (!p || !(strtoul(p + 1, NULL, 10) & 0x00200000ul))
		return 0;
	proc_comm(pid, pid, comm, sizeof(comm));
	snprintf(err, errlen, "pid %d (%s) is a kernel thread: it runs no program to record", pid,
		 comm);
	return -ENOENT; /* --uid 0, --cgroup /: passed over as one gone */
}

/*
 * any: one that runs no Python is taken too (py NULL), for its CUDA calls,
 * ops and off-CPU time, its exec into Python and, with --children, what it
 * starts; else -ENOEXEC (--uid, --cgroup: only their Pythons).
 */
static int add_checked(struct proctree *pt, pid_t pid, bool any, char *err, size_t errlen)
{
	uint64_t st0 = 0, st1 = 0;
	struct py_interp py;
	int pidfd, ret;

	if (tree_find_proc(pt, pid)) {
		snprintf(err, errlen, "pid %d is given twice", pid);
		return -EINVAL;
	}
	/* the pidfd first: it is this process, and says when it exits, whoever gets its pid then */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	proc_start_time(pid, &st0);
	ret = no_program(pid, err, errlen);
	if (ret)
		goto out;
	ret = py_interp__find(pid, &py, err, errlen);
	/* what the finder filled on the way (a python-named file that is none) is no Python */
	if (ret == -ENOEXEC && any) {
		memset(&py, 0, sizeof(py));
		err[0] = '\0';
		ret = 0;
	}
	/* and what was looked at is that process, not a successor with its pid */
	if (!ret && (proc_start_time(pid, &st1) || st1 != st0)) {
		snprintf(err, errlen, "pid %d exited", pid);
		ret = -ESRCH;
	}
	if (!ret && py.warning[0])
		pr_warn("pid %d: %s", pid, py.warning);
	if (!ret)
		ret = add_root(pt, pid, pidfd, py.info ? &py : NULL);
	if (!ret)
		pt->procs[pt->nprocs - 1].start_time = st0;
out:
	if (ret && pidfd >= 0)
		close(pidfd);
	return ret;
}

int proctree__add_pid(struct proctree *pt, pid_t pid, char *err, size_t errlen)
{
	int ret = add_checked(pt, pid, true, err, errlen);

	/* the user named it: it gets a --per-process trace of its own, Python or not */
	if (!ret)
		pt->procs[pt->nprocs - 1].named = true;
	return ret;
}

/*
 * A running process of --uid or --cgroup: its Python, if any, is recorded;
 * any (a descendant with --children): one with none too, for what it starts.
 */
static int add_found(struct proctree *pt, pid_t pid, bool any, uint32_t *skipped)
{
	char err[512];
	int ret;

	if (pid == getpid() || tree_find_proc(pt, pid))
		return 0;
	ret = add_checked(pt, pid, any, err, sizeof(err));
	/* not Python, gone already: the others are recorded */
	if (ret == -ENOEXEC || ret == -ESRCH || ret == -ENOENT)
		return 0;
	if (ret && ret != -ENOMEM) {
		(*skipped)++;
		return 0;
	}
	return ret;
}

static void note_skipped(uint32_t skipped, const char *whose)
{
	if (skipped)
		pr_info("note: %u Python processes of %s cannot be recorded "
			"(unsupported version?)",
			skipped, whose);
}

int proctree__add_uid(struct proctree *pt, uid_t uid, bool quiet)
{
	uint32_t skipped = 0;
	char whose[32];
	struct dirent *de;
	uid_t owner;
	DIR *d;
	int ret = 0;

	pt->uid = uid;
	pt->children = true; /* what they fork is theirs too */
	d = opendir("/proc");
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);

		if (pid > 0 && !proc_uid(pid, &owner) && owner == uid)
			ret = add_found(pt, pid, false, &skipped);
	}
	closedir(d);
	snprintf(whose, sizeof(whose), "uid %u", (unsigned int)uid);
	if (!quiet)
		note_skipped(skipped, whose);
	return ret;
}

/* The children of pid, of all its threads, and theirs (depth levels more). */
static int add_below(struct proctree *pt, pid_t pid, int depth, uint32_t *skipped)
{
	char path[64];
	struct dirent *de;
	long kid;
	FILE *f;
	DIR *d;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = depth ? opendir(path) : NULL;
	while (d && !ret && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", pid, de->d_name);
		f = fopen(path, "re");
		while (f && !ret && fscanf(f, "%ld", &kid) == 1) {
			/* a shell in between runs no Python: it stays, for what it starts later */
			ret = add_found(pt, (pid_t)kid, true, skipped);
			ret = ret ?: add_below(pt, (pid_t)kid, depth - 1, skipped);
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return ret;
}

int proctree__add_descendants(struct proctree *pt, bool quiet)
{
	size_t roots = pt->nprocs;
	uint32_t skipped = 0;
	int ret = 0;

	/* a process tree is no deeper than this in practice; a bound all the same */
	for (size_t i = 0; !ret && i < roots; i++)
		ret = add_below(pt, pt->procs[i].pid, 32, &skipped);
	if (!quiet)
		note_skipped(skipped, "the processes' descendants");
	return ret;
}

/* The processes of the cgroup at dirfd and of those below it (cgroup.procs of each). */
static int add_cgroup_dir(struct proctree *pt, int dirfd, int depth, uint32_t *skipped)
{
	struct dirent *de;
	long pid;
	FILE *f;
	DIR *d;
	int fd, ret = 0;

	fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	f = fd >= 0 ? fdopen(fd, "r") : NULL;
	while (f && !ret && fscanf(f, "%ld", &pid) == 1)
		ret = add_found(pt, (pid_t)pid, false, skipped);
	if (f)
		fclose(f);
	/* the kernel nests cgroups at most a few dozen deep; a bound all the same */
	fd = depth < 64 ? openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	d = fd >= 0 ? fdopendir(fd) : NULL;
	while (d && !ret && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		fd = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		ret = add_cgroup_dir(pt, fd, depth + 1, skipped);
		close(fd);
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return ret;
}

int proctree__add_cgroup(struct proctree *pt, const char *path, bool quiet, char *err,
			 size_t errlen)
{
	uint32_t skipped = 0;
	struct statfs sfs;
	int ret;

	pt->cg_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pt->cg_fd < 0 || fstatfs(pt->cg_fd, &sfs) || sfs.f_type != CGROUP2_SUPER_MAGIC) {
		ret = pt->cg_fd < 0 ? -errno : -ENOTDIR;
		snprintf(err, errlen, "%s is not a cgroup v2 directory%s%s", path,
			 ret == -ENOTDIR ? "" : ": ", ret == -ENOTDIR ? "" : strerror(-ret));
		return ret;
	}
	snprintf(pt->cg_path, sizeof(pt->cg_path), "%s", path);
	pt->children = true; /* what they fork stays in the cgroup */
	ret = add_cgroup_dir(pt, pt->cg_fd, 0, &skipped);
	if (!quiet)
		note_skipped(skipped, path);
	return ret;
}
