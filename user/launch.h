/* SPDX-License-Identifier: MIT */
/*
 * `record -- CMD`: starting a command so that probes are in place before its
 * first Python instruction. The command runs under ptrace only until the
 * interpreter is mapped; then it is released and runs untouched.
 */
#ifndef PTG_LAUNCH_H
#define PTG_LAUNCH_H

#include <sys/types.h>

#include "pyinterp.h"

/*
 * Forks and execs argv, follows its execs (shell scripts, pyenv shims) until
 * a supported Python interpreter is mapped, and returns with the process
 * stopped there and py filled. On failure the child is killed and a one-line
 * reason is in err.
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
 * The same, but stopped at its first exec even when that is no Python
 * (record --children -- ./train.sh): then -ENOEXEC, *pid set, and the
 * caller releases it.
 */
int launch__start_any(char **argv, pid_t *pid, struct py_interp *py, char *err, size_t errlen);
/* Lets the stopped child run on, detached from ptrace. */
int launch__release(pid_t pid);

#endif /* PTG_LAUNCH_H */
