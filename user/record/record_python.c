// SPDX-License-Identifier: MIT
/*
 * The Python part of a recording: its probes when the target runs Python
 * from the start, and those of an interpreter that comes later (an exec, a
 * libpython it maps), found through user/record/target.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "gpu/gpu.h"
#include "libwatch/libwatch.h"
#include "proc/procfs.h"
#include "pyinterp/launch.h"
#include "python/pyframe.h"
#include "python/pymon.h"
#include "record/record.h"
#include "record/record_cost.h"
#include "record/steps.h"
#include "record/target.h"
#include "torch/modpath.h"
#include "torch/torchops.h"
#include "trace/trace.h"
#include "tracer/uprobe_multi.h"

/* libtorch_cpu in a mapping: PyTorch is imported */
static int torch_mapped(const struct proc_map *m, void *ctx)
{
	const char *base = strrchr(m->path, '/');

	(void)ctx;
	return base && !strncmp(base + 1, "libtorch_cpu.so", 15);
}

bool record_op_callback(const struct record_opts *o, const struct py_interp *py)
{
	return !o->in_process && !o->op_probes && !o->no_ops && !o->cmd && !o->children &&
	       !o->by_uid && !o->cgroup && py && py->info &&
	       proc_maps__for_each(py->pid, torch_mapped, NULL) > 0;
}

/*
 * The libpython files probed ahead (target.h): each has its probes on the
 * file, for this process only (the traced map), with _PyRuntime found from
 * each probe's address (pyframe__open_shared), so no load address is needed.
 * The one the loader maps becomes rc->pf; its events come through route().
 */
struct py_ahead_file {
	dev_t dev;
	ino_t ino;
	struct pyframe *pf;
};

struct py_ahead {
	int traced_fd; /* tgid -> 1: the target alone */
	struct py_ahead_file *files;
	size_t nfiles;
	struct pyframe *active; /* the one mapped, or NULL */
	uint64_t unprobed;	/* a libpython mapped that was not found ahead */
};

/* pyframe, then what reads the stacks it keeps: module paths and steps. */
int record_open_python(struct recording *rc)
{
	int ret;

	/* --in-process: the same events from the sys.monitoring agent */
	if (rc->o->in_process)
		ret =
		    pymon__open(&rc->py, rc->tracer, rc->o->agent_ring_mb, rc->start_time, &rc->pm);
	else
		ret = pyframe__open(&rc->py, rc->tracer, &rc->pf);
	if (!ret)
		record_say_trap_cost(rc);
	if (!ret && !rc->o->no_ops)
		ret = modpath__open(rc->tracer, &rc->py, &rc->mp);
	if (!ret)
		ret = steps__open(rc->tracer, &rc->py, &rc->o->steps, &rc->steps);
	return ret;
}

/* The probed-ahead file py's object is, or NULL. */
static struct py_ahead_file *ahead_of(struct py_ahead *pa, const struct py_interp *py)
{
	struct stat st;

	if (!pa || stat(py->attach_path, &st))
		return NULL;
	for (size_t i = 0; i < pa->nfiles; i++) {
		if (pa->files[i].pf && pa->files[i].dev == st.st_dev &&
		    pa->files[i].ino == st.st_ino)
			return &pa->files[i];
	}
	return NULL;
}

