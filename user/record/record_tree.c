// SPDX-License-Identifier: MIT
/* record of several processes: -p A,B, --children, --per-process, --uid, --cgroup. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "cuda/cuda.h"
#include "gpu/gpu.h"
#include "gpu/cupti_set.h"
#include "libwatch/libwatch.h"
#include "proc/kfeat.h"
#include "proc/syscheck.h"
#include "procs/proctree.h"
#include "pyinterp/launch.h"
#include "python/pyframe.h"
#include "python/pymon.h"
#include "record/record.h"
#include "record/record_cost.h"
#include "sched/sched.h"
#include "torch/modpath.h"
#include "torch/torchops.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

/*
 * Python calls of a set come from probes on the interpreter's file, which
 * need BPF cookies and bpf_loop (pyframe__can_share): without them, one line
 * that names the option, before anything starts.
 */
static int tree_supported(const struct recording *rc)
{
	const struct record_opts *o = rc->o;
	const char *what = o->children	    ? "record --children"
			   : o->by_uid	    ? "record --uid"
			   : o->cgroup	    ? "record --cgroup"
			   : o->hold	    ? "record --hold"
			   : o->per_process ? "record --per-process"
					    : "record -p A,B";

	if (o->in_process || pyframe__can_share())
		return 0;
	/* the uprobes were chosen, not asked for: why, then why they cannot be */
	if (o->py_from != RECORD_PY_UPROBES)
		pr_info("python calls: uprobes (%s)", rc->py_why);
	return kfeat_missing(what, kfeat_cookies() ? "bpf_loop" : "BPF cookies",
			     kfeat_cookies() ? "5.17" : "5.15");
}

/* proctree.h: a member exec'd away from its agent; the probes take its new image. */
static void agent_gone(void *ctx, pid_t pid)
{
	struct recording *rc = ctx;

	pymon__exec(rc->pm, pid);
}

/* Where the set's Python calls come from (record_choose_python()); -errno after a message. */
static int tree_choose_python(struct recording *rc)
{
	size_t n = proctree__nprocs(rc->tree);
	const struct py_interp **pys = calloc(n ?: 1, sizeof(*pys));
	struct py_interp *none = calloc(n ?: 1, sizeof(*none));
	struct proctree_proc p;
	int ret = -ENOMEM;

	for (size_t i = 0; pys && none && i < n; i++) {
		proctree__proc(rc->tree, i, &p);
		pys[i] = proctree__interp_of(rc->tree, p.pid);
		/* a member with no Python: none[i] says so, by its pid */
		if (!pys[i]) {
			none[i].pid = p.pid;
			pys[i] = &none[i];
		}
	}
	if (pys && none)
		ret = record_choose_python(rc, pys, n);
	free(pys);
	free(none);
	return ret;
}

/* The processes, all checked before a file is made; -- CMD is started, stopped. */
static int tree_targets(struct recording *rc)
{
	struct record_opts *o = rc->o;
	const struct py_interp *py;
	char err[512] = "";
	int ret;

	/* a command's calls are the uprobes' (record_choose_python()): checked before it starts */
	ret = o->cmd ? record_choose_python(rc, NULL, 0) ?: tree_supported(rc) : 0;
	if (ret)
		return ret;
	ret = syscheck_tracing(err, sizeof(err));
	ret = ret ?: proctree__new(o->children, o->quiet, &rc->tree);
	/* a member with no Python: what its line says is recorded of it is what the flags leave */
	if (!ret) {
		snprintf(err, sizeof(err), "%s%s%s%s%s", o->no_cuda ? "" : "CUDA calls",
			 !o->no_cuda && !o->no_ops ? (o->no_sched ? " and " : ", ") : "",
			 o->no_ops ? "" : "ops",
			 (!o->no_cuda || !o->no_ops) && !o->no_sched ? " and " : "",
			 o->no_sched ? "" : "off-CPU time");
		proctree__nopy_what(rc->tree,
				    err[0] ? err : "nothing (--no-cuda, --no-ops, --no-sched)");
		err[0] = '\0';
	}
	/*
	 * --children -- ./train.sh, --hold -- pyenv's shim: a command that is no
	 * Python is followed all the same, into the Python it execs (or loads)
	 */
	if (!ret && o->cmd) {
		ret = launch__start_any(o->cmd, &rc->pid, &rc->py, err, sizeof(err));
		rc->child = !ret || ret == -ENOEXEC;
		if (ret == -ENOEXEC)
			err[0] = '\0';
		ret = ret == -ENOEXEC ? proctree__add(rc->tree, rc->pid, NULL)
				      : ret ?: proctree__add(rc->tree, rc->pid, &rc->py);
	}
	for (int i = 0; !ret && !o->cmd && i < o->npids; i++)
		ret = proctree__add_pid(rc->tree, o->pids[i], err, sizeof(err));
	/* DataLoader workers already running are part of the job as much as later ones */
	if (!ret && o->npids && o->children)
		ret = proctree__add_descendants(rc->tree, o->quiet);
	if (!ret && o->by_uid)
		ret = proctree__add_uid(rc->tree, o->uid, o->quiet);
	if (!ret && o->cgroup)
		ret = proctree__add_cgroup(rc->tree, o->cgroup, o->quiet, err, sizeof(err));
	if (ret) {
		pr_err("%s", err[0] ? err : strerror(-ret));
		return ret;
	}
	/* in-process: each process as record -p takes its one, or all by the uprobes */
	ret = tree_choose_python(rc);
	ret = ret ?: tree_supported(rc);
	if (ret)
		return ret;
	if (o->in_process)
		proctree__frames_elsewhere(rc->tree, agent_gone, rc);
	/* the set is there: what each of its Python calls will cost */
	record_say_trap_cost(rc);
	rc->pid = proctree__first(rc->tree, &py);
	rc->py = *py;
	return 0;
}

