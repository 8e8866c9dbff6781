// SPDX-License-Identifier: MIT
/*
 * One recording: the target found or started, the probes and the CUPTI
 * agent put in, the poll loop until it ends, the trace closed, the summary.
 * Several processes are set up by record_tree.c, then run the same loop.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "cuda/cuda.h"
#include "gpu/gpu.h"
#include "gpu/cupti_set.h"
#include "libwatch/libwatch.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "proc/syscheck.h"
#include "procs/proctree.h"
#include "pyinterp/launch.h"
#include "pyinterp/pyinterp.h"
#include "python/pyframe.h"
#include "python/pymon.h"
#include "record/record.h"
#include "record/steps.h"
#include "record/target.h"
#include "sched/sched.h"
#include "torch/modpath.h"
#include "torch/torchops.h"
#include "trace/trace.h"
#include "tracer/teardown.h"
#include "tracer/tracer.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static bool wants_steps(const struct record_opts *o)
{
	return o->steps.max_steps || o->steps.schedule;
}

static int setup_target(struct recording *rc, char *err, size_t errlen)
{
	uint64_t st = 0;
	int ret;

	if (rc->o->cmd) {
		ret = launch__start(rc->o->cmd, &rc->pid, &rc->py, err, errlen);
		rc->child = !ret;
		rc->ops_handover = rc->child && record_handover(rc->o);
		rc->ops_held_to_map = rc->child && !rc->ops_handover && record_ops_held(rc->o);
		if (!ret)
			proc_start_time(rc->pid, &rc->start_time);
		return ret;
	}
	rc->pid = rc->o->pid;
	/*
	 * The pidfd first: it is this process for as long as we record, and
	 * says when it exits even if its pid is taken by another one then.
	 */
	rc->pidfd = (int)syscall(SYS_pidfd_open, rc->pid, 0);
	proc_start_time(rc->pid, &rc->start_time);
	ret = py_interp__find(rc->pid, &rc->py, err, errlen);
	/* no Python (yet): its CUDA calls, GPU activity and off-CPU time are recorded */
	if (ret == -ENOEXEC) {
		memset(&rc->py, 0, sizeof(rc->py));
		err[0] = '\0';
		ret = 0;
	}
	/* and what was looked at is that process, not a successor with its pid */
	if (!ret && (proc_start_time(rc->pid, &st) || st != rc->start_time)) {
		snprintf(err, errlen, "pid %d exited", rc->pid);
		ret = -ESRCH;
	}
	return ret;
}

