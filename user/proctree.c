// SPDX-License-Identifier: MIT
/* A set of recorded processes that follows forks and execs; routes Python events by pid. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clock.h"
#include "launch.h"
#include "procfs.h"
#include "proctree.h"
#include "proctree.skel.h"
#include "u64map.h"

/* The most processes recorded at once: a fork past it is counted, not recorded. */
#define PROCTREE_MAX 4096
/*
 * How long after an exec the new program may take to map a supported
 * interpreter (ld.so maps a shared libpython within milliseconds) before it
 * is taken for another program: a shell, a launcher. It stays in the set,
 * so that the processes it starts are recorded.
 */
#define EXEC_WAIT_NS 2000000000ull

struct tree_interp {
	struct pyframe *pf;
	dev_t dev;
	ino_t ino;
};

struct tree_proc {
	pid_t pid;
	int pidfd;	  /* processes given with -p: says when it ends; -1 for the others */
	uint32_t interp;  /* index + 1 in interps; 0: not known (yet) */
	uint64_t exec_ts; /* it exec()'d then, and its new interpreter is looked for; 0: not */
	bool exited;
	bool not_python;
	bool ran_python; /* had a supported interpreter at some point: gets a --per-process trace */
	/* read while it runs, for its own trace (--per-process) */
	char *cmdline;
	char rank[24];	    /* RANK, else LOCAL_RANK: names its file */
	char dist_rank[24]; /* RANK alone: the job's rank, for export */
	char world[24];
};

struct proctree {
	struct tracer *t;
	struct proctree_bpf *skel;
	int set_fd;
	bool children;
	bool quiet;
	bool attached;
	struct tree_interp *interps;
	size_t ninterps;
	int64_t uid; /* --uid: every exec of this user joins the set; -1: none */
	int cg_fd;   /* --cgroup: its directory, or -1 */
	char cg_path[PATH_MAX];
	struct tree_proc *procs;
	size_t nprocs;
	struct u64map by_pid;	    /* pid -> index + 1 in procs */
	size_t last;		    /* index + 1 of the previous event's process */
	struct py_interp *roots_py; /* interpreters of the processes added before loading */
	struct py_interp first_py;
	uint64_t unrouted;
};

/* Every Python event looks its process up: by a hash, not a walk of all forks so far. */
static struct tree_proc *find_proc(struct proctree *pt, pid_t pid)
{
	uint64_t *i;

	if (pt->last && pt->procs[pt->last - 1].pid == pid)
		return &pt->procs[pt->last - 1];
	i = u64map__get(&pt->by_pid, (uint64_t)pid);
	if (!i)
		return NULL;
	pt->last = *i;
	return &pt->procs[*i - 1];
}

/*
 * What names the process's own trace: its command line and its rank
 * (torchrun and torch.distributed's env:// give RANK and WORLD_SIZE; a
 * LOCAL_RANK alone names the file). Kept if the process is gone already.
 */
static void read_identity(struct tree_proc *p)
{
	char buf[4096];

	if (proc_cmdline(p->pid, buf, sizeof(buf)))
		return;
	free(p->cmdline);
	p->cmdline = strdup(buf);
	proc_environ_number(p->pid, "RANK", p->dist_rank, sizeof(p->dist_rank));
	memcpy(p->rank, p->dist_rank, sizeof(p->rank));
	if (!p->rank[0])
		proc_environ_number(p->pid, "LOCAL_RANK", p->rank, sizeof(p->rank));
	proc_environ_number(p->pid, "WORLD_SIZE", p->world, sizeof(p->world));
}

static struct tree_proc *new_proc(struct proctree *pt, pid_t pid, int pidfd)
{
	struct tree_proc *n;

