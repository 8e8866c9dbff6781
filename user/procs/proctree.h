/* SPDX-License-Identifier: MIT */
/*
 * Recording several processes at once: record -p A,B,C and --children. The
 * set of recorded processes is a BPF hash of tgids that the kernel itself
 * grows at each fork of a member (bpf/proctree.bpf.c), so a child is in it
 * before it first runs. The frame probes go on each interpreter file, once
 * for every process that runs it (pyframe__open_shared), and pass only the
 * members' events; those are routed here, by pid, to the pyframe of the
 * interpreter the process runs. One pyframe per distinct interpreter file.
 */
#ifndef PTG_PROCTREE_H
#define PTG_PROCTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procs/proctree_types.h"
#include "pyinterp/pyinterp.h"
#include "python/pyframe.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

struct proctree;

struct proctree_stats {
	uint64_t dropped;      /* Python events lost (pyframe_stats.dropped, all interpreters) */
	uint32_t processes;    /* processes recorded, roots and children */
	uint32_t interpreters; /* distinct interpreter files probed */
	uint32_t not_python;   /* processes that ran no supported Python (shells, other programs) */
	uint64_t unrouted;     /* Python events of a process whose interpreter was not found */
	uint64_t lost_procs;   /* forks, execs, exits the BPF side could not send */
	uint32_t exec_held;    /* execs held at their stop, before the new image ran */
	uint32_t exec_unheld;  /* execs met while the new image ran (not held at the exec) */
	uint32_t hold_refused; /* processes another tracer holds */
	uint32_t exec_unrecorded; /* --in-process: execs into a Python the probes could not take */
};

/* children: follow forks (--children); else only the processes added. */
int proctree__new(bool children, bool quiet, struct proctree **out);
/*
 * What is recorded of a process with no Python ("CUDA calls and off-CPU
 * time"), for the line that says which processes run none.
 */
void proctree__nopy_what(struct proctree *pt, const char *what);
/*
 * record -p A,B --in-process: the Python frames come from an agent in each
 * process (user/python/pymon.c), not from probes; the set follows exits and
 * execs. A member that execs leaves its agent with the image it replaced:
 * gone(ctx, pid) is called at that exec, in time order with the frame
 * events, and its new image is probed as a set's are (held at the exec,
 * so from its first call). Before proctree__load().
 */
void proctree__frames_elsewhere(struct proctree *pt, proctree_gone_fn gone, void *ctx);
/* After the processes are added: loads the BPF side and a pyframe per interpreter. */
int proctree__load(struct proctree *pt, struct tracer *t);
/* fd of the BPF hash of recorded tgids, for other probe objects to filter by (after load). */
int proctree__set_fd(const struct proctree *pt);
/*
 * Adds running process pid: checks it as record -p does (exists, no kernel
 * thread, the same process throughout: pidfd and start time). One that runs
 * no Python is taken as record -p takes it: its CUDA calls, ops and off-CPU
 * time, its exec into Python and (--children) what it starts. Returns 0 or
 * -errno with a one-line reason in err.
 */
int proctree__add_pid(struct proctree *pt, pid_t pid, char *err, size_t errlen);
/*
 * --uid: adds every running Python process of uid (real uid) and, from
 * proctree__attach() on, every process of it that execs; follows forks.
 */
int proctree__add_uid(struct proctree *pt, uid_t uid, bool quiet);
/*
 * --children -p: the running descendants of the processes added, those
 * that run no Python (a shell between a launcher and its ranks) too.
 */
int proctree__add_descendants(struct proctree *pt, bool quiet);
/* --cgroup: the same for the processes of a cgroup v2 directory and those below it. */
int proctree__add_cgroup(struct proctree *pt, const char *path, bool quiet, char *err,
			 size_t errlen);
/*
 * Adds a process whose interpreter is known already (record -- CMD, stopped
 * by launch); py NULL for a program that runs no Python itself.
 */
