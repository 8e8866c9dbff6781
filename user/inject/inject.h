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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inject_opts {
	const char *entry;	 /* int entry(const char *arg) to call after dlopen, or NULL */
	const char *arg;	 /* its argument ("" when NULL) */
	unsigned int timeout_ms; /* for each stage (safe point, each call); 0 = 10 s */
	uint64_t start_time;	 /* of pid when the caller found it (proc_start_time), 0 = now */
	/*
	 * 0: a thread of pid is seized, stopped and let go again. Else this
	 * thread of pid is our tracee already (with PTRACE_O_TRACESYSGOOD,
	 * as launch__hold() seizes) and in a ptrace-stop: it is
	 * used where it stands, which must be a safe point (-EAGAIN if not:
	 * running it on would move it past what the caller stopped it for),
	 * and left in a ptrace-stop for the caller to resume (a signal it was
	 * stopped to deliver is dropped), unless a call that never returned
	 * made us let it go (inject_result.released).
	 */
	pid_t held_tid;
	/*
	 * The entry gets "fd:N" instead of arg: N, its end of a socketpair
	 * that the borrowed thread made (closed again in the target once entry
	 * returns: an entry that keeps it dups it), whose other end comes back
	 * in inject_result.sock. No name anyone else could connect to.
	 */
	bool pass_socket;
};

struct inject_result {
	uint64_t handle; /* dlopen()'s handle in the target; 0 when found loaded (memfd) */
	uint64_t bias;	 /* the library's load bias in the target */
	int entry_ret;	 /* what entry returned */
	bool via_copy;	 /* inject_library_fd(): loaded from a copy in the target's /tmp... */
	bool released;	 /* held_tid: let go (it is ours no more) */
	int sock;	 /* pass_socket: our end (SOCK_CLOEXEC), -1 when none */
};

/*
 * Loads lib_path (a path as the target sees it) into pid. Returns 0, or a
 * negative errno with a one-line reason in err; in both cases the target's
 * registers, signal state and the memory written are restored and it runs
 * on. -ESRCH: the process exited meanwhile.
 */
int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen);

/*
 * Loads the library open at fd here (checked by trusted_open()) into pid
 * without anyone opening a path the target's file system could have
 * planted: the target makes a memfd of its own (memfd_create through the
 * borrowed thread), we write fd's bytes into it through a duplicate of the
 * target's own descriptor (pidfd_getfd) and seal it, and the target
 * dlopen()s "/proc/self/fd/N", which names its own descriptor in whatever
 * pid namespace it is. The entry's address is read off fd. When the
 * target's /proc is not procfs, or it cannot make or load the memfd, the
 * target loads a copy in its /tmp, /dev/shm or /var/tmp (lib_copy__new()) as
 * a second try. name: the library's file name (the memfd is named
 * "ptg-<content hash>.<name>", so a second load finds it mapped). Returns
 * as inject_library().
 */
int inject_library_fd(pid_t pid, int fd, const char *name, const struct inject_opts *opts,
		      struct inject_result *res, char *err, size_t errlen);

#endif /* PTG_INJECT_H */