static const struct py_interp *interp_of(void *ctx, pid_t pid)
{
	return proctree__interp_of(ctx, pid);
}

/*
 * The CUPTI agent is injected through the process's main thread under
 * ptrace (user/inject/inject.c), which the set holds at its execs: a process
 * about to get the agent is let go first, as record -p lets go of its one
 * target (user/record/target.c). Called before cupti__on_proc_map().
 */
static int let_go_for_agent(void *ctx, pid_t pid, const struct proc_map *m)
{
	struct recording *rc = ctx;
	const char *base = m ? strrchr(m->path, '/') : NULL;

	if (!base || strncmp(base + 1, "libcuda.so", 10))
		return 0;
	/* let go here, or at the end of the notice stop it waits at (on_urg()) */
	proctree__let_go(rc->tree, pid);
	libwatch__held_gone(rc->libs, pid);
	return 0;
}

/* A held member runs no Python (on): a libpython it maps unprobed stops it at the notice. */
static void watch_python(void *ctx, pid_t pid, bool on)
{
	struct recording *rc = ctx;

	libwatch__watch_python(rc->libs, pid, on);
}

/*
 * A member mapped a libpython (an embedding program's dlopen): followed
 * into Python from there, from its first frame where it waits at the
 * notice that mapped it.
 */
static int python_mapped(void *ctx, pid_t pid, const struct proc_map *m)
{
	struct recording *rc = ctx;
	/* m NULL: it exec'd, and tree_exec() looks at the new image */
	const char *base = m ? strrchr(m->path, '/') : NULL;

	/* every scan offers it: one that runs Python already costs no walk of the held map */
	if (!base || strncmp(base + 1, "libpython3", 10) || proctree__interp_of(rc->tree, pid))
		return 0;
	return proctree__mapped_python(rc->tree, pid, libwatch__waits_at_notice(rc->libs, pid));
}

/*
 * A held process of the set stopped at a loader notice where it mapped a
 * library not probed yet (libwatch__held_stop()): probed, then resumed, or
 * let go there when the CUDA driver it mapped is for the CUPTI agent.
 */
static enum launch_urg on_urg(void *ctx, pid_t pid, pid_t tid)
{
	struct recording *rc = ctx;
	bool ours;

	proctree__stop_begin(rc->tree, pid);
	ours = libwatch__held_stop(rc->libs, pid, tid);
	if (proctree__stop_end(rc->tree, pid) && ours)
		return LAUNCH_URG_RELEASE;
	return ours ? LAUNCH_URG_RESUME : LAUNCH_URG_NOT_OURS;
}

/*
 * A process of the set stopped at its exec: -- CMD's agent where its root
 * sees it (cupti__exec_stop), then its new libraries, looked for ahead.
 */
static int on_exec(void *ctx, pid_t pid, uint64_t exec_ts)
{
	struct recording *rc = ctx;

	if (rc->o->cmd)
		cupti__exec_stop(rc->cupti, pid);
	return libwatch__exec_pid(rc->libs, pid, exec_ts);
}

/*
 * Dispatcher ops and CUDA calls of every process of the set: each library
 * file is probed once, for every process that maps it, and the BPF side
 * passes only the set's events (proctree__set_fd()). The libraries each
 * process maps later, and those of processes that join later, come through
 * one libwatch for the whole set.
 */
