/* SPDX-License-Identifier: MIT */
/*
 * The state of one `record` run, shared by user/record/session.c (one
 * process, the loop, the end), record_tree.c (several processes),
 * record_python.c (its Python) and meta.c (the trace's metadata); its options
 * are read by user/cli/record_opts.c.
 */
#ifndef PTG_RECORD_H
#define PTG_RECORD_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyinterp/pyinterp.h"
#include "record/steps.h"

struct cudaprobe;
struct cupti;
struct libwatch;
struct target;
struct modpath;
struct proctree;
struct pyframe;
struct pymon;
struct sched;
struct torchops;
struct trace_writer;
struct tracer;

#define RECORD_MAX_PIDS 64

struct record_opts {
	pid_t pid;
	pid_t pids[RECORD_MAX_PIDS]; /* -p A,B,C: pids[0] is pid */
	int npids;
	bool children;	  /* --children: the processes they start too */
	bool per_process; /* --per-process: a trace of each, not one of all */
	bool hold;	  /* --hold: each process under ptrace while recorded (a set of them) */
	bool by_uid;	  /* --uid: every Python process of a user */
	uid_t uid;
	const char *cgroup; /* --cgroup: every Python process of a cgroup */
	double duration;
	const char *output;
	unsigned int ringbuf_mb;
	/* the agent's ring (--in-process, ops alone): --ringbuf-mb if given, else 0 (its own) */
	unsigned int agent_ring_mb;
	bool quiet;
	bool no_cuda;
	bool no_cupti;
	bool no_sched;
	bool no_ops;
	bool op_probes; /* --ops-from probes: never the agent's RecordFunction callback */
	/*
	 * Where Python calls come from: the option given (--in-process,
	 * --uprobes) or none (record_choose_python() picks); and in_process,
	 * what was picked: the sys.monitoring agent (pymon.h) or the uprobes
	 */
	enum record_py_from { RECORD_PY_AUTO, RECORD_PY_AGENT, RECORD_PY_UPROBES } py_from;
	bool in_process;
	struct steps_opts steps;
	char **cmd;
};

/*
 * Ops by an agent's RecordFunction callback rather than probes, for process
 * py->pid: the default for -p of running Python processes that have PyTorch
 * loaded at the attach (docs/torch.md); a command imports it later (an agent
 * cannot go in before its constructors ran), and a set that grows gets its
 * later processes' ops from the probes alone.
 */
bool record_op_callback(const struct record_opts *o, const struct py_interp *py);

struct recording {
	struct record_opts *o;
	pid_t pid;
	bool child; /* started by us: -- CMD */
	bool child_reaped;
	bool ops_handover;	/* -- CMD: ops to the callback at the first (record_handover()) */
	bool ops_handover_done; /* it happened, or failed: the child's hold can end */
	/* -- CMD, op probes without uprobe_multi: held until they are in (record_ops_held()) */
	bool ops_held_to_map;
	/* -- CMD: its Python calls to the agent where its script starts (record_handover.c) */
	bool py_handover;
	bool py_handover_done; /* it happened, or will not: the child's hold can end */
	int child_status;
	int pidfd;
	uint64_t start_time; /* of pid: another process that gets its pid is not the target */
	struct py_interp py;
	struct trace_writer *w;
	struct tracer *tracer;
	struct pyframe *pf;
	struct pymon *pm; /* --in-process: instead of pf; else the agent of ops alone, or NULL */
	struct pymon *dropped_pm; /* a hand-over's agent that did not go in (record_handover.c) */
	struct libwatch *libs;
	struct cudaprobe *cuda;
	struct cupti *cupti; /* GPU activity from the CUPTI agent in the target */
	struct sched *sched;
	struct proctree *tree; /* several processes (-p A,B, --children): user/procs/proctree.c */
	struct modpath *mp;
	struct torchops *ops;
	struct steps *steps;   /* --steps, --schedule: the trace is cut from a recording at tmp */
	uint64_t py_exec_lost; /* a Python the target exec'd, not followed (record_python.c) */
	struct target *tg;     /* a Python that comes later; the -- CMD child held until then */
	struct py_ahead
	    *ahead; /* libpython files probed before they are mapped (record_python.c) */
	char tmp[PATH_MAX];
	uint64_t start_ts;    /* probes start to attach */
	uint64_t attached_ts; /* all probes are in place: -d counts from here */
	const char *stop_reason;
	bool status_shown; /* the live status line is on the terminal, unfinished */
	/* why Python calls come from where they do (record_choose_python()), for the status line */
	char py_why[320];
	/* the default's agent refused at its attach: start again with the uprobes */
	bool py_retry;
};