static int start(struct recording *rc)
{
	char err[512] = "";
	int ret;

	ret = syscheck_tracing(err, sizeof(err));
	/*
	 * -- CMD: the child inherits the agent's path and socket; no GPU
	 * activity is no error, but refusing the agent the user named is
	 */
	if (!ret && !rc->o->no_cupti) {
		ret = cupti__open(rc->o->quiet, &rc->cupti);
		if (ret == -EPERM)
			return ret;
		ret = rc->o->cmd ? cupti__launch_env(rc->cupti) : 0;
	}
	if (!ret)
		ret = setup_target(rc, err, sizeof(err));
	if (!ret)
		cupti__set_target(rc->cupti, rc->pid, rc->child);
	if (ret) {
		pr_err("%s", err[0] ? err : strerror(-ret));
		return ret;
	}
	rc->py.pid = rc->pid;
	ret = record_choose_python(rc, (const struct py_interp *const[]){&rc->py}, 1);
	if (ret)
		return ret;
	if (rc->py.warning[0])
		pr_warn("%s", rc->py.warning);
	/* -- CMD may exec Python later (sh -c, a chroot): -p with none has no steps */
	if (!rc->py.info && !rc->child && wants_steps(rc->o)) {
		pr_err("record: --steps and --schedule need Python; pid %d runs none", rc->pid);
		return -ENOEXEC;
	}
	if (rc->pidfd < 0)
		rc->pidfd = (int)syscall(SYS_pidfd_open, rc->pid, 0);
	/* with --steps / --schedule the output is cut from this once the steps are known */
	snprintf(rc->tmp, sizeof(rc->tmp), "%s.recording", rc->o->output);
	note_leftover(wants_steps(rc->o) ? rc->tmp : rc->o->output);
	ret = trace_writer__open(wants_steps(rc->o) ? rc->tmp : rc->o->output, &rc->w);
	if (ret)
		return ret;
	/* a full disk keeps what was written; cut into steps, a partial recording is no use */
	if (!wants_steps(rc->o))
		trace_writer__keep_partial(rc->w);
	ret = tracer__new(rc->w, rc->o->ringbuf_mb, 0, &rc->tracer);
	if (!ret && rc->py.info)
		ret = record_open_python(rc);
	if (!ret)
		ret = libwatch__open(rc->tracer, rc->pid, &rc->libs);
	if (!ret)
		ret = record_open_target(rc);
	if (!ret && !rc->o->no_ops)
		ret = torchops__open(rc->tracer, rc->pid, rc->mp, rc->o->quiet, &rc->ops);
	if (!ret && rc->ops)
		ret = libwatch__subscribe(rc->libs, torchops__on_lib, rc->ops);
	/* -- CMD: its ops to the callback at its first (record_handover()) */
	if (!ret)
		ret = record_arm_handover(rc);
	/* by default, ops alone from the agent where PyTorch is loaded already (docs/torch.md) */
	if (!ret && rc->ops && !rc->pm && record_op_callback(rc->o, &rc->py) &&
	    pymon__open_ops(&rc->py, rc->tracer, rc->o->agent_ring_mb, rc->start_time, &rc->pm))
		rc->pm = NULL; /* the probes take them */
	/* the agent's RecordFunction callback, if PyTorch is loaded, else probes */
	pymon__set_ops(rc->pm, rc->o->op_probes ? NULL : rc->ops);
	/* probe modules subscribe to rc->libs here, before it reports what is mapped */
	if (!ret && !rc->o->no_cuda)
		ret = cudaprobe__open(rc->tracer, rc->libs, rc->pid, rc->o->quiet, &rc->cuda);
	if (!ret && !rc->o->no_sched)
		ret = sched__open(rc->tracer, rc->pid, rc->cuda, &rc->sched);
	/* -p: the agent is injected once the target has the CUDA driver mapped */
	if (!ret && rc->cupti && !rc->child)
		ret = libwatch__subscribe(rc->libs, cupti__on_lib, rc->cupti);
	/* CUPTI's API records of probed calls become links to the probes' records */
	if (!ret && rc->cuda)
		cupti__set_join(rc->cupti, cudaprobe__join, rc->cuda);
	/* an agent that takes the CUDA calls from CUPTI's callbacks: its ring, in the probes' place
	 */
	if (!ret && rc->cuda)
		cupti__set_calls(rc->cupti, cudaprobe__agent_ring, rc->cuda);
	if (!ret)
		ret = cupti__start(rc->cupti, rc->w, rc->pid, rc->start_time, rc->child);
	/* -p: the libraries it has not mapped are probed before its calls fill the ring */
	if (!ret && !rc->child)
		ret = libwatch__look_ahead(rc->libs);
	if (!ret) {
		/* loading (BPF verification) is done: time starts when probes go in */
		rc->start_ts = now_ns(CLOCK_MONOTONIC);
		tracer__set_start_ts(rc->tracer, rc->start_ts);
		ret = write_meta(rc);
	}
	if (!ret && rc->pf)
		ret = pyframe__attach(rc->pf);
	/* -- CMD: the agent where its script starts (record_handover.c) */
	if (!ret && rc->pf && rc->child)
		ret = record_arm_py_handover(rc);
	/*
	 * the default's ops agent that did not start said why: the probes take
	 * them; the default's agent of Python calls: the uprobes take them, from
	 * a new start (record_run())
	 */
	if (!ret && rc->pm && rc->o->in_process && rc->o->py_from == RECORD_PY_AUTO)
		pymon__fall_back(rc->pm);
	if (!ret && rc->pm)
		ret = pymon__attach(rc->pm);
	if (ret && ret != -ENOMEM && pymon__failure(rc->pm)) {
		snprintf(rc->py_why, sizeof(rc->py_why), "the agent did not go in: %s",
			 pymon__failure(rc->pm));
		rc->py_retry = true;
	}
	if (!ret && rc->sched)
		ret = sched__attach(rc->sched);
	if (!ret)
		ret = libwatch__attach(rc->libs);
	rc->attached_ts = now_ns(CLOCK_MONOTONIC);
	if (rc->child && (ret || !target__held(rc->tg)))
		launch__release(rc->pid);
	else if (!ret && target__held(rc->tg))
		ret = target__run(rc->tg);
	if (!ret && !rc->o->quiet && rc->py.info) {
		struct proc_ns_ids ids;
		char ns[40] = "", how[160] = "";
		char agent[128] = "";

		if (!proc_ns_ids(rc->pid, rc->pid, &ids) && ids.levels > 1)
			snprintf(ns, sizeof(ns), "container pid %u, ", ids.pid[ids.levels - 1]);
		pymon__describe(rc->pm, agent, sizeof(agent));
		if (rc->o->in_process)
			snprintf(how, sizeof(how), ", in-process: %s", agent);
		else if (rc->pm && pymon__ops_on(rc->pm))
			snprintf(how, sizeof(how), ", PyTorch ops by its RecordFunction callback");
		pr_info("recording pid %d (%sPython %s, %s%s)", rc->pid, ns, rc->py.version,
			rc->py.path, how);
	} else if (!ret && !rc->o->quiet && rc->child) {
		/* "recording pid" is said once Python runs, if ever: a launcher execs it next */
		pr_info("started pid %d (%s), no Python yet: recording its CUDA calls, "
			"GPU activity and off-CPU time, and following its exec into Python",
			rc->pid, rc->o->cmd[0]);
	} else if (!ret && !rc->o->quiet) {
		pr_info("recording pid %d (no Python: CUDA calls, GPU activity and "
			"off-CPU time; an exec of Python%s or a load of libpython is followed)",
			rc->pid, target__held(rc->tg) ? " (held at the exec until probed)" : "");
	}
	if (!ret)
		record_say_python(rc);
	return ret;
}

