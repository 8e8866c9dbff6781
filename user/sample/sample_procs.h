/* SPDX-License-Identifier: MIT */
/* user/sample/sample_procs.c: the sampled processes, found, added and ended. */
#ifndef PTG_SAMPLE_PROCS_H
#define PTG_SAMPLE_PROCS_H

#include "sample/sample_int.h"

struct sproc *sampler_proc(struct sampler *s, uint32_t tgid);
/*
 * Starts sampling pid. Returns 0, or a negative errno with the reason in
 * err: -ENOEXEC not Python, -EPROTONOSUPPORT an unsupported version.
 */
int sampler_add_pid(struct sampler *s, pid_t pid, char *err, size_t errlen);
/* -a: every Python process not seen yet, or that ran exec since. */
void sampler_scan_all(struct sampler *s);
/* Ended processes leave the BPF map (their pid may come back as another program). */
void sampler_check_exits(struct sampler *s);

#endif /* PTG_SAMPLE_PROCS_H */