int proctree__add(struct proctree *pt, pid_t pid, const struct py_interp *py);
/* The first process added and its interpreter, for the trace's metadata. */
pid_t proctree__first(const struct proctree *pt, const struct py_interp **py);
/* Metadata "pids" (the processes added, A,B,C) and "children" (1 or 0). */
int proctree__write_meta(const struct proctree *pt, struct trace_writer *w);
/* fn runs for each process of the set that exec()'d (proctree_types.h). */
void proctree__on_exec(struct proctree *pt, proctree_exec_fn fn, void *ctx);
/* fn hears which held processes run no Python (proctree_types.h). */
void proctree__on_nopy(struct proctree *pt, proctree_nopy_fn fn, void *ctx);
/*
 * Process pid of the set mapped a libpython: when it ran no Python, its
 * interpreter is found and probed now, and its calls recorded from here on
 * (held: it waits at the loader's notice that mapped it, so from its
 * first). 0 also when it is no supported interpreter (said once).
 */
int proctree__mapped_python(struct proctree *pt, pid_t pid, bool held);
/*
 * The interpreter process pid of the set runs now, or NULL (none known, not
 * of the set); before proctree__load(), that of a process added.
 */
const struct py_interp *proctree__interp_of(struct proctree *pt, pid_t pid);
/* Attaches the fork/exec/exit programs, then the frame probes of each interpreter. */
int proctree__attach(struct proctree *pt);
/* Work between ring-buffer reads: interpreters of processes that exec()'d. */
int proctree__poll(struct proctree *pt);
/* One process recorded, as --per-process names and describes its trace. */
struct proctree_proc {
	pid_t pid;
	uint64_t start_time; /* given with -p: its proc_start_time() when added; else 0 */
	bool ran_python;
	bool named; /* given with -p */
	const char *cmdline;
	const char *rank;	/* RANK, else LOCAL_RANK, of its environment; "" if none */
	const char *dist_rank;	/* RANK alone (LOCAL_RANK is no rank of the job); "" if none */
	const char *world_size; /* WORLD_SIZE; "" if none */
	const char *py_version;
	const char *py_path;
};

size_t proctree__nprocs(const struct proctree *pt);
void proctree__proc(const struct proctree *pt, size_t i, struct proctree_proc *out);
/*
 * --per-process: one trace per process of the recording at in that ran
 * Python or was given with -p, or for which keep(ctx, pid) is true (keep
 * may be NULL),
 * OUT.rankR.ptg (OUT.rankR.pidP.ptg when R is not unique, or the process
 * ran no Python), else OUT.pidP.ptg (OUT less a .ptg suffix). In
 * user/record/proctree_split.c.
 */
typedef bool (*proctree_keep_fn)(void *ctx, pid_t pid);
int proctree__split(const struct proctree *pt, const char *in, const char *out, bool quiet,
		    proctree_keep_fn keep, void *ctx);
/*
 * Each process of the set is under ptrace from proctree__attach() on
 * (user/procs/proctree_hold.c), so that its exec waits while what it execs
 * is probed. The CUPTI agent borrows a thread under ptrace: before pid is
 * injected, its hold ends (its execs are found as soon as can be then).
 */
void proctree__let_go(struct proctree *pt, pid_t pid);
/*
 * A SIGURG stop of held process pid is being handled (begin), or was
 * (end): a let-go meanwhile waits for its end, which says whether there
 * was one (the process is to be detached there, not resumed).
 */
void proctree__stop_begin(struct proctree *pt, pid_t pid);
bool proctree__stop_end(struct proctree *pt, pid_t pid);
/*
 * The -- CMD child pid (proctree__add()) ended: true with its wait status.
 * While it is held, its end is read by proctree__poll(), nowhere else.
 */
bool proctree__reap(struct proctree *pt, pid_t pid, int *wstatus);
/* Recorded processes still running. */
uint32_t proctree__live(const struct proctree *pt);
void proctree__detach(struct proctree *pt);
void proctree__stats(const struct proctree *pt, struct proctree_stats *st);
/* The end of recording's summary on stderr; out NULL when --per-process said what it wrote. */
/* dropped: the Python events lost, proctree__stats()' and those of other sources (pymon) */
void proctree__summary(const struct proctree *pt, const char *reason, double secs, uint64_t calls,
		       uint64_t events, uint64_t dropped, const char *out);
void proctree__destroy(struct proctree *pt);

#endif /* PTG_PROCTREE_H */
