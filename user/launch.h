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
/* Lets the stopped child run on, detached from ptrace. */
int launch__release(pid_t pid);

#endif /* PTG_LAUNCH_H */
