/* SPDX-License-Identifier: MIT */
/*
 * Loading a shared library into a running process through ptrace: borrow
 * one thread, make it call dlopen() (and optionally one function of the
 * library), put everything back, detach. `record -p` loads the CUPTI agent
 * this way; `ptrace-gpu inject` exposes it as a diagnostic. How it stays
 * safe for the target is described in docs/gpu.md.
 */
#ifndef PTG_INJECT_H
#define PTG_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inject_opts {
	const char *entry;	 /* int entry(const char *arg) to call after dlopen, or NULL */
	const char *arg;	 /* its argument ("" when NULL) */
	unsigned int timeout_ms; /* for each stage (safe point, each call); 0 = 10 s */
	uint64_t start_time;	 /* of pid when the caller found it (proc_start_time), 0 = now */
};

struct inject_result {
	uint64_t handle; /* dlopen()'s handle in the target */
	int entry_ret;	 /* what entry returned */
};

/*
 * Loads lib_path (a path as the target sees it) into pid. Returns 0, or a
 * negative errno with a one-line reason in err; in both cases the target's
 * registers, signal state and the memory written are restored and it runs
 * on. -ESRCH: the process exited meanwhile.
 */
int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen);

#endif /* PTG_INJECT_H */
