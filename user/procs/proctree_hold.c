// SPDX-License-Identifier: MIT
/*
 * Every process of a set under ptrace, as record -p holds its one target
 * (user/pyinterp/launch.c): seized without a stop and without
 * PTRACE_O_EXITKILL, so that each exec stops it before the new image's
 * first instruction while its interpreter and libraries are probed, and
 * (--children) each child it forks is under ptrace from birth, its exec
 * held as well. A kill -9 of the recorder lets each of them run on,
 * untraced: the kernel ends the ptrace stops of a tracer that died.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "proc/procfs.h"
#include "procs/proctree_int.h"
#include "pyinterp/launch.h"
#include "tracer/tracer.h"

/*
 * How long an exec event may wait for the exec stop that follows it: the
 * process is between the two, in the kernel, so this is a bound, not a delay.
 */
#define EXEC_STOP_WAIT_NS 1000000000ull

struct tree_held *tree_held_of(struct proctree *pt, pid_t pid)
{
	uint64_t *i = u64map__get(&pt->held_by_pid, (uint64_t)pid);

	return i && *i ? &pt->held[*i - 1] : NULL;
}

static struct tree_held *held_add(struct proctree *pt, pid_t pid)
{
	struct tree_held *n = tree_held_of(pt, pid);

	if (n)
		return n;
	n = realloc(pt->held, (pt->nheld + 1) * sizeof(*n));
	if (!n)
		return NULL;
	pt->held = n;
	if (u64map__put(&pt->held_by_pid, (uint64_t)pid, pt->nheld + 1))
		return NULL;
	n = &pt->held[pt->nheld++];
	*n = (struct tree_held){.pid = pid};
	return n;
}

/* pid is ours no more (ended, let go, lost): the last entry takes its place. */
static void held_remove(struct proctree *pt, pid_t pid)
{
	uint64_t *i = u64map__get(&pt->held_by_pid, (uint64_t)pid);
	size_t at;

	if (!i || !*i)
		return;
	tree_nopy(pt, pid, false);
	at = *i - 1;
	*i = 0;
	if (at != --pt->nheld) {
		pt->held[at] = pt->held[pt->nheld];
		u64map__put(&pt->held_by_pid, (uint64_t)pt->held[at].pid, at + 1);
	}
}

/* "pid T (comm)" of the tracer that holds pid, for the one warning; 0 when none does. */
static int name_tracer(pid_t pid, char *buf, size_t len)
{
	char comm[32] = "?";
	int tp = proc_tracer_pid(pid);

	if (tp > 0)
		proc_comm(tp, tp, comm, sizeof(comm));
	snprintf(buf, len, "pid %d, %s", tp, comm);
	return tp;
}

void tree_hold(struct proctree *pt, struct tree_proc *p, bool forks)
{
	struct tree_held *h;
	char who[64];
	int ret, tp;

	if (p->exited || p->no_hold || tree_held_of(pt, p->pid))
		return;
	ret = launch__hold(p->pid, forks && pt->children, false);
	if (!ret) {
		h = held_add(pt, p->pid);
		if (!h)
			launch__release(p->pid); /* out of memory: as if it could not be held */
		else
			h->held_since = now_ns(CLOCK_MONOTONIC);
		if (h && !p->interp)
			tree_nopy(pt, p->pid, true);
		return;
	}
	if (ret != -EPERM || p->other_tracer)
		return; /* ESRCH: it ended, its exit event says so */
	tp = name_tracer(p->pid, who, sizeof(who));
	/* ours already: born under ptrace, its parent's fork stop not read yet */
	if (tp == getpid()) {
		if (held_add(pt, p->pid) && !p->interp)
			tree_nopy(pt, p->pid, true);
		return;
	}
	/* EPERM with no tracer: it is exiting, and its exit event says so */
	if (tp <= 0)
		return;
	p->other_tracer = true;
	pt->hold_refused++;
	pr_warn("pid %d is under another tracer (%s): its execs are not held, what it execs "
		"is recorded from when it is found and its first calls may be missing",
		p->pid, who);
}

/* The thread that runs the recorder's loop (tree_hold_all()). */
static pid_t loop_tid;

static void on_sigchld(int sig)
{
	int saved = errno;

	/* another thread took it (the CUPTI reader): the loop to wake is on loop_tid */
	if (loop_tid && (pid_t)syscall(SYS_gettid) != loop_tid)
		syscall(SYS_tgkill, getpid(), loop_tid, sig);
	errno = saved;
}

void tree_hold_all(struct proctree *pt)
{
	struct sigaction sa = {.sa_handler = on_sigchld};
	struct tree_held *h;

	/*
	 * Each stop of a held process (a fork waits for us) sends SIGCHLD: it
	 * ends the recorder's wait at once (tracer__wake_on()) instead of at
	 * its next timeout.
	 */
	loop_tid = (pid_t)syscall(SYS_gettid);
	sigaction(SIGCHLD, &sa, NULL);
	if (tracer__wake_on(pt->t, SIGCHLD))
		pr_warn("proctree: the recorder's wait is not woken by its held processes' stops: "
			"each may wait up to its poll interval");
	for (size_t i = 0; i < pt->nprocs; i++) {
		struct tree_proc *p = &pt->procs[i];

		if (pt->own_pid != p->pid) {
			tree_hold(pt, p, true);
			continue;
		}
		/* the -- CMD child is ours already, stopped at its exec: forks are added */
		launch__hold(p->pid, pt->children, true);
		h = held_add(pt, p->pid);
		if (h)
			h->own = true;
		if (h && !p->interp)
			tree_nopy(pt, p->pid, true);
	}
}

/*
 * A held process forked: the child is under ptrace from birth, stopped
 * before its first instruction. A child the set does not have (full) is
 * let go at once.
 */