/* Whether pid's memory can still be read: not once it exited, even unreaped. */
static bool mem_readable(pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/*
 * The libpython the loader mapped was probed ahead: its probes have been
 * live since the mapping, so only the readers of its stacks are added.
 */
static int use_ahead(struct recording *rc, struct py_ahead_file *f)
{
	int ret = 0;

	rc->pf = f->pf;
	f->pf = NULL;
	rc->ahead->active = rc->pf;
	/*
	 * A short program may have ended by the time its loader's notice is
	 * read: its calls are still in the ring buffer, only its memory (module
	 * names, step markers) is gone.
	 */
	if (!mem_readable(rc->pid)) {
		pr_warn("pid %d ended before its Python's memory could be read: its calls are "
			"recorded, names of nn.Modules and steps are not",
			rc->pid);
		return 0;
	}
	if (!rc->o->no_ops)
		ret = modpath__open(rc->tracer, &rc->py, &rc->mp);
	if (!ret)
		ret = steps__open(rc->tracer, &rc->py, &rc->o->steps, &rc->steps);
	/* it ended just now: as above */
	if ((ret == -ENOENT || ret == -ESRCH) && !mem_readable(rc->pid))
		ret = 0;
	return ret;
}

/* target.h: the target runs Python from now on (an exec, a libpython it mapped). */
static int late_python(void *ctx, const struct py_interp *py, const char *how)
{
	struct recording *rc = ctx;
	struct py_ahead_file *f = strcmp(how, "exec") ? ahead_of(rc->ahead, py) : NULL;
	/* it waits at the loader's notice that mapped it (a held process): nothing missed */
	bool held = strcmp(how, "exec") && libwatch__waits_at_notice(rc->libs, rc->pid);
	char buf[4096];
	uint64_t ts;
	int ret;

	rc->py = *py;
	if (f) {
		/* probed since the recording began: nothing of it is missing */
		ret = use_ahead(rc, f);
		ts = rc->start_ts;
	} else {
		ret = record_open_python(rc);
	}
	if (!ret && !f) {
		ts = now_ns(CLOCK_MONOTONIC);
		pyframe__set_start_ts(rc->pf, ts);
		ret = pyframe__attach(rc->pf);
	}
	/* -- CMD that exec'd Python, held at the exec: the agent where its script starts */
	if (!ret && rc->child && !strcmp(how, "exec") && rc->py_handover && !rc->py_handover_done) {
		rc->py_why[0] = '\0';
		if (record_py_handover(rc->o, py, rc->py_why, sizeof(rc->py_why)))
			ret = record_arm_py_handover(rc);
		else
			rc->py_handover_done = true;
		if (rc->py_handover_done && !rc->o->quiet)
			pr_info("python calls: uprobes (%s)",
				rc->py_why[0] ? rc->py_why : "-- CMD");
	}
	if (!ret)
		torchops__set_modpath(rc->ops, rc->mp);
	if (ret) {
		/* what did open stays until the end: the tracer still has its handlers */
		pyframe__detach(rc->pf);
		return ret;
	}
	/* not found ahead (a full path off the search path): the calls before our probes are
	 * missing */
	if (!f && !held && rc->ahead && strcmp(how, "exec")) {
		rc->ahead->unprobed++;
		pr_warn("%s was not found ahead on the target's search path and was probed only "
			"once mapped: its first Python calls may not be in the trace",
			py->path);
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ts);
	ret = trace_writer__meta(rc->w, "python",
				 f		       ? "mapped, probed ahead"
				 : strcmp(how, "exec") ? "mapped"
						       : "exec");
	ret = ret ?: trace_writer__meta(rc->w, "python.version", rc->py.version);
	ret = ret ?: trace_writer__meta(rc->w, "python.path", rc->py.path);
	ret = ret ?: trace_writer__meta(rc->w, "python.since_monotonic_ns", buf);
	/* an exec changed it: the last value is the one reports show */
	if (!ret && !proc_cmdline(rc->pid, buf, sizeof(buf)))
		ret = trace_writer__meta(rc->w, "cmdline", buf);
	if (rc->py.warning[0])
		pr_warn("%s", rc->py.warning);
	/* -- CMD that exec'd Python: said as for a Python command, all in place before it runs */
	if (!rc->o->quiet && rc->child && !strcmp(how, "exec"))
		pr_info("recording pid %d (Python %s, %s)", rc->pid, rc->py.version, rc->py.path);
	else if (!rc->o->quiet)
		pr_info("pid %d runs Python %s (%s) since %s: recording its calls%s", rc->pid,
			rc->py.version, rc->py.path,
			strcmp(how, "exec") ? "it mapped it" : "its exec",
			f			       ? " from the first (probed ahead)"
			: target__at_exec_stop(rc->tg) ? " from the first (held at its exec)"
			: held ? " from the first (held at the loader's notice)"
			       : "");
	return ret;
}

/*
 * Python events of the files probed ahead, to the one mapped. Its loader's
 * notice comes first in the ring buffer and picks it (late_python); an event
 * ahead of that (a notice lost) looks at the process first.
 */
static int route(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct recording *rc = ctx;
	struct py_ahead *pa = rc->ahead;
	const struct py_interp *first = NULL;
	int ret;

	(void)t;
	/* the hot case: once a file is picked, or Python was found elsewhere (its own handler) */
	if (pa->active)
		return pyframe__handle(pa->active, e, size);
	if (rc->pf)
		return 0;
	/* ended before it could be looked at: the first file probed ahead, said if not the only */
	for (size_t i = 0; !first && i < pa->nfiles; i++)
		first = pa->files[i].pf ? pyframe__interp(pa->files[i].pf) : NULL;
	if (first && pa->nfiles > 1 && !mem_readable(rc->pid))
		pr_warn("pid %d ended before the libpython it mapped could be told among the %zu "
			"probed ahead: its calls are read as those of %s",
			rc->pid, pa->nfiles, first->path);
	ret = target__look(rc->tg, first);
	return ret ?: pa->active ? pyframe__handle(pa->active, e, size) : 0;
}

static int route_losses(struct tracer *t, void *ctx)
{
	struct recording *rc = ctx;
	int ret = rc->ahead->active ? pyframe__write_losses(rc->ahead->active) : 0;

	if (!ret && rc->ahead->unprobed)
		ret = trace_writer__lost(tracer__writer(t), PTG_LOST_LIB_UNPROBED_WINDOW,
					 UINT32_MAX, rc->ahead->unprobed);
	return ret;
}

/* The tables every file probed ahead shares: the traced set (this process) and the route. */
static int ahead_open(struct recording *rc)
{
	struct py_ahead *pa = calloc(1, sizeof(*pa));
	__u32 tgid = (__u32)rc->pid;
	__u8 one = 1;
	int ret;

	if (!pa)
		return -ENOMEM;
	rc->ahead = pa;
	pa->traced_fd =
	    bpf_map_create(BPF_MAP_TYPE_HASH, "ptg_embed", sizeof(__u32), sizeof(__u8), 1, NULL);
	if (pa->traced_fd < 0)
		return -errno;
	if (bpf_map_update_elem(pa->traced_fd, &tgid, &one, BPF_ANY))
		return -errno;
	ret =
	    tracer__on_stack(rc->tracer, PTG_EV_PY_START, PTG_EV_PY_CODE, route, route_losses, rc);
	return ret;
}

/* target.h: a libpython the target may load, probed on its file before it is mapped. */
static int python_ahead(void *ctx, const struct py_interp *py)
{
	struct recording *rc = ctx;
	struct py_ahead_file *n;
	struct pyframe *pf = NULL;
	struct stat st;
	int ret;

	/* a kernel before bpf_loop: probed once mapped, by the object for one process */
	if (!pyframe__can_share())
		return 0;
	if (stat(py->attach_path, &st))
		return -errno;
	n = realloc(rc->ahead->files, (rc->ahead->nfiles + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	rc->ahead->files = n;
	ret = pyframe__open_shared(py, rc->tracer, rc->ahead->traced_fd, &pf);
	/* this process only: no breakpoint goes into any other that maps the file */
	ret = ret ?: pyframe__attach_pid(pf, rc->pid);
	if (ret) {
		pyframe__destroy(pf);
		return ret;
	}
	rc->ahead->files[rc->ahead->nfiles++] =
	    (struct py_ahead_file){.dev = st.st_dev, .ino = st.st_ino, .pf = pf};
	if (!rc->o->quiet)
		pr_info("python: probing %s ahead (Python %s)", py->path, py->version);
	return 0;
}

void record_python_free(struct recording *rc)
{
	struct py_ahead *pa = rc->ahead;

	if (!pa)
		return;
	for (size_t i = 0; i < pa->nfiles; i++)
		pyframe__destroy(pa->files[i].pf);
	if (pa->traced_fd >= 0)
		close(pa->traced_fd);
	free(pa->files);
	free(pa);
	rc->ahead = NULL;
}

/*
 * target.h: the target, which ran Python, exec'd a Python. The same file at
 * the same place (a non-PIE interpreter exec'ing itself) is recorded on by
 * the probes already there; any other image is not followed by one-process
 * recording (its probes and memory readers are the first interpreter's):
 * said, counted, and the old probes taken out before they misread it.
 * In-process, no image is: the agent went with the one the exec replaced,
 * and a process not held cannot be probed before its new image runs (with
 * --hold it is a set of one, whose execs are held and probed: proctree.h).
 */
static void python_exec(void *ctx, const struct py_interp *py, dev_t dev, ino_t ino)
{
	struct recording *rc = ctx;
	/* the uprobes, still in: not once a command's calls went to the agent */
	bool probes = rc->pf && !rc->o->in_process;
	char how[64];
	struct stat a, b;

	if ((!rc->pf && !rc->pm) || rc->py_exec_lost)
		return;
	if (rc->child)
		snprintf(how, sizeof(how), "record --children -- CMD");
	else
		snprintf(how, sizeof(how), "record -p %d %s", rc->pid,
			 rc->o->in_process ? "--hold" : "--children");
	if (probes && py && !stat(py->attach_path, &a) && !stat(rc->py.attach_path, &b) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino && py->runtime_addr == rc->py.runtime_addr)
		return;
	/*
	 * Ended before its new image was looked at: the same executable that
	 * holds the interpreter, linked at fixed addresses, ran where the
	 * probes are; anything else (another file, a position-independent one
	 * or a libpython mapped anew) may not have
	 */
	if (probes && !py && !rc->py.bias && !stat(rc->py.attach_path, &b) && b.st_dev == dev &&
	    b.st_ino == ino)
		return;
	rc->py_exec_lost++;
	pyframe__detach(rc->pf);
	if (!py)
		pr_warn("pid %d exec'd and ended before its new image was looked at: "
			"%s; from here on the new program's Python calls are not recorded "
			"(%s follows execs)",
			rc->pid,
			rc->o->in_process ? "the in-process agent went with the program it replaced"
					  : "a one-process recording follows the interpreter it "
					    "started with",
			how);
	else if (rc->o->in_process)
		pr_warn("pid %d exec'd %s (Python %s): from here on its Python calls are not "
			"recorded, the in-process agent went with the program it replaced "
			"(%s holds it at its exec, and the uprobes take the new image from its "
			"first call)",
			rc->pid, py->path, py->version, how);
	else
		pr_warn("pid %d exec'd %s (Python %s): a one-process recording follows the "
			"interpreter it started with; from here on the new program's Python calls "
			"are not recorded (%s follows execs)",
			rc->pid, py->path, py->version, how);
}

/* -- CMD's child at an exec: the agent where its root sees it. */
static void python_exec_stop(void *ctx, pid_t pid)
{
	struct recording *rc = ctx;

	if (rc->child)
		cupti__exec_stop(rc->cupti, pid);
}

bool record_handover(const struct record_opts *o)
{
	return o->cmd && !o->children && !o->op_probes && !o->no_ops && !o->in_process;
}

bool record_ops_held(const struct record_opts *o)
{
	/* the others are record_handover()'s, but --in-process (its agent borrows the thread) */
	return o->cmd && o->op_probes && !o->children && !o->no_ops && !o->in_process &&
	       !uprobe_multi_supported();
}

/*
 * Everything the command's threads did before the stop of its first op: the
 * ring buffer's events, and where the agent takes its Python calls, its
 * records up to now too (the tracer reads those a little behind the clock,
 * tracer__catch_up()), so that the op opens above the frames that called it.
 */
static int read_before_op(struct recording *rc)
{
	if (rc->o->in_process)
		return tracer__catch_up(rc->tracer, now_ns(CLOCK_MONOTONIC));
	return tracer__poll(rc->tracer, 0);
}

/*
 * The command's first op ran on another thread than the main one, the one
 * the agent goes in through: that thread waits in its stop while the op
 * probes go in, and its op is theirs (written from what the trigger saw).
 */
static enum launch_urg thread_stopped(struct recording *rc, pid_t pid, pid_t tid)
{
	/* what its threads did before, first: the op opens above the frames that called it */
	int err = read_before_op(rc);

	err = err < 0 ? err : torchops__handover_thread_done(rc->ops, pid);
	if (err)
		pr_warn("pid %d: the hand-over of its ops: %s", pid, strerror(-err));
	pr_info("pid %d: its first op ran on thread %d, not the main one: its ops come from the "
		"probes, put in while that thread waited",
		pid, tid);
	rc->ops_handover_done = true;
	return LAUNCH_URG_RESUME;
}

/*
 * The command's first op stopped its main thread (a SIGURG of ours, see
 * bpf/torchops.bpf.c): the op agent goes into that very thread, which
 * stays stopped until its callback is in, so the op that stopped it is
 * the callback's first. Where the agent cannot go in, the probes keep the
 * process, that op included. Either way the hold ends after.
 */
static enum launch_urg on_urg(void *ctx, pid_t pid, pid_t tid)
{
	struct recording *rc = ctx;
	struct pymon *pm = NULL;
	bool agent = false;
	int err;

	if (pid == rc->pid && tid != pid && torchops__handover_thread_stopped(rc->ops, pid, tid))
		return thread_stopped(rc, pid, tid);
	/* only the main thread is stopped for the agent at the first op (bpf/torchops.bpf.c) */
	if (pid != rc->pid || tid != pid || !torchops__handover_stopped(rc->ops, pid, tid))
		return LAUNCH_URG_NOT_OURS;
	/*
	 * The hold ends after this stop: its other threads go now, so that none
	 * waits for us in a stop (holding a lock the agent's dlopen needs)
	 * while the agent goes in
	 */
	launch__main_only(pid);
	if (!rc->pm && rc->py.info &&
	    !pymon__open_ops(&rc->py, rc->tracer, rc->o->agent_ring_mb, rc->start_time, &pm)) {
		pymon__set_ops(pm, rc->ops);
		pymon__hold(pm, pid);
		/* one that did not start said why, and stays, hung up, as at a -p attach */
		agent = !pymon__attach(pm) && pymon__ops_on(pm);
		rc->pm = pm;
	} else if (rc->pm && rc->o->in_process) {
		/* the agent that took its Python calls where its script started */
		agent = !pymon__ops_in(rc->pm, pid);
	}
	/*
	 * The probes keep it: what its threads did before the stop is read
	 * first, so that the op that stopped it opens above the frames that
	 * called it (its entry is written from what the BPF side saved)
	 */
	err = agent ? 0 : read_before_op(rc);
	err = err < 0 ? err : torchops__handover_done(rc->ops, pid, agent);
	if (err)
		pr_warn("pid %d: the hand-over of its ops: %s", pid, strerror(-err));
	if (agent && !rc->o->quiet)
		pr_info("pid %d: PyTorch ops by its RecordFunction callback, from its first op on",
			pid);
	else if (!agent)
		pr_info("pid %d: no op callback at its first op: its ops come from the probes",
			pid);
	rc->ops_handover_done = true;
	return LAUNCH_URG_RESUME;
}

void record_poll_handover(struct recording *rc)
{
	int err;

	record_py_handover_end(rc);
	if (rc->ops_held_to_map && !rc->ops_handover_done && rc->ops) {
		struct torchops_stats st;

		/* PyTorch mapped and its op probes in: the hold is done */
		torchops__stats(rc->ops, &st);
		rc->ops_handover_done = st.libs > 0;
	}
	if (!rc->ops_handover || rc->ops_handover_done)
		return;
	err = torchops__handover_poll(rc->ops, rc->pid);
	if (err < 0)
		pr_warn("pid %d: the hand-over of its ops: %s", rc->pid, strerror(-err));
	if (err == 1)
		pr_info("pid %d: its first op could not stop it (another thread's, or a SIGURG "
			"handler): its ops come from the probes, put in now; those before are "
			"counted lost",
			rc->pid);
	if (err)
		rc->ops_handover_done = true;
}

int record_arm_handover(struct recording *rc)
{
	int err;

	if (!rc->ops_handover || !rc->ops)
		return 0;
	/* not armed: the probes take the ops, as before (the child stays held, as one with no
	 * Python is) */
	err = torchops__handover_arm(rc->ops, rc->pid);
	if (err)
		return 0;
	return launch__on_urg(on_urg, rc);
}

/* What follows a process with no Python at start: an exec or a libpython later. */
int record_open_target(struct recording *rc)
{
	struct target_opts to = {
	    .pid = rc->pid,
	    .held = rc->child &&
		    (!rc->py.info || rc->ops_handover || rc->ops_held_to_map || rc->py_handover),
	    .keep_held = rc->ops_handover || rc->ops_held_to_map || rc->py_handover,
	    .seize = !rc->child && !rc->py.info,
	    .has_python = rc->py.info,
	    .libs = rc->libs,
	    .fn = late_python,
	    .ahead = python_ahead,
	    .exec = python_exec,
	    .exec_stop = python_exec_stop,
	    .ctx = rc,
	};
	int ret = target__new(&to, &rc->tg);

	if (!ret)
		libwatch__on_exec(rc->libs, target__exec_seen, rc->tg);
	if (ret || rc->py.info)
		return ret;
	ret = libwatch__subscribe(rc->libs, target__on_lib, rc->tg);
	/* an embedding program's libpython, probed before it is mapped (or said when not) */
	ret = ret ?: ahead_open(rc);
	return ret ?: target__probe_ahead(rc->tg);
}