static int open_lib_probes(struct recording *rc)
{
	struct record_opts *o = rc->o;
	int fd = proctree__set_fd(rc->tree);
	size_t n = proctree__nprocs(rc->tree);
	struct proctree_proc p;
	pid_t *pids;
	int ret = 0;

	/* the CUPTI agent goes into each process that maps libcuda: libwatch says which */
	if (o->no_ops && o->no_cuda && (!rc->cupti || o->cmd))
		return 0;
	pids = calloc(n ?: 1, sizeof(*pids));
	if (!pids)
		return -ENOMEM;
	/*
	 * A set that only shrinks (-p A,B) is probed in its processes alone, so
	 * that others that map the same libtorch or libcuda pay nothing; one
	 * that grows (--children, --uid, --cgroup) in every process, filtered.
	 */
	for (size_t i = 0; i < n; i++) {
		proctree__proc(rc->tree, i, &p);
		pids[i] = p.pid;
	}
	if (o->children || o->by_uid || o->cgroup)
		n = 0;
	ret = libwatch__open_set(rc->tracer, fd, &rc->libs);
	/* nn.Module paths of ops, each read in its own process (after proctree routes frames) */
	if (!ret && !o->no_ops)
		ret = modpath__open_set(rc->tracer, interp_of, rc->tree, &rc->mp);
	if (!ret && !o->no_ops)
		ret = torchops__open_shared(rc->tracer, fd, pids, n, o->quiet, &rc->ops);
	if (!ret && rc->ops)
		torchops__set_modpath(rc->ops, rc->mp);
	if (!ret && rc->ops)
		ret = libwatch__subscribe(rc->libs, torchops__on_lib, rc->ops);
	if (!ret && !o->no_cuda)
		ret =
		    cudaprobe__open_shared(rc->tracer, rc->libs, fd, pids, n, o->quiet, &rc->cuda);
	/* -p, --uid, --cgroup: injected; -- CMD's processes load it through the environment */
	if (!ret && rc->cupti && !o->cmd)
		ret = libwatch__subscribe_proc(rc->libs, let_go_for_agent, rc);
	if (!ret && rc->cupti && !o->cmd)
		ret = libwatch__subscribe_proc(rc->libs, cupti__on_proc_map, rc->cupti);
	if (!ret && rc->cuda)
		cupti__set_join(rc->cupti, cudaprobe__join, rc->cuda);
	/* an agent that takes the CUDA calls from CUPTI's callbacks: its ring, in the probes' place
	 */
	if (!ret && rc->cuda)
		cupti__set_calls(rc->cupti, cudaprobe__agent_ring, rc->cuda);
	/* a process that execs is held while proctree looks at it: its libraries are probed then */
	if (!ret)
		proctree__on_exec(rc->tree, on_exec, rc);
	/* one that loads libpython itself is followed into Python from there */
	if (!ret)
		ret = libwatch__subscribe_proc(rc->libs, python_mapped, rc);
	if (!ret)
		proctree__on_nopy(rc->tree, watch_python, rc);
	if (!ret)
		ret = launch__on_urg(on_urg, rc);
	free(pids);
	return ret;
}

/* What each process of the set has mapped, and would load, once the set is filled. */
static int attach_lib_probes(struct recording *rc)
{
	struct proctree_proc p;
	int ret = 0;

	for (size_t i = 0; rc->libs && !ret && i < proctree__nprocs(rc->tree); i++) {
		proctree__proc(rc->tree, i, &p);
		ret = libwatch__add_pid(rc->libs, p.pid);
	}
	return ret;
}

/*
 * -- CMD: every process of the command inherits the agent's path and socket
 * (before it starts); no GPU activity is no error, but refusing the agent
 * the user named is.
 */
static int open_cupti(struct recording *rc)
{
	int ret;

	if (rc->o->no_cupti)
		return 0;
	ret = cupti__open(rc->o->quiet, &rc->cupti);
	if (ret == -EPERM)
		return ret;
	return rc->o->cmd ? cupti__launch_env(rc->cupti) : 0;
}

/*
 * -p A,B --in-process: an agent for each process, each with its own ring
 * (pymon.h), all read as one source; their frame events go to pymon alone.
 * -p A,B without it: an agent of ops alone in each process that has
 * PyTorch loaded (record_op_callback()), its frames from the probes.
 */