	n = realloc(pt->procs, (pt->nprocs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	pt->procs = n;
	/* a pid given back and taken again names the newest entry */
	if (u64map__put(&pt->by_pid, (uint64_t)pid, pt->nprocs + 1))
		return NULL;
	n = &pt->procs[pt->nprocs++];
	*n = (struct tree_proc){.pid = pid, .pidfd = pidfd};
	return n;
}

/*
 * The probes for process pid: on the file, for every process, when forks
 * are followed (a child runs before it could be named); else on pid alone,
 * so that the other processes of that interpreter pay nothing.
 */
static int attach_for(struct proctree *pt, struct pyframe *pf, pid_t pid)
{
	return pyframe__attach_pid(pf, pt->children ? -1 : pid);
}

/* The pyframe of py's interpreter file: one per file, made at its first process. */
static int interp_for(struct proctree *pt, const struct py_interp *py, uint32_t *idx)
{
	struct tree_interp *n;
	struct stat st;
	int err;

	if (stat(py->attach_path, &st))
		return -errno;
	for (size_t i = 0; i < pt->ninterps; i++) {
		if (pt->interps[i].dev == st.st_dev && pt->interps[i].ino == st.st_ino) {
			*idx = (uint32_t)i + 1;
			return pt->attached ? attach_for(pt, pt->interps[i].pf, py->pid) : 0;
		}
	}
	n = realloc(pt->interps, (pt->ninterps + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	pt->interps = n;
	n = &pt->interps[pt->ninterps];
	*n = (struct tree_interp){.dev = st.st_dev, .ino = st.st_ino};
	err = pyframe__open_shared(py, pt->t, pt->set_fd, &n->pf);
	if (!err && pt->attached)
		err = attach_for(pt, n->pf, py->pid);
	if (err) {
		pyframe__destroy(n->pf);
		return err;
	}
	pt->ninterps++;
	*idx = (uint32_t)pt->ninterps;
	return 0;
}

static void found(struct proctree *pt, struct tree_proc *p, const struct py_interp *py)
{
	p->exec_ts = 0;
	p->ran_python = true;
	read_identity(p);
	if (!pt->quiet)
		fprintf(stderr, "ptrace-gpu: recording pid %d too (Python %s, %s)\n", p->pid,
			py->version, py->path);
	if (!pt->quiet && py->warning[0])
		fprintf(stderr, "ptrace-gpu: warning: pid %d: %s\n", p->pid, py->warning);
}

/*
 * A process of the set exec()'d: stopped under ptrace (user/launch.c) while
 * its new interpreter is found and probed, so that an interpreter file not
 * probed yet misses none of its calls either. Else it is looked for at its
 * first event or in proctree__poll().
 */
static void catch_exec(struct proctree *pt, struct tree_proc *p)
{
	struct py_interp py;
	char err[512];
	int ret;

	ret = launch__catch(p->pid, &py, err, sizeof(err));
	if (ret == -ENOEXEC) {
		__u32 pid = (__u32)p->pid;

		p->not_python = true;
		p->exec_ts = 0;
		/* --uid, --cgroup: its next exec puts it back; room is kept for the Pythons */
		if (pt->uid >= 0 || pt->cg_fd >= 0)
			bpf_map_delete_elem(pt->set_fd, &pid);
		return;
	}
	if (ret)
		return;
	/* interp_for() makes pyframes, never processes: p stays where it is */
	ret = interp_for(pt, &py, &p->interp);
	launch__release(p->pid);
	if (!ret)
		found(pt, p, &py);
}

/* Looks for the interpreter of a process met while recording (a fork, an exec). */
static void resolve(struct proctree *pt, struct tree_proc *p, uint64_t now)
{
	struct py_interp py;
	char err[512];
	int ret;

	ret = py_interp__find(p->pid, &py, err, sizeof(err));
	if (!ret)
		ret = interp_for(pt, &py, &p->interp);
	if (!ret) {
		found(pt, p, &py);
		return;
	}
	if (ret == -ESRCH) {
		p->exited = true;
	} else if (!p->exec_ts || now - p->exec_ts > EXEC_WAIT_NS) {
		p->not_python = true;
		p->exec_ts = 0;
	}
}

static int route_py(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct proctree *pt = ctx;
	struct tree_proc *p = find_proc(pt, (pid_t)e->pid);

	(void)t;
	/* a member whose fork event was lost (ring buffer full): learnt now */
	if (!p && !(p = new_proc(pt, (pid_t)e->pid, -1)))
		return -ENOMEM;
	if (!p->interp && !p->not_python && !p->exited)
		resolve(pt, p, e->ts);
	if (!p->interp) {
		pt->unrouted++;
		return 0;
	}
	return pyframe__handle(pt->interps[p->interp - 1].pf, e, size);
}

/* What ran in the process until now is over: its open frames end, its names go. */
static int end_program(struct proctree *pt, struct tree_proc *p, uint64_t ts)
{
	int err = tracer__end_process(pt->t, (uint32_t)p->pid, ts, PTG_F_EXIT_STOP);

	if (p->interp)
		pyframe__forget(pt->interps[p->interp - 1].pf, p->pid);
	p->interp = 0;
	return err;
}

static int on_proc(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct proctree *pt = ctx;
	struct tree_proc *p, *parent;
	uint32_t interp;
	int err;

	(void)size;
	switch (e->kind) {
	case PTG_EV_PROC_FORK:
		parent = find_proc(pt, (pid_t)e->a);
		interp = parent && !parent->exited ? parent->interp : 0;
		/* a forked child maps what its parent did: the same interpreter */
		p = new_proc(pt, (pid_t)e->pid, -1);
		if (!p)
			return -ENOMEM;
		p->interp = interp;
		p->ran_python = interp != 0;
		/* the parent's, unless the child is gone already */
		parent = find_proc(pt, (pid_t)e->a);
		if (parent) {
			p->cmdline = parent->cmdline ? strdup(parent->cmdline) : NULL;
			memcpy(p->rank, parent->rank, sizeof(p->rank));
			memcpy(p->dist_rank, parent->dist_rank, sizeof(p->dist_rank));
			memcpy(p->world, parent->world, sizeof(p->world));
		}
		read_identity(p);
		return tracer__set_proc_born(t, e->pid, e->ts);
	case PTG_EV_PROC_EXEC:
		p = find_proc(pt, (pid_t)e->pid) ?: new_proc(pt, (pid_t)e->pid, -1);
		if (!p)
			return -ENOMEM;
		p->not_python = false;
		p->exec_ts = e->ts;
		err = end_program(pt, p, e->ts);
		if (!err)
			catch_exec(pt, p);
		return err;
	case PTG_EV_PROC_EXIT:
		p = find_proc(pt, (pid_t)e->pid);
		if (!p)
			return 0;
		p->exited = true;
		p->exec_ts = 0;
		return end_program(pt, p, e->ts);
	}
	return 0;
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct proctree *pt = ctx;
	struct trace_writer *w = tracer__writer(t);
	const struct proctree_bpf__bss *bss = pt->skel->bss;
	int err = 0;

	for (size_t i = 0; !err && i < pt->ninterps; i++)
		err = pyframe__write_losses(pt->interps[i].pf);
	if (!err && bss->lost_events)
		err = trace_writer__loss(w, "proc_events", UINT32_MAX, bss->lost_events);
	if (!err && bss->lost_full)
		err = trace_writer__loss(w, "proc_set_full", UINT32_MAX, bss->lost_full);
	if (!err && pt->unrouted)
		err = trace_writer__loss(w, "py_unrouted", UINT32_MAX, pt->unrouted);
	return err;
}

int proctree__new(bool children, bool quiet, struct proctree **out)
{
	struct proctree *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return -ENOMEM;
	pt->set_fd = -1;
	pt->uid = -1;
	pt->cg_fd = -1;
	pt->children = children;
	pt->quiet = quiet;
	*out = pt;
	return 0;
}

int proctree__load(struct proctree *pt, struct tracer *t)
{
	int err;

	pt->t = t;
	pt->set_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "ptg_procs", sizeof(__u32), sizeof(__u8),
				    PROCTREE_MAX, NULL);
	if (pt->set_fd < 0) {
		err = -errno;
		goto fail;
	}
	pt->skel = proctree_bpf__open();
	if (!pt->skel) {
		err = -errno;
		goto fail;
	}
	if (pt->uid >= 0)
		pt->skel->rodata->watch_uid = (__u32)pt->uid;
	pt->skel->rodata->watch_cgroup = pt->cg_fd >= 0;
	err = bpf_map__reuse_fd(pt->skel->maps.events, tracer__ringbuf_fd(t));
	err = err ?: bpf_map__reuse_fd(pt->skel->maps.traced, pt->set_fd);
	err = err ?: proctree_bpf__load(pt->skel);
	if (!err && pt->cg_fd >= 0) {
		__u32 zero = 0;

		if (bpf_map_update_elem(bpf_map__fd(pt->skel->maps.cgroups), &zero, &pt->cg_fd,
					BPF_ANY))
			err = -errno;
	}
	err = err ?: tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, route_py, write_losses, pt);
	err = err ?: tracer__on(t, PTG_EV_PROC_FORK, PTG_EV_PROC_EXIT, on_proc, NULL, pt);
	if (err)
		goto fail;
	/* one pyframe per interpreter file, whichever process it was found in */
	for (size_t i = 0; !err && i < pt->nprocs; i++) {
		if (!pt->procs[i].ran_python)
			continue;
		err = interp_for(pt, &pt->roots_py[i], &pt->procs[i].interp);
		if (err)
			fprintf(stderr, "ptrace-gpu: cannot probe %s: %s\n", pt->roots_py[i].path,
				strerror(-err));
	}
	free(pt->roots_py);
	pt->roots_py = NULL;
	return err;
fail:
	fprintf(stderr, "proctree: cannot load the process-set programs: %s\n", strerror(-err));
	return err;
}

int proctree__set_fd(const struct proctree *pt)
{
	return pt->set_fd;
}

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
	p = new_proc(pt, pid, pidfd);
	if (!p)
		return -ENOMEM;
	p->ran_python = py != NULL;
	p->not_python = !py;
	read_identity(p);
	if (!py)
		return 0;
	n[pt->nprocs - 1] = *py;
	if (pt->nprocs == 1)
		pt->first_py = *py;
	return 0;
}

int proctree__add(struct proctree *pt, pid_t pid, const struct py_interp *py)
{
	return add_root(pt, pid, -1, py);
}

int proctree__add_pid(struct proctree *pt, pid_t pid, char *err, size_t errlen)
{
	uint64_t st0 = 0, st1 = 0;
	struct py_interp py;
	int pidfd, ret;

	if (find_proc(pt, pid)) {
		snprintf(err, errlen, "pid %d is given twice", pid);
		return -EINVAL;
	}
	/* the pidfd first: it is this process, and says when it exits, whoever gets its pid then */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	proc_start_time(pid, &st0);
	ret = py_interp__find(pid, &py, err, errlen);
	/* and what was looked at is that process, not a successor with its pid */
	if (!ret && (proc_start_time(pid, &st1) || st1 != st0)) {
		snprintf(err, errlen, "pid %d exited", pid);
		ret = -ESRCH;
	}
	if (!ret && py.warning[0])
		fprintf(stderr, "ptrace-gpu: warning: pid %d: %s\n", pid, py.warning);
	if (!ret)
		ret = add_root(pt, pid, pidfd, &py);
	if (ret && pidfd >= 0)
		close(pidfd);
	return ret;
}

/* A running process of --uid or --cgroup: its Python, if any, is recorded. */
static int add_found(struct proctree *pt, pid_t pid, uint32_t *skipped)
{
	char err[512];
	int ret;

	if (pid == getpid() || find_proc(pt, pid))
		return 0;
	ret = proctree__add_pid(pt, pid, err, sizeof(err));
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
		fprintf(stderr,
			"ptrace-gpu: note: %u Python processes of %s cannot be recorded "
			"(unsupported version?)\n",
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
			ret = add_found(pt, pid, &skipped);
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
			/* a shell in between runs no Python: what it started may */
			ret = add_found(pt, (pid_t)kid, skipped);
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
		ret = add_found(pt, (pid_t)pid, skipped);
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

pid_t proctree__first(const struct proctree *pt, const struct py_interp **py)
{
	*py = &pt->first_py;
	return pt->nprocs ? pt->procs[0].pid : 0;
}

int proctree__write_meta(const struct proctree *pt, struct trace_writer *w)
{
	char buf[4096];
	size_t len = 0;
	int err;

	/* the processes the recording began with: the others are known by their records */
	for (size_t i = 0; i < pt->nprocs && len < sizeof(buf); i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%d", i ? "," : "",
					pt->procs[i].pid);
	buf[len < sizeof(buf) ? len : 0] = '\0';
	err = trace_writer__meta(w, "pids", buf);
	snprintf(buf, sizeof(buf), "%lld", (long long)pt->uid);
	err = err ?: trace_writer__meta(w, "uid", pt->uid >= 0 ? buf : "");
	err = err ?: trace_writer__meta(w, "cgroup", pt->cg_path);
	return err ?: trace_writer__meta(w, "children", pt->children ? "1" : "0");
}

static int attach_prog(struct bpf_program *prog, struct bpf_link **link)
{
	*link = bpf_program__attach(prog);
	return *link ? 0 : -errno;
}

int proctree__attach(struct proctree *pt)
{
	struct proctree_bpf *s = pt->skel;
	__u8 one = 1;
	int err;

	/* the set follows forks before it has members: none is missed in between */
	err = attach_prog(s->progs.tree_exit, &s->links.tree_exit);
	err = err ?: attach_prog(s->progs.tree_exec, &s->links.tree_exec);
	if (!err && pt->children)
		err = attach_prog(s->progs.tree_fork, &s->links.tree_fork);
	for (size_t i = 0; !err && i < pt->nprocs; i++) {
		__u32 pid = (__u32)pt->procs[i].pid;

		if (bpf_map_update_elem(pt->set_fd, &pid, &one, BPF_ANY))
			err = -errno;
	}
	if (err)
		fprintf(stderr, "proctree: cannot attach: %s\n", strerror(-err));
	for (size_t i = 0; !err && i < pt->nprocs; i++) {
		if (pt->procs[i].interp)
			err = attach_for(pt, pt->interps[pt->procs[i].interp - 1].pf,
					 pt->procs[i].pid);
	}
	if (err)
		return err;
	pt->attached = true;
	for (size_t i = 0; !pt->quiet && i < pt->nprocs; i++) {
		const struct tree_proc *p = &pt->procs[i];
		const struct py_interp *py =
		    p->interp ? pyframe__interp(pt->interps[p->interp - 1].pf) : NULL;

		fprintf(stderr, "ptrace-gpu: recording pid %d (%s%s%s%s)%s\n", p->pid,
			py ? "Python " : "no Python yet", py ? py->version : "", py ? ", " : "",
			py ? py->path : "", pt->children ? " and the processes it starts" : "");
	}
	return 0;
}

int proctree__poll(struct proctree *pt)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);

	for (size_t i = 0; i < pt->nprocs; i++) {
		struct tree_proc *p = &pt->procs[i];
		struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};

		if (p->pidfd >= 0 && !p->exited && poll(&pfd, 1, 0) == 1)
			p->exited = true;
		if (p->exec_ts && !p->interp && !p->exited && !p->not_python)
			resolve(pt, p, now);
	}
	return 0;
}