/* The hand-overs the -- CMD child was held for are done: its hold can end. */
static bool handovers_done(const struct recording *rc)
{
	bool ops = rc->ops_handover || rc->ops_held_to_map;

	if (!ops && !rc->py_handover)
		return false;
	return (!ops || rc->ops_handover_done) && (!rc->py_handover || rc->py_handover_done);
}

static bool target_exited(struct recording *rc)
{
	struct pollfd p = {.fd = rc->pidfd, .events = POLLIN};

	if (rc->child && !rc->child_reaped) {
		/* held until it runs Python: its stops (and end) come through ptrace */
		if (target__held(rc->tg))
			rc->child_reaped = target__poll(rc->tg, &rc->child_status) == 1;
		else if (rc->tree) /* held by the set: its end is read there */
			rc->child_reaped = proctree__reap(rc->tree, rc->pid, &rc->child_status);
		else if (waitpid(rc->pid, &rc->child_status, WNOHANG) == rc->pid)
			rc->child_reaped = true;
	}
	/* held for the hand-over of its ops alone: that is done */
	if (rc->child && !rc->child_reaped && handovers_done(rc) && target__held(rc->tg))
		rc->child_reaped = target__let_go(rc->tg, &rc->child_status) == 1;
	/* a Python target that exec'd: what it runs now */
	target__poll_exec(rc->tg);
	/* several processes: until the last ends (-- CMD's status is still the exit status) */
	if (rc->tree)
		return !rc->o->by_uid && !rc->o->cgroup && !proctree__live(rc->tree);
	if (rc->child)
		return rc->child_reaped;
	if (rc->pidfd >= 0)
		return poll(&p, 1, 0) == 1;
	return !proc_exists(rc->pid);
}

/*
 * Whether the target writes to the terminal our stderr is: its stdout or
 * stderr is the same character device. -- CMD inherits ours, so it always
 * does; -p PID does when it runs in the same terminal.
 */
