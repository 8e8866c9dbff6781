/* SPDX-License-Identifier: MIT */
/*
 * `record -- CMD`: starting a command so that probes are in place before its
 * first Python instruction. The command runs under ptrace only until the
 * interpreter is mapped (at its exec, or at a later exec of a command that
 * is no Python itself); then it is released and runs untouched.
 */
#ifndef PTG_LAUNCH_H
#define PTG_LAUNCH_H

#include <stdbool.h>
#include <sys/types.h>

#include "pyinterp/launch_threads.h"
#include "pyinterp/pyinterp.h"

/*
 * Forks and execs argv and returns with the process stopped at its exec:
 * with py filled when the command is a supported Python interpreter (mapped,
 * before its first instruction), else with py->info NULL, the libraries it
 * links mapped (the child stays under ptrace: launch__resume, launch__poll).
 * On failure the child is killed and a one-line reason is in err.
 */
int launch__start(char **argv, pid_t *pid, struct py_interp *py, char *err, size_t errlen);
/*
 * A running process that has just exec()'d (record --children): stops it
 * under ptrace, runs it past ld.so if it links libpython, and returns with
 * it stopped and py filled; launch__release() lets it go. -ENOEXEC (it runs
 * on) when it is no supported Python, another -errno when it cannot.
 */
int launch__catch(pid_t pid, struct py_interp *py, char *err, size_t errlen);
/*
 * The same, but one that is no supported Python stays held as well, run
 * past ld.so (the libraries it links mapped): -ENOEXEC with it stopped,
 * for launch__release().
 */
int launch__catch_any(pid_t pid, struct py_interp *py, char *err, size_t errlen);
/*
 * launch__start(), but -ENOEXEC (with *pid set, the child stopped at its
 * exec, for the caller to release) when the command is no Python
 * (record --children -- ./train.sh).
 */
int launch__start_any(char **argv, pid_t *pid, struct py_interp *py, char *err, size_t errlen);
/*
 * record -p: takes a running process under ptrace without stopping it
 * (PTRACE_SEIZE: no SIGSTOP, no PTRACE_O_EXITKILL), so that its next exec
 * stops it before its first instruction (launch__poll). Each of its
 * threads is taken so (those it starts later from birth), so that an exec
 * by any is held, and any can be stopped at a loader notice (SIGURG).
 * -EPERM when another tracer (strace, gdb) holds it.
 */
int launch__seize(pid_t pid);
/* Lets the stopped child run on, detached from ptrace. */
int launch__release(pid_t pid);
/* Lets the stopped child run on, still under ptrace: its next exec stops it. */
int launch__resume(pid_t pid);

#define LAUNCH_NOTHING	   0 /* nothing to report: the child runs */
#define LAUNCH_EXEC_PYTHON 1 /* stopped at an exec into Python, py filled */
#define LAUNCH_EXEC_OTHER  2 /* stopped at an exec into something else */
/*
 * Handles the stops of a child under ptrace (from launch__resume), without
 * blocking: signals are passed on to it, group stops kept. Returns one of
 * LAUNCH_*; at an exec the child stays stopped (launch__release or
 * launch__resume). -ECHILD when it ended (*wstatus: its wait status); an
 * exec into a Python that cannot be recorded: another -errno, a one-line
 * reason in err, the child stopped.
 */
int launch__poll(pid_t pid, struct py_interp *py, int *wstatus, char *err, size_t errlen);
/*
 * Thread tid of held process pid stopped by a SIGURG (its signal-delivery
 * stop): fn says whether it was one we sent to stop it, and handles it
 * before returning LAUNCH_URG_RESUME (the thread is resumed without the
 * signal) or LAUNCH_URG_RELEASE (the process let go, each thread, the
 * signal dropped: it is ours no more). Otherwise
 * (LAUNCH_URG_NOT_OURS from each fn) the signal goes on to it, as every
 * other signal does. Up to LAUNCH_URG_MAX functions, asked in the order given.
 */
enum launch_urg { LAUNCH_URG_NOT_OURS, LAUNCH_URG_RESUME, LAUNCH_URG_RELEASE };
#define LAUNCH_URG_MAX 4
typedef enum launch_urg (*launch_urg_fn)(void *ctx, pid_t pid, pid_t tid);
int launch__on_urg(launch_urg_fn fn, void *ctx);
void launch__off_urg(launch_urg_fn fn, void *ctx);
/*
 * Held process pid, stopped, is to lend its main thread (the op agent goes
 * in through it, user/inject/inject.c): its other threads are let go, and
 * those it starts from now on are not taken. Its exec still stops it.
 */
int launch__main_only(pid_t pid);
/* Detaches a child under ptrace that is running; -ECHILD if it ended meanwhile (*wstatus). */
int launch__let_go(pid_t pid, int *wstatus);

/*
 * A process of a set (record -p A,B, --children, --uid, --cgroup): taken
 * under ptrace as launch__seize() takes record -p's target, so that each
 * exec stops it before the new image's first instruction, and with forks
 * (--children) each child it forks is under ptrace from birth, its exec
 * held too. Every thread is held, as launch__seize() holds them. stopped: pid is ours already,
 * stopped at its exec (the -- CMD child of launch__start): only the options change. -EPERM: another
 * tracer holds it.
 */
int launch__hold(pid_t pid, bool forks, bool stopped);

/* LAUNCH_FORK (3, launch_threads.h): it forked, *child under ptrace from birth */
#define LAUNCH_AT_EXEC 4 /* stopped at its exec, the new image not looked at: launch__examine */
/*
 * launch__poll() for a process of launch__hold(), one stop at a time,
 * without blocking: signals and group stops passed on as launch__poll()
 * does, for each of its threads. LAUNCH_FORK: a thread of it forked.
 * -ECHILD when it ended (its exit reaped, *wstatus); -ESRCH or another
 * -errno when it is ours no more (let go at a stop of ours, or an exec by
 * a thread that could not be held took its pid, untraced).
 */
int launch__poll_held(pid_t pid, pid_t *child, int *wstatus);
/*
 * At an exec stop (LAUNCH_AT_EXEC): is the new image a Python we support?
 * Runs it past its loader when it links libpython (or to map what it
 * links when it is no Python) and fills py. LAUNCH_EXEC_PYTHON,
 * LAUNCH_EXEC_OTHER or -errno (a one-line reason in err); it stays stopped.
 */
int launch__examine(pid_t pid, struct py_interp *py, char *err, size_t errlen);
/*
 * A process of a set that exec'd before it was held (it joined the set by
 * that exec), held with launch__hold(): stopped with PTRACE_INTERRUPT, as
 * launch__catch_any() does, then launch__wait_interrupt() until it is at
 * that stop, for launch__examine(). 0 when stopped there, or at an exec
 * (*at_exec: a later one, which is a better stop); LAUNCH_FORK when it
 * forked first (*child under ptrace from birth; call it again); -ESRCH,
 * -ECHILD: it is gone.
 */
int launch__interrupt(pid_t pid);
int launch__wait_interrupt(pid_t pid, bool *at_exec, pid_t *child);
#endif /* PTG_LAUNCH_H */