size_t proctree__nprocs(const struct proctree *pt)
{
	return pt->nprocs;
}

void proctree__proc(const struct proctree *pt, size_t i, struct proctree_proc *out)
{
	const struct tree_proc *p = &pt->procs[i];
	/* the last interpreter it ran; after an exec into no Python, that of its first */
	uint32_t interp = p->interp ?: (p->ran_python && pt->ninterps ? 1 : 0);
	const struct py_interp *py = interp ? pyframe__interp(pt->interps[interp - 1].pf) : NULL;

	*out = (struct proctree_proc){
	    .pid = p->pid,
	    .ran_python = p->ran_python,
	    .cmdline = p->cmdline ?: "",
	    .rank = p->rank,
	    .dist_rank = p->dist_rank,
	    .world_size = p->world,
	    .py_version = py ? py->version : "",
	    .py_path = py ? py->path : "",
	};
}

uint32_t proctree__live(const struct proctree *pt)
{
	uint32_t n = 0;

	for (size_t i = 0; i < pt->nprocs; i++)
		n += !pt->procs[i].exited;
	return n;
}

void proctree__detach(struct proctree *pt)
{
	if (!pt)
		return;
	for (size_t i = 0; i < pt->ninterps; i++)
		pyframe__detach(pt->interps[i].pf);
	if (pt->skel)
		proctree_bpf__detach(pt->skel);
}