static bool target_on_our_tty(pid_t pid)
{
	struct stat ours, theirs;
	char path[64];

	if (fstat(STDERR_FILENO, &ours) || !S_ISCHR(ours.st_mode))
		return false;
	for (int fd = 1; fd <= 2; fd++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
		if (!stat(path, &theirs) && S_ISCHR(theirs.st_mode) &&
		    theirs.st_rdev == ours.st_rdev)
			return true;
	}
	return false;
}

/* Python events the BPF side could not send, of one process or of several. */
static uint64_t py_dropped(const struct recording *rc)
{
	struct proctree_stats ts;
	struct pyframe_stats st;
	struct pymon_stats ms;

	pymon__stats(rc->pm, &ms);
	if (rc->tree) {
		proctree__stats(rc->tree, &ts);
		return ts.dropped + ms.dropped;
	}
	pyframe__stats(rc->pf, &st);
	return st.dropped + ms.dropped;
}

/* Ends an unfinished status line, so that what comes next starts a line of its own. */
static void end_status(struct recording *rc)
{
	if (rc->status_shown)
		fputc('\n', stderr);
	rc->status_shown = false;
}

/*
 * The line is redrawn in place with '\r', which would land inside the
 * target's own lines if it wrote to the same terminal: it is shown only when
 * stderr is a terminal the target does not write to (checked at each
 * redraw, since a target can redirect), and never for -- CMD (--help).
 */
static void live_status(struct recording *rc, uint64_t now, uint64_t *last_ts, uint64_t *last_ev)
{
	if (rc->o->quiet || !isatty(STDERR_FILENO) || now - *last_ts < 500000000ull)
		return;
	/* -- CMD's output is ours (and its descriptors are gone once it exits, unreaped) */
	if (rc->child || target_on_our_tty(rc->pid)) {
		end_status(rc);
		return;
	}
	fprintf(stderr, "\rrecording pid %d%s: %.1f s, %llu events (%.0f/s), %llu dropped\033[K",
		rc->pid, rc->tree ? " and others" : "", (now - rc->start_ts) / 1e9,
		(unsigned long long)tracer__events(rc->tracer),
		(tracer__events(rc->tracer) - *last_ev) * 1e9 / (double)(now - *last_ts),
		(unsigned long long)py_dropped(rc));
	rc->status_shown = true;
	*last_ts = now;
	*last_ev = tracer__events(rc->tracer);
}

static int run_loop(struct recording *rc)
{
	uint64_t limit = rc->o->duration > 0 ? (uint64_t)(rc->o->duration * 1e9) : 0;
	uint64_t last_ts = rc->start_ts, last_ev = 0, now;
	int ret, status;

	for (;;) {
		/*
		 * Probes wake us only when the ring buffer fills: read at least
		 * every 10 ms anyway, so that what is read from the target's
		 * memory (module names) is read while the target still runs.
		 */
		ret = tracer__poll(rc->tracer, 10);
		if (ret < 0)
			return ret;
		record_poll_handover(rc);
		/*
		 * -p held at its exec: its stops are handled here, its end is the
		 * pidfd's; before the CUPTI agent goes in, which needs it let go
		 */
		if (!rc->child && target__held(rc->tg))
			target__poll(rc->tg, &status);
		ret = cupti__poll(rc->cupti);
		if (ret < 0)
			return ret;
		cudaprobe__poll(rc->cuda);
		ret = rc->tree ? proctree__poll(rc->tree) : 0;
		if (ret < 0)
			return ret;
		now = now_ns(CLOCK_MONOTONIC);
		if (stop_signal) {
			rc->stop_reason = stop_signal == SIGINT ? "interrupted" : "terminated";
			return 0;
		}
		if (limit && now - rc->attached_ts >= limit) {
			rc->stop_reason = "duration elapsed";
			return 0;
		}
		if (target_exited(rc)) {
			rc->stop_reason = "target exited";
			return 0;
		}
		if (wants_steps(rc->o) && rc->steps && steps__done(rc->steps)) {
			rc->stop_reason = "steps done";
			return 0;
		}
		live_status(rc, now, &last_ts, &last_ev);
	}
}

