// SPDX-License-Identifier: MIT
/*
 * A set of recorded processes that follows forks and execs through BPF and
 * routes Python events by pid; user/procs/proctree_roots.c finds the processes it
 * starts with.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "proc/procfs.h"
#include "procs/proctree.h"
#include "procs/proctree_int.h"
#include "proctree.skel.h"
#include "pyinterp/launch.h"

/*
 * The probes for process pid: on the file, for every process, when forks
 * are followed (a child runs before it could be named); else on pid alone,
 * so that the other processes of that interpreter pay nothing.
 */
static int attach_for(struct proctree *pt, struct pyframe *pf, pid_t pid)
{
	return pf ? pyframe__attach_pid(pf, pt->children ? -1 : pid) : 0;
}

/*
 * The probes of an interpreter file, at the first process whose frames they
 * take: every process of a set without an agent; --in-process, only one
 * that exec'd away from its agent (probe), the agents' interpreters none.
 */
static int probe_interp(struct proctree *pt, struct tree_interp *n, const struct py_interp *py,
			bool probe)
{
	int err;

	if (!probe)
		return 0;
	if (!n->pf) {
		/* an agent's set needs neither BPF cookies nor bpf_loop: a probed set does */
		if (!pyframe__can_share())
			return -EOPNOTSUPP;
		/* as py's process maps it now: the file's first one may have exec'd away */
		err = pyframe__open_shared(py, pt->t, pt->set_fd, &n->pf);
		if (err)
			return err;
	}
	return pt->attached ? attach_for(pt, n->pf, py->pid) : 0;
}