/*
 * Records what o says until the target ends, -d, the steps, or a signal, and
 * prints the summary; *cmd_status is then -- CMD's exit status (128 + N when
 * signal N killed it), else 0. Returns 0, or -errno after a message.
 */
int record_run(const struct record_opts *o, int *cmd_status);
/* Several processes, or the ones they start: recorded through user/procs/proctree.c. */
static inline bool record_is_tree(const struct record_opts *o)
{
	return o->npids > 1 || o->children || o->per_process || o->hold || o->by_uid || o->cgroup;
}
/* Trace metadata of the recording (meta.c). */
int write_meta(struct recording *rc);
/* Says where a killed recorder's trace to out is, if any (meta.c). */
void note_leftover(const char *out);
/* pyframe, then what reads the stacks it keeps: module paths and steps (record_python.c). */
int record_open_python(struct recording *rc);
/* What follows a process with no Python at start: an exec or a libpython later. */
int record_open_target(struct recording *rc);
/*
 * record -- CMD of one process: its ops go to the RecordFunction callback
 * at its first op (torchops__handover_arm()), its main thread held under
 * ptrace until then. record_arm_handover() once the op probes are open.
 */
bool record_handover(const struct record_opts *o);
/*
 * record -- CMD whose ops come from the probes, on a kernel without
 * uprobe_multi: they go in when PyTorch is mapped, not ahead, so the
 * command is held until then (its loading thread waits at the loader's
 * notice while they go in).
 */
bool record_ops_held(const struct record_opts *o);
int record_arm_handover(struct recording *rc);
/*
 * The first op could not stop the command's thread: the op probes go in
 * now. And record_ops_held()'s hold ends once the op probes are in.
 */
void record_poll_handover(struct recording *rc);
/* What record_open_target probed ahead; rc->pf is not among it. */
void record_python_free(struct recording *rc);
/*
 * Python calls from the agent in the target or from uprobes (record_pypath.c):
 * sets o->in_process and rc->py_why. Without --in-process or --uprobes, the
 * agent where each of the n processes (pys[i], info NULL where no Python
 * runs) can take it and injection is allowed, else the uprobes; with
 * --in-process, an error (after a message) where it cannot be.
 */
int record_choose_python(struct recording *rc, const struct py_interp *const *pys, size_t n);
/*
 * record -- CMD by default: its calls from the uprobes until its script
 * starts, from the agent after (record_handover.c). Whether so for o and
 * py (NULL: a set's first choice, before its processes are known); else
 * why not in why, where it says something.
 */
bool record_py_handover(const struct record_opts *o, const struct py_interp *py, char *why,
			size_t len);
/* Its probe and its stop, once rc->pf is attached; where it cannot be, the uprobes stay. */
int record_arm_py_handover(struct recording *rc);
/* A hand-over whose thread could not be stopped: said, the uprobes stay (record loop). */
void record_py_handover_end(struct recording *rc);
/* Says where Python calls come from and why, one line (not with -q). */
void record_say_python(const struct recording *rc);
/* -p A,B, --children, --hold, --per-process, --uid, --cgroup: user/procs/proctree.c records them.
 */
int start_tree(struct recording *rc);

#endif /* PTG_RECORD_H */