static void print_ops_summary(struct recording *rc)
{
	struct torchops_stats ops;
	struct pymon_stats ms;

	if (rc->steps && steps__count(rc->steps))
		pr_info("%u training steps ended", steps__count(rc->steps));
	if (proc_open_refusals())
		pr_warn("%lu files of the targets were not read (each said why)",
			proc_open_refusals());
	if (!rc->ops)
		return;
	torchops__stats(rc->ops, &ops);
	pymon__stats(rc->pm, &ms);
	if (ms.ops && ops.calls == ops.callback_calls) {
		pr_info("%llu PyTorch op calls (RecordFunction callback in the target%s)",
			(unsigned long long)ops.calls, ms.procs > 1 ? "s" : "");
	} else if (ms.ops_procs) {
		/* -p A,B: some processes by their callback, the others by probes */
		pr_info("%llu PyTorch op calls (RecordFunction callback in %u of %u processes "
			"with an agent: %llu calls; %u ops probed in the others: %llu calls, "
			"%llu events lost)",
			(unsigned long long)ops.calls, ms.ops_procs, ms.procs,
			(unsigned long long)ops.callback_calls, ops.ops,
			(unsigned long long)(ops.calls - ops.callback_calls),
			(unsigned long long)ops.dropped);
		if (ms.ops_msg && ms.ops_msg[0])
			pr_info("ops of pid %d through probes, not the in-process callback: %s",
				ms.ops_msg_pid, ms.ops_msg);
	} else if (!ops.libs) {
		pr_info("no PyTorch library was mapped: no op probes");
		return;
	} else if (!ops.mapped) {
		pr_info("no PyTorch library was mapped (%u ops probed ahead, unused)", ops.ops);
		return;
	} else {
		pr_info("%llu PyTorch op calls (%u ops probed, %llu events lost)",
			(unsigned long long)ops.calls, ops.ops, (unsigned long long)ops.dropped);
		/* --in-process fell back to the probes: say why */
		if (ms.ops_msg && ms.ops_msg[0] && ms.procs > 1)
			pr_info("ops through probes, not the in-process callbacks: pid %d: %s",
				ms.ops_msg_pid, ms.ops_msg);
		else if (ms.ops_msg && ms.ops_msg[0])
			pr_info("ops through probes, not the in-process callback: %s", ms.ops_msg);
	}
	if (rc->mp) {
		struct modpath_stats mst;

		modpath__stats(rc->mp, &mst);
		if (mst.unreadable)
			pr_info("note: %llu nn.Module names could not be read from "
				"the target (it exited first?): shown as '?'",
				(unsigned long long)mst.unreadable);
	}
}

/* A process that ran neither Python nor CUDA: say once what its trace holds. */
static void note_no_python(const struct recording *rc)
{
	struct cudaprobe_stats cs = {};

	/* several processes: proctree__summary() says which ran Python */
	if (rc->pf || rc->pm || rc->tree)
		return;
	if (rc->cuda)
		cudaprobe__stats(rc->cuda, &cs);
	if (!rc->cuda)
		pr_info("note: pid %d ran no Python (CUDA probes off: "
			"--no-cuda)",
			rc->pid);
	else if (cs.calls)
		pr_info("note: pid %d ran no Python: the trace holds its CUDA "
			"calls, GPU activity and off-CPU intervals",
			rc->pid);
	else
		pr_info("note: pid %d ran neither Python nor CUDA: the trace "
			"holds its off-CPU intervals only",
			rc->pid);
}

/* --per-process: a program that runs no Python has a file when it used CUDA or the GPU. */
static bool keep_proc(void *ctx, pid_t pid)
{
	struct recording *rc = ctx;

	return cudaprobe__has_pid(rc->cuda, pid) || cupti__has_pid(rc->cupti, pid);
}