/* The pyframe of py's interpreter file: one per file, made at its first process. */
static int interp_for(struct proctree *pt, const struct py_interp *py, bool probe, uint32_t *idx)
{
	struct tree_interp *n;
	struct stat st;
	int err;

	if (stat(py->attach_path, &st))
		return -errno;
	for (size_t i = 0; i < pt->ninterps; i++) {
		if (pt->interps[i].dev == st.st_dev && pt->interps[i].ino == st.st_ino) {
			*idx = (uint32_t)i + 1;
			return probe_interp(pt, &pt->interps[i], py, probe);
		}
	}
	n = realloc(pt->interps, (pt->ninterps + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	pt->interps = n;
	n = &pt->interps[pt->ninterps];
	*n = (struct tree_interp){.dev = st.st_dev, .ino = st.st_ino, .py = *py};
	err = probe_interp(pt, n, py, probe);
	if (err) {
		pyframe__destroy(n->pf);
		return err;
	}
	pt->ninterps++;
	*idx = (uint32_t)pt->ninterps;
	return 0;
}

/* Whether p's frames are the probes': always, but --in-process where its agent is. */
static bool probed(const struct proctree *pt, const struct tree_proc *p)
{
	return !pt->frames_elsewhere || p->probed;
}

static void found(struct proctree *pt, struct tree_proc *p, const struct py_interp *py)
{
	p->exec_ts = 0;
	p->ran_python = true;
	tree_nopy(pt, p->pid, false);
	tree_read_identity(p);
	/* --in-process: the agent was in the image the exec replaced */
	if (pt->frames_elsewhere && !pt->quiet)
		pr_info("pid %d exec'd Python %s (%s): its calls are taken by uprobes from here",
			p->pid, py->version, py->path);
	else if (!pt->quiet)
		pr_info("recording pid %d too (Python %s, %s)", p->pid, py->version, py->path);
	if (!pt->quiet && py->warning[0])
		pr_warn("pid %d: %s", p->pid, py->warning);
}

/*
 * --in-process: the Python p exec'd cannot be probed (a kernel without
 * BPF cookies or bpf_loop, which an agent's set did not need): said, counted
 */
static void not_probed(struct proctree *pt, struct tree_proc *p, const struct py_interp *py,
		       int err)
{
	p->interp = 0;
	p->not_python = true;
	p->exec_ts = 0;
	pt->exec_unrecorded++;
	pr_warn("pid %d exec'd Python %s (%s): its Python calls are not recorded, the "
		"in-process agent went with the program it replaced and the uprobes cannot take "
		"them: %s",
		p->pid, py->version, py->path,
		err == -EOPNOTSUPP ? "this kernel has no BPF cookies or bpf_loop" : strerror(-err));
}

/* What the image p exec'd is, looked at while p is stopped: ret as launch__examine(). */
static void take_image(struct proctree *pt, struct tree_proc *p, int ret,
		       const struct py_interp *py)
{
	struct tree_held *h;
	__u32 pid = (__u32)p->pid;

	if (ret == LAUNCH_EXEC_PYTHON) {
		/* interp_for() makes pyframes, never processes: p stays where it is */
		ret = interp_for(pt, py, probed(pt, p), &p->interp);
		if (!ret)
			found(pt, p, py);
		else if (pt->frames_elsewhere)
			not_probed(pt, p, py, ret);
		return;
	}
	/* not looked at: its first event or proctree__poll() look again (resolve()) */
	if (ret != LAUNCH_EXEC_OTHER)
		return;
	p->not_python = true;
	p->exec_ts = 0;
	/* held on: a libpython it loads stops it at the notice (proctree__mapped_python()) */
	tree_nopy(pt, p->pid, true);
	/* --uid, --cgroup: its next exec puts it back; room is kept for the Pythons */
	if (pt->uid >= 0 || pt->cg_fd >= 0) {
		bpf_map_delete_elem(pt->set_fd, &pid);
		h = tree_held_of(pt, p->pid);
		if (h)
			h->let_go = true;
	}
}

/* The exec stop of p, its event read or not. */
static void tree_exec(struct proctree *pt, struct tree_proc *p)
{
	struct tree_held *h = tree_held_of(pt, p->pid);
	struct py_interp py;
	char err[512];
	int ret;

	if (h)
		h->in_exec = true;
	p->no_hold = false;
	pt->exec_held++;
	/* nothing of the new image ran yet: what it will map is looked for ahead, and probed */
	if (pt->exec_fn)
		pt->exec_fn(pt->exec_ctx, p->pid, p->exec_ts);
	ret = launch__examine(p->pid, &py, err, sizeof(err));
	/* what its loader mapped meanwhile (a library not found ahead is said there) */
	if (ret >= 0 && pt->exec_fn)
		pt->exec_fn(pt->exec_ctx, p->pid, p->exec_ts);
	take_image(pt, p, ret, &py);
	tree_exec_done(pt, p->pid);
}

/*
 * A process of the set exec()'d before it could be held: one that joined
 * the set by that exec (--uid, --cgroup), one another tracer holds, one
 * whose exec came from a thread that could not be held. It is stopped
 * now, as soon as can be, while its new interpreter is found and probed,
 * and held from then on; it ran from its exec until then.
 */
static void catch_running(struct proctree *pt, struct tree_proc *p)
{
	pid_t pid = p->pid;
	struct tree_held *h;
	struct py_interp py;
	bool at_exec;
	char err[512];
	int ret;

	pt->exec_unheld++;
	tree_hold(pt, p, true);
	h = tree_held_of(pt, p->pid);
	if (!h)
		return; /* gone, or another tracer's: looked for at its first event */
	h->in_exec = true;
	ret = tree_stop_held(pt, p->pid, &at_exec);
	/* its forks meanwhile may have moved procs */
	p = tree_find_proc(pt, pid);
	if (ret || !p) {
		/* gone (its exit, if it was reaped there, is its exit event's) */
		h = tree_held_of(pt, pid);
		if (h)
			h->let_go = true;
		tree_exec_done(pt, pid);
		return;
	}
	ret = launch__examine(pid, &py, err, sizeof(err));
	/* stopped at a later exec: the event of that one, read next, is done */
	h = tree_held_of(pt, pid);
	if (h && at_exec)
		h->exec_stop_ts = now_ns(CLOCK_MONOTONIC);
	if (pt->exec_fn)
		pt->exec_fn(pt->exec_ctx, p->pid, p->exec_ts);
	take_image(pt, p, ret, &py);
	tree_exec_done(pt, p->pid);
}

/*
 * A process of the set exec()'d: held at the exec stop that follows the
 * event while its new interpreter is found and probed and its libraries
 * are looked for ahead, before the new image runs its first instruction,
 * so that an interpreter file or a library not probed yet misses none of
 * its calls. One not held is caught as soon as can be (catch_running()).
 */
static void catch_exec(struct proctree *pt, struct tree_proc *p)
{
	pid_t pid = p->pid;
	int ret = tree_exec_stop(pt, pid, p->exec_ts);

	/* waiting for the stop may have met forks: procs may have moved */
	p = tree_find_proc(pt, pid);
	if (!p)
		return;
	if (ret == 1)
		tree_exec(pt, p);
	else if (!ret)
		catch_running(pt, p);
}

/* Looks for the interpreter of a process met while recording (a fork, an exec). */
static void resolve(struct proctree *pt, struct tree_proc *p, uint64_t now)
{
	struct py_interp py;
	char err[512];
	int ret;

	ret = py_interp__find(p->pid, &py, err, sizeof(err));
	if (!ret) {
		ret = interp_for(pt, &py, probed(pt, p), &p->interp);
		if (!ret)
			found(pt, p, &py);
		else if (pt->frames_elsewhere)
			not_probed(pt, p, &py, ret);
		if (!ret || pt->frames_elsewhere)
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
	struct tree_proc *p = tree_find_proc(pt, (pid_t)e->pid);

	(void)t;
	/* --in-process: the agents' frame events are pymon's, the probes' of the exec'd ours */
	if (pt->frames_elsewhere && (!p || !p->probed))
		return 0;
	/* a member whose fork event was lost (ring buffer full): learnt now */
	if (!p && !(p = tree_new_proc(pt, (pid_t)e->pid, -1)))
		return -ENOMEM;
	if (!p->interp && !p->not_python && !p->exited)
		resolve(pt, p, e->ts);
	if (!p->interp) {
		pt->unrouted++;
		return 0;
	}
	p->py_events = true;
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
	struct tree_held *h;
	uint32_t interp;
	int err;

	(void)size;
	switch (e->kind) {
	case PTG_EV_PROC_FORK:
		parent = tree_find_proc(pt, (pid_t)e->a);
		interp = parent && !parent->exited ? parent->interp : 0;
		/* a forked child maps what its parent did: the same interpreter */
		p = tree_new_proc(pt, (pid_t)e->pid, -1);
		if (!p)
			return -ENOMEM;
		p->interp = interp;
		p->ran_python = interp != 0;
		p->forked = true;
		/* the parent's, unless the child is gone already */
		parent = tree_find_proc(pt, (pid_t)e->a);
		if (parent) {
			p->cmdline = parent->cmdline ? strdup(parent->cmdline) : NULL;
			memcpy(p->rank, parent->rank, sizeof(p->rank));
			memcpy(p->dist_rank, parent->dist_rank, sizeof(p->dist_rank));
			memcpy(p->world, parent->world, sizeof(p->world));
		}
		tree_read_identity(p);
		/*
		 * Forked by a thread that is not held (only a process's main
		 * thread is): held from now on, before its exec most often
		 */
		if (pt->attached)
			tree_hold(pt, p, true);
		return tracer__set_proc_born(t, e->pid, e->ts);
	case PTG_EV_PROC_EXEC:
		p = tree_find_proc(pt, (pid_t)e->pid) ?: tree_new_proc(pt, (pid_t)e->pid, -1);
		if (!p)
			return -ENOMEM;
		/*
		 * --in-process: its agent went with the image it replaced; its
		 * records, all older than this, were handled before it
		 */
		if (pt->frames_elsewhere && !p->probed) {
			p->probed = true;
			if (pt->gone_fn)
				pt->gone_fn(pt->gone_ctx, p->pid);
		}
		h = tree_held_of(pt, p->pid);
		if (h && !h->at_exec && h->exec_stop_ts > e->ts) {
			/*
			 * It exec'd again as it was caught, and was looked at at
			 * that exec's stop: what ran before ends, its interpreter
			 * stays.
			 */
			interp = p->interp;
			err = end_program(pt, p, e->ts);
			p->interp = interp;
			return err;
		}
		p->not_python = false;
		p->exec_ts = e->ts;
		/*
		 * A fork that execs before a Python event of its own (a subprocess,
		 * a wrapper's mount) ran no Python: the interpreter it was given at
		 * the fork may even be one its parent exec'd after forking it, when
		 * that exec was read late. Its new image says anew.
		 */
		if (p->forked && !p->py_events)
			p->ran_python = false;
		err = end_program(pt, p, e->ts);
		if (!err)
			catch_exec(pt, p);
		return err;
	case PTG_EV_PROC_EXIT:
		p = tree_find_proc(pt, (pid_t)e->pid);
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

	for (size_t i = 0; !err && i < pt->ninterps; i++) {
		if (pt->interps[i].pf)
			err = pyframe__write_losses(pt->interps[i].pf);
	}
	if (!err && bss->lost_events)
		err = trace_writer__lost(w, PTG_LOST_PROC_EVENTS, UINT32_MAX, bss->lost_events);
	if (!err && bss->lost_full)
		err = trace_writer__lost(w, PTG_LOST_PROC_SET_FULL, UINT32_MAX, bss->lost_full);
	if (!err && pt->unrouted)
		err = trace_writer__lost(w, PTG_LOST_PY_UNROUTED, UINT32_MAX, pt->unrouted);
	if (!err && pt->exec_unrecorded)
		err = trace_writer__lost(w, PTG_LOST_PY_EXEC_UNFOLLOWED, UINT32_MAX,
					 pt->exec_unrecorded);
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
	snprintf(pt->nopy_what, sizeof(pt->nopy_what), "CUDA calls, ops and off-CPU time");
	*out = pt;
	return 0;
}

void proctree__frames_elsewhere(struct proctree *pt, proctree_gone_fn gone, void *ctx)
{
	pt->frames_elsewhere = true;
	pt->gone_fn = gone;
	pt->gone_ctx = ctx;
}

void proctree__nopy_what(struct proctree *pt, const char *what)
{
	snprintf(pt->nopy_what, sizeof(pt->nopy_what), "%s", what);
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
	/* --in-process: those of the agents go to pymon, route_py() takes the probes' */
	if (!err)
		err = tracer__on_stack(t, PTG_EV_PY_START, PTG_EV_PY_CODE, route_py, NULL, pt);
	err = err ?: tracer__on(t, PTG_EV_PROC_FORK, PTG_EV_PROC_EXIT, on_proc, write_losses, pt);
	if (err)
		goto fail;
	/* one pyframe per interpreter file, whichever process it was found in */
	for (size_t i = 0; !err && i < pt->nprocs; i++) {
		if (!pt->procs[i].ran_python)
			continue;
		err = interp_for(pt, &pt->roots_py[i], probed(pt, &pt->procs[i]),
				 &pt->procs[i].interp);
		if (err)
			pr_err("cannot probe %s: %s", pt->roots_py[i].path, strerror(-err));
	}
	free(pt->roots_py);
	pt->roots_py = NULL;
	return err;
fail:
	log_libbpf_flush();
	pr_err("proctree: cannot load the process-set programs: %s", strerror(-err));
	return err;
}

const struct py_interp *proctree__interp_of(struct proctree *pt, pid_t pid)
{
	struct tree_proc *p = tree_find_proc(pt, pid);

	if (p && !p->interp && pt->roots_py && p->ran_python)
		return &pt->roots_py[p - pt->procs];
	return p && p->interp ? &pt->interps[p->interp - 1].py : NULL;
}

void proctree__on_exec(struct proctree *pt, proctree_exec_fn fn, void *ctx)
{
	pt->exec_fn = fn;
	pt->exec_ctx = ctx;
}

void proctree__on_nopy(struct proctree *pt, proctree_nopy_fn fn, void *ctx)
{
	pt->nopy_fn = fn;
	pt->nopy_ctx = ctx;
}

int proctree__mapped_python(struct proctree *pt, pid_t pid, bool held)
{
	struct tree_proc *p = tree_find_proc(pt, pid);
	struct py_interp py;
	char err[512];
	int ret;

	/*
	 * Runs Python already (a fork shares its parent's), or is gone; or it
	 * exec'd and the new image, whose loader mapped libpython, is looked at
	 * as an exec (tree_exec(), resolve())
	 */
	if (!p || p->interp || p->exited || p->exec_ts || !pt->attached)
		return 0;
	ret = py_interp__find(pid, &py, err, sizeof(err));
	if (ret == -ESRCH || ret == -ENOENT)
		return 0;
	/* --in-process: one that exec'd away from its agent is probed as a set's member */
	if (!ret && !probed(pt, p))
		snprintf(err, sizeof(err), "no in-process agent is in it");
	ret = ret ?: !probed(pt, p) ? -ENOEXEC : interp_for(pt, &py, true, &p->interp);
	if (ret) {
		if (!p->mapped_said)
			pr_warn("pid %d mapped a libpython: its Python calls are not recorded (%s)",
				pid, err[0] ? err : strerror(-ret));
		p->not_python = p->mapped_said = true;
		p->interp = 0;
		tree_nopy(pt, pid, false);
		return 0;
	}
	p->not_python = false;
	p->exec_ts = 0;
	p->ran_python = true;
	tree_nopy(pt, pid, false);
	tree_read_identity(p);
	if (!pt->quiet)
		pr_info("pid %d runs Python %s (%s) since it mapped it: recording its calls%s", pid,
			py.version, py.path,
			held ? " from the first (held at the loader's notice)" : "");
	if (!pt->quiet && py.warning[0])
		pr_warn("pid %d: %s", pid, py.warning);
	return 0;
}

int proctree__set_fd(const struct proctree *pt)
{
	return pt->set_fd;
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

/* What is recorded of p: which members run no Python is said, one line each. */
static void say_recording(const struct proctree *pt, const struct tree_proc *p)
{
	const struct py_interp *py;
	char comm[32] = "?";

	if (p->interp) {
		py = &pt->interps[p->interp - 1].py;
		pr_info("recording pid %d (Python %s, %s)%s", p->pid, py->version, py->path,
			pt->children ? " and the processes it starts" : "");
		return;
	}
	proc_comm(p->pid, p->pid, comm, sizeof(comm));
	pr_info("recording pid %d (%s): no Python: %s; Python it execs or loads is followed%s",
		p->pid, comm, pt->nopy_what, pt->children ? ", and the processes it starts" : "");
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
	if (err) {
		log_libbpf_flush();
		pr_err("proctree: cannot attach: %s", strerror(-err));
	}
	for (size_t i = 0; !err && i < pt->nprocs; i++) {
		if (pt->procs[i].interp)
			err = attach_for(pt, pt->interps[pt->procs[i].interp - 1].pf,
					 pt->procs[i].pid);
	}
	if (err)
		return err;
	pt->attached = true;
	/* each exec of a member from now on stops it before its first instruction */
	tree_hold_all(pt);
	for (size_t i = 0; !pt->quiet && i < pt->nprocs; i++)
		say_recording(pt, &pt->procs[i]);
	return 0;
}

/*
 * Held processes stopped at an exec: their exec events are in the ring buffer
 * already, and read now, which handles each; one whose event was lost (ring
 * buffer full) is looked at all the same.
 */
static int exec_stops(struct proctree *pt)
{
	int ret = tracer__poll(pt->t, 0);

	if (ret < 0)
		return ret;
	for (size_t i = pt->nheld; i-- > 0;) {
		struct tree_proc *p;

		if (i >= pt->nheld || !pt->held[i].at_exec || pt->held[i].in_exec)
			continue;
		p = tree_find_proc(pt, pt->held[i].pid) ?: tree_new_proc(pt, pt->held[i].pid, -1);
		if (!p)
			return -ENOMEM;
		p->exec_ts = pt->held[i].exec_stop_ts;
		tree_exec(pt, p);
	}
	return 0;
}

int proctree__poll(struct proctree *pt)
{
	uint64_t now;
	int err = tree_poll_held(pt);

	if (err > 0)
		err = exec_stops(pt);
	if (err)
		return err;
	now = now_ns(CLOCK_MONOTONIC);
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
	const struct py_interp *py = interp ? &pt->interps[interp - 1].py : NULL;

	*out = (struct proctree_proc){
	    .pid = p->pid,
	    .start_time = p->start_time,
	    .ran_python = p->ran_python,
	    .named = p->named,
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
	/* held or not, every process runs on as it would have without us */
	tree_release_all(pt);
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
		if (!pt->interps[i].pf)
			continue;
		pyframe__stats(pt->interps[i].pf, &ps);
		st->dropped += ps.dropped;
	}
	st->processes = (uint32_t)pt->nprocs;
	st->interpreters = (uint32_t)pt->ninterps;
	for (size_t i = 0; i < pt->nprocs; i++)
		st->not_python += pt->procs[i].not_python;
	st->unrouted = pt->unrouted;
	st->exec_held = pt->exec_held;
	st->exec_unheld = pt->exec_unheld;
	st->hold_refused = pt->hold_refused;
	st->exec_unrecorded = pt->exec_unrecorded;
	st->lost_procs = bss->lost_events + bss->lost_full;
}

void proctree__summary(const struct proctree *pt, const char *reason, double secs, uint64_t calls,
		       uint64_t events, uint64_t dropped, const char *out)
{
	struct proctree_stats st;

	proctree__stats(pt, &st);
	pr_info("%s after %.2f s: %llu Python calls from %u processes (%u "
		"interpreters; %llu events), %llu events lost%s%s",
		reason, secs, (unsigned long long)calls, st.processes, st.interpreters,
		(unsigned long long)events, (unsigned long long)dropped, out ? "; wrote " : "",
		out ? out : "");
	if (st.not_python)
		pr_info("%u of them ran no supported Python", st.not_python);
	if (st.exec_unrecorded)
		pr_warn("%u processes exec'd a Python no in-process agent was in and the "
			"uprobes could not take: their calls after the exec are not recorded",
			st.exec_unrecorded);
	if (st.exec_unheld)
		pr_warn("%u of %u execs of the set ran before they could be held (a process that "
			"joined the set by its exec, one under another tracer, or one let go for "
			"the CUPTI agent): each was looked at as soon as could be, and what it ran "
			"meanwhile may be missing",
			st.exec_unheld, st.exec_unheld + st.exec_held);
	if (st.lost_procs || st.unrouted)
		pr_warn("%llu process events lost, %llu Python events of "
			"processes whose interpreter was not found",
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
	free(pt->held);
	u64map__free(&pt->held_by_pid);
	if (pt->cg_fd >= 0)
		close(pt->cg_fd);
	free(pt->roots_py);
	proctree_bpf__destroy(pt->skel);
	if (pt->set_fd >= 0)
		close(pt->set_fd);
	free(pt);
}
