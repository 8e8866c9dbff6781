/* SPDX-License-Identifier: MIT */
/*
 * The recorder's open-file limit. Each uprobe that is not part of a
 * uprobe_multi link (kernels before 6.6) holds a perf event fd: the ops of
 * one libtorch alone are ~6,000, past the 1,024 that shells and services
 * usually leave a process (and the 4,096 hard limit of a bare init). So the
 * limit goes up at start, as far as the kernel allows a privileged process
 * (fs.nr_open), and a command that record starts gets the limits the user
 * gave ptrace-gpu, not ours.
 */
#ifndef PTG_FDLIMIT_H
#define PTG_FDLIMIT_H

/* Raises RLIMIT_NOFILE as far as allowed, remembering the original; quiet when it cannot. */
void fdlimit_raise(void);

/* Puts back the limit fdlimit_raise() found: for a child, before its exec. */
void fdlimit_restore(void);

#endif /* PTG_FDLIMIT_H */