static int finish(struct recording *rc)
{
	uint64_t stop_ts = now_ns(CLOCK_MONOTONIC);
	uint64_t dropped;
	char buf[64];
	int ret, caught;

	/* a child still held (it never ran Python) runs on untraced */
	if (target__let_go(rc->tg, &rc->child_status))
		rc->child_reaped = true;
	/*
	 * Everything up to the stop is handled first, while the target most
	 * likely still runs: handling reads its memory (names of code objects
	 * and modules), and the detaches below take a while (uprobes: 0.3 s
	 * for PyTorch's and CUDA's), long enough for a target to exit.
	 */
	caught = tracer__catch_up(rc->tracer, stop_ts);
	/*
	 * What the uprobes are attached with is closed once the trace is
	 * written, mostly by a child left behind (teardown_run()): without
	 * uprobe_multi each site's close waits for a grace period, 0.1 s here
	 */
	teardown_defer(true);
	pyframe__detach(rc->pf);
	/* the agent takes its callbacks out; what it wrote until then is still read */
	pymon__stop(rc->pm);
	proctree__detach(rc->tree);
	if (rc->tree && rc->child && !rc->child_reaped)
		rc->child_reaped = proctree__reap(rc->tree, rc->pid, &rc->child_status);
	if (rc->libs)
		libwatch__detach(rc->libs);
	cudaprobe__detach(rc->cuda);
	sched__detach(rc->sched);
	torchops__detach(rc->ops);
	/*
	 * The probes' last calls go into their histories before the agents'
	 * last flush is decoded, so that CUPTI's records of them find them.
	 */
	ret = caught < 0 ? caught : tracer__poll(rc->tracer, 0);
	/* an exec read only in that last poll is still looked at (and said) */
	target__poll_exec(rc->tg);
	/* the agents flush what CUPTI still holds, then hang up */
	ret = cupti__stop(rc->cupti, 5000) ?: (ret < 0 ? ret : 0);
	ret = tracer__finish(rc->tracer, stop_ts) ?: ret;
	if (!ret && rc->py_exec_lost)
		ret = trace_writer__lost(rc->w, PTG_LOST_PY_EXEC_UNFOLLOWED, UINT32_MAX,
					 rc->py_exec_lost);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)stop_ts);
	ret = ret ?: trace_writer__meta(rc->w, "stop.monotonic_ns", buf);
	ret = ret ?: trace_writer__meta(rc->w, "stop.reason", rc->stop_reason);
	if (!ret && rc->ops) {
		struct torchops_stats ops;
		struct pymon_stats ms;

		torchops__stats(rc->ops, &ops);
		pymon__stats(rc->pm, &ms);
		/* a set's process without an agent may have probed ops (a later import) */
		ret = trace_writer__meta(rc->w, "ops.source",
					 !ms.ops_procs ? "uprobes"
					 : ms.ops && ops.calls == ops.callback_calls
					     ? "record_function"
					     : "record_function,uprobes");
	}
	if (ret)
		return ret;
	ret = trace_writer__close(rc->w);
	rc->w = NULL;
	if (!ret && wants_steps(rc->o) && !rc->steps) {
		pr_err("record: --steps and --schedule need Python; pid %d "
		       "ran none",
		       rc->pid);
		unlink(rc->tmp);
		return -ENOEXEC;
	}
	if (!ret && rc->o->per_process) {
		ret =
		    proctree__split(rc->tree, rc->tmp, rc->o->output, rc->o->quiet, keep_proc, rc);
		unlink(rc->tmp);
		ret = ret < 0 ? ret : 0;
	}
	if (!ret && wants_steps(rc->o)) {
		ret = steps__write(rc->steps, rc->tmp, rc->o->output, stop_ts, rc->o->quiet);
		unlink(rc->tmp);
		ret = ret < 0 ? ret : 0;
	}
	if (ret || rc->o->quiet)
		return ret;
	dropped = py_dropped(rc);
	if (rc->tree)
		proctree__summary(rc->tree, rc->stop_reason, (stop_ts - rc->start_ts) / 1e9,
				  tracer__calls(rc->tracer), tracer__events(rc->tracer), dropped,
				  rc->o->per_process ? NULL : rc->o->output);
	else
		pr_info("%s after %.2f s: %llu Python calls from pid %d (%llu events), "
			"%llu events lost; wrote %s",
			rc->stop_reason, (stop_ts - rc->start_ts) / 1e9,
			(unsigned long long)tracer__calls(rc->tracer), rc->pid,
			(unsigned long long)tracer__events(rc->tracer), (unsigned long long)dropped,
			rc->o->output);
	print_ops_summary(rc);
	note_no_python(rc);
	cudaprobe__summary(rc->cuda);
	sched__summary(rc->sched);
	cupti__summary(rc->cupti);
	if (dropped)
		pr_warn("%llu events were dropped (ring buffer full); "
			"try a larger --ringbuf-mb",
			(unsigned long long)dropped);
	return 0;
}

