// SPDX-License-Identifier: MIT
/*
 * The other threads of a held process, each under ptrace as its main thread
 * is (launch.c): a thread that maps a library from off its search path stops
 * at the loader's notice as the main thread does (bpf/hold.bpf.h), and one
 * that execs is stopped at the exec. The threads there at the hold are
 * seized one by one; those started later are ours from birth
 * (PTRACE_O_TRACECLONE). Their stops are handled as the main thread's are:
 * signals passed on, group stops kept. A kill -9 of the recorder lets each
 * of them run on, as it does the main thread. Below launch.c: the stops
 * that every thread has (waiting for one, passing one on, a fork, a child
 * let go at birth) are here too, and launch.c hands its handler of our
 * SIGURG stops down to threads_poll().
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/array.h"
#include "proc/procfs.h"
#include "pyinterp/launch_threads.h"

/* Waits for the next stop of pid. */
int launch_wait_stop(pid_t pid, int *status)
{
	for (;;) {
		/* EINTR: the SIGCHLD handler of a held child (target.c) ran */
		if (waitpid(pid, status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (WIFEXITED(*status) || WIFSIGNALED(*status))
			return -ECHILD;
		if (WIFSTOPPED(*status)) {
			threads_note_clone(pid, pid, *status);
			return 0;
		}
	}
}

/* The signal a stop holds for the child: none for events and system-call stops. */
int launch_stop_signal(int status)
{
	return (status >> 16) || WSTOPSIG(status) == SYSCALL_STOP ? 0 : WSTOPSIG(status);
}

int launch_cont(pid_t pid, int request, int sig)
{
	return ptrace(request, pid, 0, (void *)(long)sig) ? -errno : 0;
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/*
 * One stop of a held child that is no exec: a signal goes on to it at once
 * (held, it waits for us to pass it); a group stop stays a stop, as it would
 * untraced (PTRACE_LISTEN: SIGCONT still ends it).
 */
int launch_forked(pid_t tid, pid_t *child)
{
	unsigned long msg = 0;
	int ret;

	if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg))
		msg = 0;
	*child = (pid_t)msg;
	ret = launch_cont(tid, PTRACE_CONT, 0);
	if (ret && ret != -ESRCH)
		return ret;
	return msg ? LAUNCH_FORK : 0;
}

int launch_pass_stop(pid_t pid, int status)
{
	if ((status >> 16) == PTRACE_EVENT_STOP)
		return is_stop_signal(WSTOPSIG(status)) ? launch_cont(pid, PTRACE_LISTEN, 0)
							: launch_cont(pid, PTRACE_CONT, 0);
	return launch_cont(pid, PTRACE_CONT, launch_stop_signal(status));
}

int launch__drop_new(pid_t pid)
{
	int status, ret;

	ret = launch_wait_stop(pid, &status);
	if (ret)
		return ret;
	return ptrace(PTRACE_DETACH, pid, 0, (void *)(long)launch_stop_signal(status)) ? -errno : 0;
}

/* Enough passes over /proc/PID/task to take the threads started while it is read. */
#define SEIZE_PASSES 16

struct proc_threads {
	pid_t pid;
	pid_t *tids;
	size_t n, cap;
};

static struct proc_threads *procs;
static size_t nprocs, procs_cap;

static struct proc_threads *threads_of(pid_t pid, bool add)
{
	for (size_t i = 0; i < nprocs; i++) {
		if (procs[i].pid == pid)
			return &procs[i];
	}
	if (!add || array_grow((void **)&procs, &procs_cap, nprocs + 1, sizeof(*procs)))
		return NULL;
	procs[nprocs] = (struct proc_threads){.pid = pid};
	return &procs[nprocs++];
}

static bool has_tid(const struct proc_threads *pt, pid_t tid)
{
	for (size_t i = 0; i < pt->n; i++) {
		if (pt->tids[i] == tid)
			return true;
	}
	return false;
}

/* -ENOMEM: a thread ours from birth that no one would resume; the caller lets it go. */
static int add_tid(pid_t pid, pid_t tid)
{
	struct proc_threads *pt = threads_of(pid, true);

	if (!pt || (!has_tid(pt, tid) &&
		    array_grow((void **)&pt->tids, &pt->cap, pt->n + 1, sizeof(*pt->tids))))
		return -ENOMEM;
	if (!has_tid(pt, tid))
		pt->tids[pt->n++] = tid;
	return 0;
}

static void remove_at(struct proc_threads *pt, size_t i)
{
	pt->tids[i] = pt->tids[--pt->n];
}

void threads_forget(pid_t pid)
{
	struct proc_threads *pt = threads_of(pid, false);

	if (!pt)
		return;
	free(pt->tids);
	*pt = procs[--nprocs];
}

/* One pass over /proc/PID/task: how many threads it took. */
static int seize_pass(pid_t pid, long opts)
{
	char path[64];
	struct dirent *d;
	int added = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		struct proc_threads *pt = threads_of(pid, false);
		pid_t tid = (pid_t)strtol(d->d_name, NULL, 10);

		if (tid <= 0 || tid == pid || (pt && has_tid(pt, tid)))
			continue;
		/* EPERM, ours: started by one we had seized already */
		if (ptrace(PTRACE_SEIZE, tid, 0, (void *)opts) &&
		    (errno != EPERM || proc_tracer_pid(tid) != getpid()))
			continue; /* gone, or another tracer's: it runs on unheld */
		if (add_tid(pid, tid)) {
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
			launch__drop_new(tid);
			break;
		}
		added++;
	}
	closedir(dir);
	return added;
}

