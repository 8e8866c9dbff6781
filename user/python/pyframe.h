/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/pyframe.bpf.c: loads and attaches the frame
 * probes to one interpreter and hands their events to the stack engine
 * (user/python/pystack.c), which rebuilds each thread's stack of Python frames and
 * writes PY_ENTER / PY_EXIT records through the tracer; code objects it has
 * no names for are read here, from /proc/PID/mem.
 */
#ifndef PTG_PYFRAME_H
#define PTG_PYFRAME_H

#include <stdbool.h>
#include <stdint.h>

#include "pyinterp/pyinterp.h"
#include "tracer/tracer.h"

struct pyframe;

struct pyframe_stats {
	uint64_t dropped;      /* events and snapshots the BPF side could not send */
	uint64_t unresolved;   /* code objects whose names could not be read */
	uint64_t unmatched;    /* returns of frames that were not on the stack */
	uint64_t redispatched; /* RESUMEs executed twice (3.12+ re-instrumentation): one call */
	uint64_t hidden; /* frames that run no RESUME (3.13+ __init__ cleanup), kept unrecorded */
	uint64_t reg_checked;	 /* frames read from a register and checked against the tstate */
	uint64_t reg_mismatched; /* of those, that differed (the site then reads the tstate) */
};

/* Loads the probes for py (the process py->pid) into the tracer's ring buffer. */
int pyframe__open(const struct py_interp *py, struct tracer *t, struct pyframe **out);
/*
 * Whether pyframe__open_shared() can work on this kernel: the legacy build
 * (before bpf_loop, 5.17) serves one process at a time only.
 */
bool pyframe__can_share(void);
/*
 * The same for the file py->attach_path in every process that maps it, of
 * which only those in the BPF hash traced_fd (tgid -> 1) are recorded; the
 * caller routes the tracer's Python events to pyframe__handle() and calls
 * pyframe__write_losses() at the end (user/procs/proctree.c).
 */
int pyframe__open_shared(const struct py_interp *py, struct tracer *t, int traced_fd,
			 struct pyframe **out);
int pyframe__handle(struct pyframe *pf, const struct ptg_event *e, size_t size);
int pyframe__write_losses(struct pyframe *pf);
/* Process pid exec()'d or exited: what was read of its memory is of no more use. */
void pyframe__forget(struct pyframe *pf, pid_t pid);
const struct py_interp *pyframe__interp(const struct pyframe *pf);
int pyframe__attach(struct pyframe *pf);
/*
 * Probes attached after the recording started (an interpreter that came
 * later): the frames already running then are recorded as opened at ts.
 */
void pyframe__set_start_ts(struct pyframe *pf, uint64_t ts);
/*
 * Probes for process pid, or with pid -1 for the file in every process
 * that maps it (what follows forks: a child runs before it could be named);
 * once for each. pyframe__attach() is pyframe__attach_pid(py->pid).
 */
int pyframe__attach_pid(struct pyframe *pf, pid_t pid);
/* Removes the probes; events already sent stay in the ring buffer. NULL: none. */
void pyframe__detach(struct pyframe *pf);
/*
 * record -- CMD (one process, pf from pyframe__open()): where pid's script
 * starts, its main thread stops for the agent to take its calls
 * (enum ptg_py_handover_state). -ENOENT: no PySys_Audit in the interpreter.
 */
int pyframe__handover_arm(struct pyframe *pf, pid_t pid);
/* Where pid's hand-over stands (enum ptg_py_handover_state); *ts: when its script started. */
int pyframe__handover_state(const struct pyframe *pf, pid_t pid, uint64_t *ts);
/* No hand-over: the probe that waits for it goes. */
void pyframe__handover_off(struct pyframe *pf, pid_t pid);
/*
 * Handed over at ts: every probe goes, and the events from ts on that reach
 * pf's handler (the agent's, the same kinds) are not pf's.
 */
void pyframe__hand_over(struct pyframe *pf, uint64_t ts);
/* All zero for NULL (a target with no Python). */
void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st);
void pyframe__destroy(struct pyframe *pf);

#endif /* PTG_PYFRAME_H */
