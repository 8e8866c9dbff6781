/* SPDX-License-Identifier: MIT */
/*
 * The state of a process set, shared by user/procs/proctree.c (following forks
 * and execs through BPF, routing events) and user/procs/proctree_roots.c (the
 * processes it starts with).
 */
#ifndef PTG_PROCTREE_INT_H
#define PTG_PROCTREE_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/u64map.h"
#include "procs/proctree_types.h"
#include "pyinterp/pyinterp.h"

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
	struct pyframe *pf; /* NULL when the frames come from elsewhere (--in-process) */
	struct py_interp py;
	dev_t dev;
	ino_t ino;
};

struct tree_proc {
	pid_t pid;
	int pidfd;	     /* processes given with -p: says when it ends; -1 for the others */
	uint64_t start_time; /* of those: proc_start_time(), 0 for the others */
	uint32_t interp;     /* index + 1 in interps; 0: not known (yet) */
	uint64_t exec_ts;    /* it exec()'d then, and its new interpreter is looked for; 0: not */
	bool exited;
	bool not_python;
	bool ran_python; /* had a supported interpreter at some point: gets a --per-process trace */
	bool py_events;	 /* a Python event of its own was routed */
	bool forked;	 /* met at its fork: its interpreter was its parent's */
	bool named;	 /* given with -p: a --per-process trace of its own, Python or not */
	bool no_hold;	 /* let go for the CUPTI agent: not held again in this image */
	bool other_tracer; /* another tracer holds it: said once */
	bool mapped_said;  /* a libpython it mapped that cannot be recorded: said once */
	bool probed;	   /* --in-process: exec'd away from its agent: its frames are probed */
	/* read while it runs, for its own trace (--per-process) */
	char *cmdline;
	char rank[24];	    /* RANK, else LOCAL_RANK: names its file */
	char dist_rank[24]; /* RANK alone: the job's rank, for export */
	char world[24];
};

/*
 * A process under our ptrace (user/procs/proctree_hold.c), by pid: one
 * pid is one live process, whichever entry of procs names it.
 */
struct tree_held {
	pid_t pid;
	bool at_exec;	       /* stopped at an exec, the new image not looked at yet */
	bool in_exec;	       /* that stop is being handled */
	bool let_go;	       /* let go once its stop is handled (the CUPTI agent's turn) */
	bool in_stop;	       /* a stop of ours at a loader notice is being handled */
	bool own;	       /* the -- CMD child: its exit status is the recording's */
	uint64_t exec_stop_ts; /* its last exec stop: an exec event before that is handled */
	uint64_t held_since;   /* seized while it ran (0: from birth, or launched) */
};

struct proctree {
	struct tracer *t;
	struct proctree_bpf *skel;
	int set_fd;
	bool children;
	bool quiet;
	bool attached;
	bool frames_elsewhere; /* probes for exec'd members only: proctree__frames_elsewhere() */
	proctree_gone_fn gone_fn;
	void *gone_ctx;
	uint32_t exec_unrecorded; /* of those: execs into a Python the probes could not take */
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
	char nopy_what[128];	  /* proctree__nopy_what() */
	proctree_exec_fn exec_fn; /* proctree__on_exec() */
	void *exec_ctx;
	proctree_nopy_fn nopy_fn; /* proctree__on_nopy() */
	void *nopy_ctx;
	struct tree_held *held;
	size_t nheld;
	struct u64map held_by_pid; /* pid -> index + 1 in held; 0: not held */
	pid_t own_pid;		   /* the -- CMD child (proctree__add()), ours: 0 if none */
	bool own_exited;	   /* its exit, reaped here */
	int own_status;
	uint32_t exec_held;    /* execs held at their stop, before the new image ran */
	uint32_t exec_unheld;  /* execs met running (joined by exec, another tracer, a thread) */
	uint32_t hold_refused; /* members another tracer holds: their execs are not held */
};

/* Held p runs no Python (on: proctree__on_nopy()), or does, or is gone (off). */
static inline void tree_nopy(struct proctree *pt, pid_t pid, bool on)
{
	if (pt->nopy_fn)
		pt->nopy_fn(pt->nopy_ctx, pid, on);
}

/* user/procs/proctree_procs.c: the set's processes, by pid */
/* Every Python event looks its process up: by a hash, not a walk of all forks so far. */
struct tree_proc *tree_find_proc(struct proctree *pt, pid_t pid);
/* A new entry for pid, the newest for it; NULL when out of memory. */
struct tree_proc *tree_new_proc(struct proctree *pt, pid_t pid, int pidfd);
/* Its command line and rank, read while it runs, for its own trace (--per-process). */
void tree_read_identity(struct tree_proc *p);

/* user/procs/proctree_hold.c: every process of the set under ptrace, its execs held. */
/* Takes every member under ptrace, once the set is filled (proctree__attach()). */
void tree_hold_all(struct proctree *pt);
/*
 * Takes p under ptrace from now on, its forks too when forks (and
 * --children); one another tracer holds is said, once.
 */
void tree_hold(struct proctree *pt, struct tree_proc *p, bool forks);
/* The held entry of pid, or NULL. */
struct tree_held *tree_held_of(struct proctree *pt, pid_t pid);
/*
 * pid's exec event was read (at exec_ts): with pid held, waits for the exec
 * stop that follows it. 1 when pid is at that stop, for tree_exec_done();
 * 2 when that exec was handled at its stop already; 0 when pid is not held
 * (any more). May move procs.
 */
int tree_exec_stop(struct proctree *pt, pid_t pid, uint64_t exec_ts);
/* The exec stop of pid is handled: it runs on, held, or is let go (let_go). */
void tree_exec_done(struct proctree *pt, pid_t pid);
/*
 * Stops held pid (launch__interrupt()), its forks meanwhile held from
 * birth: 0 at that stop or at an exec (*at_exec), else -errno (gone).
 */
int tree_stop_held(struct proctree *pt, pid_t pid, bool *at_exec);
/*
 * Stops of the held processes: forks, exits, signals, exec stops. 1 when
 * any stopped at an exec (proctree.c then reads its event and handles it
 * with tree_exec()), else 0 or -errno.
 */
int tree_poll_held(struct proctree *pt);
/* The processes still held run on untraced (the end of recording). */
void tree_release_all(struct proctree *pt);

#endif /* PTG_PROCTREE_INT_H */
