/* SPDX-License-Identifier: MIT */
/*
 * `record -- CMD`: starting a command so that probes are in place before its
 * first Python instruction. The command runs under ptrace only until the
 * interpreter is mapped (at its exec, or at a later exec of a command that
 * is no Python itself); then it is released and runs untouched.
 */
#ifndef PTG_LAUNCH_H
#define PTG_LAUNCH_H

#include <sys/types.h>

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
 * stops it before its first instruction (launch__poll). Only the thread
 * pid: an exec by another thread of a process that has several is not held.
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
/* Detaches a child under ptrace that is running; -ECHILD if it ended meanwhile (*wstatus). */
int launch__let_go(pid_t pid, int *wstatus);

#endif /* PTG_LAUNCH_H */