/*
 * record -- CMD exits as its command did, like time(1) and perf record: the
 * command's status, or 128 + N when signal N killed it; 0 otherwise.
 */
static int command_status(const struct recording *rc)
{
	if (!rc->child || !rc->child_reaped)
		return 0;
	if (WIFEXITED(rc->child_status))
		return WEXITSTATUS(rc->child_status);
	if (WIFSIGNALED(rc->child_status))
		return 128 + WTERMSIG(rc->child_status);
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	/* no SA_RESTART: a signal must wake the ring buffer poll */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* past a file size limit a write then fails (EFBIG): the trace so far is kept */
	signal(SIGXFSZ, SIG_IGN);
}

/* What a recording holds, freed: what start() or start_tree() left, whether it failed or not. */
static void free_recording(struct recording *rc)
{
	/* failed while the child was held: it runs on untraced */
	if (target__let_go(rc->tg, &rc->child_status))
		rc->child_reaped = true;
	pyframe__destroy(rc->pf);
	pymon__destroy(rc->pm);
	pymon__destroy(rc->dropped_pm);
	record_python_free(rc);
	proctree__destroy(rc->tree);
	cudaprobe__destroy(rc->cuda);
	cupti__free(rc->cupti);
	sched__destroy(rc->sched);
	torchops__destroy(rc->ops);
	modpath__destroy(rc->mp);
	steps__destroy(rc->steps);
	libwatch__destroy(rc->libs);
	tracer__free(rc->tracer);
	target__free(rc->tg);
	trace_writer__abort(rc->w);
	if (rc->pidfd >= 0)
		close(rc->pidfd);
}

/*
 * The default's agent did not go in (its tool ids taken, a profiler in,
 * the injection refused): everything it set up is taken out, and the
 * recording starts again with the uprobes, saying why.
 */
static int start_again(struct recording *rc, const struct record_opts *opts)
{
	char why[sizeof(rc->py_why)];

	snprintf(why, sizeof(why), "%s", rc->py_why);
	free_recording(rc);
	*rc->o = *opts;
	rc->o->py_from = RECORD_PY_UPROBES;
	*rc = (struct recording){.o = rc->o, .pidfd = -1};
	snprintf(rc->py_why, sizeof(rc->py_why), "%s", why);
	return record_is_tree(rc->o) ? start_tree(rc) : start(rc);
}

int record_run(const struct record_opts *opts, int *cmd_status)
{
	/* a copy: start_tree() turns off the probes that take one process only */
	struct record_opts o = *opts;
	struct recording rc = {.o = &o, .pidfd = -1};
	size_t closing;
	int ret, closer;

	install_signals();
	ret = record_is_tree(&o) ? start_tree(&rc) : start(&rc);
	if (ret && rc.py_retry && !rc.child)
		ret = start_again(&rc, opts);
	if (!ret)
		ret = run_loop(&rc);
	end_status(&rc);
	if (!ret)
		ret = finish(&rc);
	else if (rc.tracer)
		pr_err("record failed: %s", strerror(-ret));
	free_recording(&rc);
	/* last: the agents' sockets are closed, so the child that closes the probes holds none */
	closing = teardown_pending();
	closer = teardown_run();
	if (closer > 0 && !o.quiet)
		pr_info("%zu probe links are closed by pid %d, left behind (one grace period each "
			"without uprobe_multi)",
			closing, closer);
	*cmd_status = command_status(&rc);
	return ret;
}