void proctree__stats(const struct proctree *pt, struct proctree_stats *st)
{
	const struct proctree_bpf__bss *bss = pt->skel->bss;
	struct pyframe_stats ps;

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < pt->ninterps; i++) {
		pyframe__stats(pt->interps[i].pf, &ps);
		st->dropped += ps.dropped;
	}
	st->processes = (uint32_t)pt->nprocs;
	st->interpreters = (uint32_t)pt->ninterps;
	for (size_t i = 0; i < pt->nprocs; i++)
		st->not_python += pt->procs[i].not_python;
	st->unrouted = pt->unrouted;
	st->lost_procs = bss->lost_events + bss->lost_full;
}

void proctree__summary(const struct proctree *pt, const char *reason, double secs, uint64_t calls,
		       uint64_t events, const char *out)
{
	struct proctree_stats st;

	proctree__stats(pt, &st);
	fprintf(stderr,
		"ptrace-gpu: %s after %.2f s: %llu Python calls from %u processes (%u "
		"interpreters; %llu events), %llu events lost%s%s\n",
		reason, secs, (unsigned long long)calls, st.processes, st.interpreters,
		(unsigned long long)events, (unsigned long long)st.dropped, out ? "; wrote " : "",
		out ? out : "");
	if (st.not_python)
		fprintf(stderr, "ptrace-gpu: %u of them ran no supported Python\n", st.not_python);
	if (st.lost_procs || st.unrouted)
		fprintf(stderr,
			"ptrace-gpu: warning: %llu process events lost, %llu Python events of "
			"processes whose interpreter was not found\n",
			(unsigned long long)st.lost_procs, (unsigned long long)st.unrouted);
}

void proctree__destroy(struct proctree *pt)
{
	if (!pt)
		return;
	proctree__detach(pt);
	for (size_t i = 0; i < pt->ninterps; i++)
		pyframe__destroy(pt->interps[i].pf);
	free(pt->interps);
	for (size_t i = 0; i < pt->nprocs; i++) {
		if (pt->procs[i].pidfd >= 0)
			close(pt->procs[i].pidfd);
		free(pt->procs[i].cmdline);
	}
	free(pt->procs);
	u64map__free(&pt->by_pid);
	if (pt->cg_fd >= 0)
		close(pt->cg_fd);
	free(pt->roots_py);
	proctree_bpf__destroy(pt->skel);
	if (pt->set_fd >= 0)
		close(pt->set_fd);
	free(pt);
}