static int open_agents(struct recording *rc)
{
	struct proctree_proc p;
	int ret = 0;

	for (size_t i = 0; !ret && i < proctree__nprocs(rc->tree); i++) {
		const struct py_interp *py;

		proctree__proc(rc->tree, i, &p);
		py = proctree__interp_of(rc->tree, p.pid);
		/* each process's own, until proctree__load(): one per file after */
		if (rc->o->in_process && (!py || py->pid != p.pid))
			return -ENOEXEC; /* checked in tree_targets() */
		if (rc->o->in_process)
			ret = rc->pm ? pymon__add(rc->pm, py, p.start_time)
				     : pymon__open(py, rc->tracer, rc->o->agent_ring_mb,
						   p.start_time, &rc->pm);
		else if (py && py->pid == p.pid && record_op_callback(rc->o, py))
			ret = rc->pm ? pymon__add(rc->pm, py, p.start_time)
				     : pymon__open_ops(py, rc->tracer, rc->o->agent_ring_mb,
						       p.start_time, &rc->pm);
		/* ops alone: a process the agent cannot take keeps its probes */
		if (ret && ret != -ENOMEM && !rc->o->in_process)
			ret = 0;
	}
	return ret;
}

/*
 * Several processes (-p A,B, --children, --uid, --cgroup): Python calls,
 * dispatcher ops, CUDA calls, off-CPU intervals and GPU activity (an agent
 * in each process that uses CUDA, user/gpu/cupti_set.c) of each.
 */
int start_tree(struct recording *rc)
{
	struct record_opts *o = rc->o;
	int ret;

	ret = open_cupti(rc);
	ret = ret ?: tree_targets(rc);
	/* --per-process: the traces are cut from this once every process is known */
	snprintf(rc->tmp, sizeof(rc->tmp), "%s.recording", o->output);
	if (!ret)
		note_leftover(o->per_process ? rc->tmp : o->output);
	ret = ret ?: trace_writer__open(o->per_process ? rc->tmp : o->output, &rc->w);
	if (!ret)
		trace_writer__keep_partial(rc->w);
	ret = ret ?: tracer__new(rc->w, o->ringbuf_mb, 0, &rc->tracer);
	/*
	 * Before proctree__load(), while each process's own interpreter is
	 * known (its load addresses), and before modpath, which reads the frame
	 * events after their stacks took them.
	 */
	ret = ret ?: open_agents(rc);
	ret = ret ?: proctree__load(rc->tree, rc->tracer);
	/* agents are taken from the set alone, from before any process of it runs on */
	ret = ret ?: cupti__start_set(rc->cupti, rc->w, proctree__set_fd(rc->tree), rc->child);
	ret = ret ?: open_lib_probes(rc);
	pymon__set_ops(rc->pm, rc->o->op_probes ? NULL : rc->ops);
	if (!ret && !o->no_sched)
		ret = sched__open_set(rc->tracer, proctree__set_fd(rc->tree), rc->cuda, &rc->sched);
	if (!ret) {
		rc->start_ts = now_ns(CLOCK_MONOTONIC);
		tracer__set_start_ts(rc->tracer, rc->start_ts);
		ret = write_meta(rc);
	}
	ret = ret ?: proctree__write_meta(rc->tree, rc->w);
	/*
	 * Before the set is filled and "recording pid" is said: the libraries
	 * are scanned (libtorch takes seconds) while the set's events cannot
	 * pass yet, and a command has not started.
	 */
	ret = ret ?: attach_lib_probes(rc);
	/* off-CPU probes before the set is filled: once "recording pid" is said, they are in */
	if (!ret && rc->sched)
		ret = sched__attach(rc->sched);
	/*
	 * --in-process: the agents go in last, so that their rings fill only
	 * from here (a libtorch scan, a CUPTI agent's start are behind), and
	 * before the set is held under ptrace (they are injected under it);
	 * a process whose agent took its ops loses its op probes, which could
	 * not fire yet: the set is empty until proctree__attach().
	 */
	if (!ret && rc->pm && o->in_process && o->py_from == RECORD_PY_AUTO)
		pymon__fall_back(rc->pm);
	if (!ret && rc->pm)
		ret = pymon__attach(rc->pm);
	/* the default's agents, all or none: the uprobes take them, from a new start */
	if (ret && ret != -ENOMEM && pymon__failure(rc->pm)) {
		snprintf(rc->py_why, sizeof(rc->py_why), "an agent did not go in: %s",
			 pymon__failure(rc->pm));
		rc->py_retry = true;
	}
	ret = ret ?: proctree__attach(rc->tree);
	if (!ret && rc->pm && !o->in_process && !o->quiet) {
		char agents[1024];

		pymon__describe(rc->pm, agents, sizeof(agents));
		pr_info("PyTorch ops: %s", agents);
	}
	if (!ret)
		record_say_python(rc);
	rc->attached_ts = now_ns(CLOCK_MONOTONIC);
	/*
	 * Whatever failed, the command runs on, as it would have without us;
	 * recording, it stays held (proctree__attach()), so that its execs
	 * and forks are held as well.
	 */
	if (rc->child && ret)
		launch__release(rc->pid);
	else if (rc->child)
		launch__resume(rc->pid);
	return ret;
}