static void on_fork(struct proctree *pt, pid_t child)
{
	__u32 key = (__u32)child;
	__u8 one;

	if (bpf_map_lookup_elem(pt->set_fd, &key, &one) || !held_add(pt, child))
		launch__drop_new(child);
}

int tree_stop_held(struct proctree *pt, pid_t pid, bool *at_exec)
{
	pid_t child = 0;
	int ret = launch__interrupt(pid);

	while (!ret) {
		ret = launch__wait_interrupt(pid, at_exec, &child);
		if (ret != LAUNCH_FORK)
			break;
		on_fork(pt, child);
		ret = 0;
	}
	return ret;
}

/* A held process ended, or is ours no more. */
static void on_gone(struct proctree *pt, struct tree_held *h, int ret, int wstatus)
{
	if (ret == -ECHILD && h->own) {
		pt->own_exited = true;
		pt->own_status = wstatus;
	}
	held_remove(pt, h->pid);
}

/* One poll of pid: 1 when it stopped at an exec, 0 when nothing is left to read, -1 when gone. */
static int poll_one(struct proctree *pt, pid_t pid)
{
	struct tree_held *h;
	pid_t child = 0;
	int ret, wstatus = 0;

	for (;;) {
		h = tree_held_of(pt, pid);
		if (!h)
			return -1;
		if (h->at_exec)
			return 1;
		ret = launch__poll_held(pid, &child, &wstatus);
		if (ret == LAUNCH_NOTHING)
			return 0;
		if (ret == LAUNCH_FORK) {
			on_fork(pt, child);
			continue;
		}
		h = tree_held_of(pt, pid);
		if (ret == LAUNCH_AT_EXEC) {
			h->at_exec = true;
			h->exec_stop_ts = now_ns(CLOCK_MONOTONIC);
			return 1;
		}
		on_gone(pt, h, ret, wstatus);
		return -1;
	}
}

static void sleep_us(long us)
{
	struct timespec ts = {0, us * 1000};

	nanosleep(&ts, NULL);
}

int tree_exec_stop(struct proctree *pt, pid_t pid, uint64_t exec_ts)
{
	uint64_t end = now_ns(CLOCK_MONOTONIC) + EXEC_STOP_WAIT_NS;
	struct tree_held *h = tree_held_of(pt, pid);
	int ret;

	if (!h)
		return 0;
	/* stopped at an exec after this event's: that stop handled this exec */
	if (!h->at_exec && h->exec_stop_ts > exec_ts)
		return 2;
	/* held only after this exec (met at its fork event): caught as it runs */
	if (!h->at_exec && h->held_since > exec_ts)
		return 0;
	for (;;) {
		ret = poll_one(pt, pid);
		if (ret)
			return ret > 0 ? 1 : 0;
		if (now_ns(CLOCK_MONOTONIC) > end)
			return 0; /* its stop, when it comes, is handled by tree_poll_held() */
		sleep_us(50);
	}
}

void tree_exec_done(struct proctree *pt, pid_t pid)
{
	struct tree_held *h = tree_held_of(pt, pid);

	if (!h)
		return;
	h->at_exec = h->in_exec = false;
	h->exec_stop_ts = now_ns(CLOCK_MONOTONIC);
	if (!h->let_go) {
		/* ESRCH: killed meanwhile, its exit is the next status */
		launch__resume(pid);
		return;
	}
	launch__release(pid);
	held_remove(pt, pid);
}

int tree_poll_held(struct proctree *pt)
{
	bool stopped = false;
	size_t before;

	/* by pid, from the end: a process gone takes the last one's place; again for new children
	 */
	do {
		before = pt->nheld;
		for (size_t i = pt->nheld; i-- > 0;) {
			if (i < pt->nheld && poll_one(pt, pt->held[i].pid) > 0)
				stopped = true;
		}
	} while (pt->nheld > before);
	return stopped ? 1 : 0;
}

void tree_release_all(struct proctree *pt)
{
	int wstatus, ret;

	while (pt->nheld) {
		struct tree_held *h = &pt->held[pt->nheld - 1];

		if (h->at_exec)
			ret = launch__release(h->pid);
		else
			ret = launch__let_go(h->pid, &wstatus);
		if (ret == -ECHILD && h->own) {
			pt->own_exited = true;
			pt->own_status = wstatus;
		}
		held_remove(pt, h->pid);
	}
}

void proctree__let_go(struct proctree *pt, pid_t pid)
{
	struct tree_held *h = tree_held_of(pt, pid);
	struct tree_proc *p = tree_find_proc(pt, pid);
	int wstatus, ret;

	if (p)
		p->no_hold = true;
	if (!h)
		return;
	if (h->in_exec || h->at_exec || h->in_stop) {
		h->let_go = true;
		return;
	}
	ret = launch__let_go(pid, &wstatus);
	on_gone(pt, h, ret == -ECHILD ? ret : 0, wstatus);
	pr_debug("pid %d maps the CUDA driver: its execs are no longer held", pid);
}

void proctree__stop_begin(struct proctree *pt, pid_t pid)
{
	struct tree_held *h = tree_held_of(pt, pid);

	if (h)
		h->in_stop = true;
}

bool proctree__stop_end(struct proctree *pt, pid_t pid)
{
	struct tree_held *h = tree_held_of(pt, pid);

	if (!h)
		return false;
	h->in_stop = false;
	return h->let_go;
}

bool proctree__reap(struct proctree *pt, pid_t pid, int *wstatus)
{
	if (pt->own_exited) {
		*wstatus = pt->own_status;
		return true;
	}
	/* while held, its stops and its end are read by tree_poll_held() alone */
	if (tree_held_of(pt, pid))
		return false;
	return waitpid(pid, wstatus, WNOHANG) == pid;
}
