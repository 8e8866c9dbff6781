/* SPDX-License-Identifier: MIT */
/*
 * `record --in-process`: the loader's side of the sys.monitoring agent
 * (agent/ptg_pymon_agent.c). Makes the shared ring (a sealed memfd), injects
 * the agent into a Python 3.11+ process, hands it the ring over a unix
 * socket that only the target may use, and turns the agent's records into
 * the frame events of the stack engine (user/python/pystack.c), in order
 * with the ring buffer's events (tracer__set_source()), so that every report
 * reads them as it reads those of the uprobes. Closing the socket (or dying)
 * takes the agent's callbacks out of the target. record -p A,B --in-process
 * puts an agent, with a ring and a socket of its own, into each process
 * (pymon__add()); one pymon reads them all.
 */
#ifndef PTG_PYMON_H
#define PTG_PYMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pyinterp/pyinterp.h"
#include "tracer/tracer.h"

struct pymon;

struct pymon_stats {
	uint64_t dropped;    /* records the agent found no room for in the ring */
	uint64_t bad;	     /* records that broke the protocol (ignored) */
	uint64_t unresolved; /* code objects whose names could not be read */
	uint64_t unmatched;  /* returns of frames that were not on the stack */
	uint32_t procs;	     /* processes with an agent */
	uint32_t ops_procs;  /* those whose ops come from the agent's RecordFunction callback */
	bool ops;	     /* all of them do */
	const char *ops_msg; /* why the first that does not, does not; NULL if none */
	int ops_msg_pid;     /* and which process that is */
};

/*
 * Why pid cannot be recorded in-process (a one-line reason in err, "pid N
 * runs no Python"), or 0: Python 3.11+ (sys.monitoring, or 3.11's profile
 * function), in our pid namespace (tids are ours), and a trusted agent.
 */
int pymon__check(const struct py_interp *py, char *err, size_t errlen);
/*
 * Finds and checks the agent, makes the ring (ring_mb MiB; 0: 32 MiB, 8 for
 * ops alone) and the socket, and takes the tracer's Python events. After a
 * message on error.
 */
int pymon__open(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		uint64_t start_time, struct pymon **out);
/*
 * Another process for the same recording (record -p A,B, with or without
 * --in-process: as the first was opened): its own agent, ring (of the same
 * size) and socket. Before pymon__attach().
 */
int pymon__add(struct pymon *pm, const struct py_interp *py, uint64_t start_time);
/*
 * Ops from the agent into ops (before pymon__attach()): where the target
 * has libtorch_cpu loaded at the attach, the agent registers a
 * RecordFunction callback and ops then stops probing libraries.
 */
struct torchops;
void pymon__set_ops(struct pymon *pm, struct torchops *ops);
/*
 * Injects the agents, one process after another, and waits for each one's
 * callbacks to be in. --in-process: all or none, after a message on error;
 * ops alone (pymon__open_ops()): a process whose agent did not start is
 * warned of and keeps its op probes, and only -ENOMEM fails.
 */
int pymon__attach(struct pymon *pm);
/*
 * Every agent's records published so far, handed on now, while a set is
 * still being set up (the agents of its first processes fill their rings
 * while the next ones go in, libraries are scanned, CUPTI agents start).
 * Only before the set is filled (proctree__attach()): until then no
 * ring-buffer event of its threads can come, which would go after newer
 * records of theirs. 0 for NULL.
 */
int pymon__drain_now(struct pymon *pm);
/*
 * Process pid exec'd (its exec event, in time order): its agent went with
 * the image, and the frame events of pid from now on are another source's
 * (the probes of a set, proctree__frames_elsewhere()). Its records, all
 * older, were handled before.
 */
void pymon__exec(struct pymon *pm, pid_t pid);
/* Hangs up: the agent takes its callbacks out; what the ring holds is still read. */
void pymon__stop(struct pymon *pm);
/*
 * The default's ops alone (record -p PID or -p A,B without --in-process): the agent
 * registers PyTorch's RecordFunction callback and nothing else, while
 * the probes record the frames; its op records join theirs in time order
 * (tracer__set_source()). -EOPNOTSUPP for a process in another pid
 * namespace or without Python; a message (a warning) on other errors.
 * pymon__set_ops() and pymon__attach() as for --in-process; if the
 * attach fails, ops come from the probes.
 */
int pymon__open_ops(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		    uint64_t start_time, struct pymon **out);
/* Whether every agent's RecordFunction callback is in (false for NULL). */
bool pymon__ops_on(const struct pymon *pm);
/*
 * record's default (no --in-process): an agent that fails at its attach
 * says nothing; pymon__failure() is why, and record takes the uprobes.
 */
void pymon__fall_back(struct pymon *pm);
/* Why the first agent that failed at pymon__attach() did, or NULL. */
const char *pymon__failure(const struct pymon *pm);
/*
 * The agent goes into thread tid of the process, our tracee already and
 * stopped (inject_opts.held_tid), and it stays stopped: record -- CMD's
 * hand-over of ops at the first one (torchops__handover_arm()), and of its
 * Python calls where its script starts (pyframe__handover_arm()), where
 * that thread lends the session its GIL (ptg_pymon_let_in()).
 */
void pymon__hold(struct pymon *pm, pid_t tid);
/*
 * An agent that did not go in, whose handlers stay registered with the
 * tracer: hung up, and nothing of its ring or events is read from now on.
 */
void pymon__drop(struct pymon *pm);
/*
 * One process's agent that records its Python calls (pymon__open(), ops
 * asked for with pymon__set_ops()) registers its op callback now, called
 * on thread tid, held and stopped at the process's first op (record --
 * CMD: torchops__handover_arm()). 0: its ops are the agent's from that op
 * on (torchops__in_process()); else the probes keep them, said in
 * pymon__describe().
 */
int pymon__ops_in(struct pymon *pm, pid_t tid);
/*
 * After pymon__attach() of an agent held where its script starts: when its
 * callbacks were in, taken with the GIL still held (no frame of any thread
 * began between the two), CLOCK_MONOTONIC; 0 if it did not say.
 */
uint64_t pymon__began(const struct pymon *pm);
/* Frame events before ts are another's (the uprobes', handed over at ts). */
void pymon__since(struct pymon *pm, uint64_t ts);
/* All zero for NULL. */
void pymon__stats(const struct pymon *pm, struct pymon_stats *st);
/*
 * What each agent took, for the recording line: "sys.monitoring tool id 2,
 * ops by RecordFunction", "pid A: ...; pid B: ..." for several.
 */
void pymon__describe(const struct pymon *pm, char *buf, size_t len);
void pymon__destroy(struct pymon *pm);

#endif /* PTG_PYMON_H */