int threads_seize(pid_t pid, long opts)
{
	int added = 1;

	/* threads the unseized ones start meanwhile are not ours from birth: another pass */
	for (int pass = 0; added > 0 && pass < SEIZE_PASSES; pass++)
		added = seize_pass(pid, opts);
	return added < 0 && added != -ENOENT ? added : 0;
}

void threads_note_clone(pid_t pid, pid_t tid, int status)
{
	unsigned long msg = 0;

	if ((status >> 16) != PTRACE_EVENT_CLONE || ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) ||
	    !msg)
		return;
	/* no room to keep it: let it go now rather than leave it stopped at birth */
	if (add_tid(pid, (pid_t)msg))
		launch__drop_new((pid_t)msg);
}

/* A stop that was only looked at (WNOWAIT): a signal for the thread, or 0 for an event. */
static int peeked_signal(const siginfo_t *si)
{
	if (si->si_code != CLD_TRAPPED || (si->si_status >> 8) || si->si_status == SYSCALL_STOP)
		return 0;
	return si->si_status;
}

/* One event stop of thread tid, taken: LAUNCH_FORK with *child, 0, or -errno. */
static int thread_event(pid_t pid, pid_t tid, int status, pid_t *child)
{
	int ev = status >> 16, ret;

	threads_note_clone(pid, tid, status);
	if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK)
		return launch_forked(tid, child);
	ret = launch_pass_stop(tid, status);
	return ret && ret != -ESRCH ? ret : 0;
}

int threads_poll(pid_t pid, pid_t *child, int *wstatus, launch_our_urg_fn our_urg)
{
	struct proc_threads *pt = threads_of(pid, false);
	int status, ret;

	for (size_t i = 0; pt && i < pt->n; i++) {
		pid_t tid = pt->tids[i];
		siginfo_t si = {};
		int sig;

		/* a signal only looked at, as the main thread's (launch.c peek_signal()) */
		if (waitid(P_PID, (id_t)tid, &si,
			   WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL)) {
			remove_at(pt, i--); /* no such tracee: it exec'd (the pid is its now) */
			continue;
		}
		if (!si.si_pid)
			continue;
		sig = peeked_signal(&si);
		if (sig == SIGURG && (ret = our_urg(pid, tid, wstatus))) {
			if (ret != URG_RESUMED)
				return ret; /* let go, or ended: its table is gone */
			pt = threads_of(pid, false);
			continue;
		}
		if (sig) {
			ret = launch_cont(tid, PTRACE_CONT, sig);
			if (ret && ret != -ESRCH)
				return ret;
			continue;
		}
		if (waitpid(tid, &status, WNOHANG | __WALL) != tid)
			continue;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			remove_at(pt, i--);
			continue;
		}
		ret = thread_event(pid, tid, status, child);
		if (ret)
			return ret;
		pt = threads_of(pid, false); /* a new thread may have moved the table */
	}
	return 0;
}

/*
 * Thread tid of pid, stopped at event ev, is let go: a thread it started
 * goes in its turn (noted), a child it forked (under ptrace from birth)
 * goes now, as launch__let_go() does for the main thread.
 */
static void let_go_event(pid_t pid, pid_t tid, int ev, int sig)
{
	unsigned long child = 0;

	threads_note_clone(pid, tid, ev << 16);
	if ((ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) &&
	    !ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) && child)
		launch__drop_new((pid_t)child);
	ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
}

/* Detaches tid, stopped first if it runs, with the signal it stopped for. */
static void release_one(pid_t pid, pid_t tid)
{
	siginfo_t si = {};
	int status;

	if (!waitid(P_PID, (id_t)tid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL) &&
	    si.si_pid && si.si_code == CLD_TRAPPED) {
		let_go_event(pid, tid, si.si_status >> 8, peeked_signal(&si));
		return;
	}
	/* a running tracee cannot be detached */
	if (!si.si_pid && ptrace(PTRACE_INTERRUPT, tid, 0, 0) && errno != ESRCH)
		return;
	for (;;) {
		if (waitpid(tid, &status, __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return;
		if (WIFSTOPPED(status))
			break;
	}
	let_go_event(pid, tid, status >> 16, launch_stop_signal(status));
}

void threads_release(pid_t pid, pid_t keep)
{
	struct proc_threads *pt;

	/* a thread started meanwhile (noted at a clone stop) is let go in its turn */
	for (size_t i = 0; (pt = threads_of(pid, false)) && i < pt->n; i++) {
		if (pt->tids[i] != keep)
			release_one(pid, pt->tids[i]);
	}
	threads_forget(pid);
}
