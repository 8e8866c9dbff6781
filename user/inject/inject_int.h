/* SPDX-License-Identifier: MIT */
/*
 * What user/inject/inject.c (the borrowed thread), user/inject/inject_syms.c (the
 * functions it calls) and user/inject/inject_memfd.c (the library handed over
 * in a memfd of the target's own, through inject.c) share. Not an API.
 */
#ifndef PTG_INJECT_INT_H
#define PTG_INJECT_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>

struct region {
	uint64_t lo, hi;
};

struct target;
struct inject_src;
struct inject_opts;   /* inject.h */
struct inject_result; /* inject.h */

/*
 * The memfd route's own steps (inject_memfd.c, which uses inject.c and so
 * hands them down in its inject_src): parked, with src->memfd_name at
 * t->str_a, place() makes the memfd and writes its path there; after dlopen
 * of it, check_loaded() tells that the mapping at the handle's bias is that
 * memfd.
 */
struct inject_memfd_ops {
	int (*place)(struct target *t, struct inject_src *src);
	int (*check_loaded)(struct target *t, const struct inject_src *src, uint64_t bias);
};

/* The library to load: a path the target opens, or bytes it gets in a memfd. */
/*
 * The memfd route's path for the target's dlopen(): /proc/self/fd/, then one
 * of "./" or "../fd/" for each of INJECT_PATH_BITS bits of the library's
 * hash, then the fd. dlopen() returns an object already loaded under the
 * same name before it opens anything: a memfd of another library (the CUPTI
 * agent after the Python one) that once had the same fd number would be
 * found instead.
 */
#define INJECT_PATH_BITS   16
#define INJECT_FD_PATH_MAX (sizeof("/proc/self/fd/2147483647") + INJECT_PATH_BITS * 6)

struct inject_src {
	const char *path;		      /* as the target sees it; NULL: the memfd route */
	const struct inject_memfd_ops *memfd; /* the memfd route's steps */
	int fd;		      /* the library here, or -1 (then path through /proc/PID/root) */
	const uint8_t *bytes; /* the memfd route: fd's content */
	size_t len;
	char memfd_name[96];  /* the memfd route: "ptg-<content hash>.<name>" */
	uint64_t hash;	      /* the memfd route: of the content */
	uint64_t loaded_bias; /* the memfd route: that memfd is mapped already, at this bias */
	bool fallback;	      /* the memfd route failed before loading anything: a copy may do */
};

struct target {
	pid_t pid, tid;
	int memfd;
	int tfd;			/* the target's fd of our memfd, -1 when none */
	int tsock[2];			/* pass_socket: the target's fds of the pair, -1 */
	uint64_t start_time;		/* of pid: another process with its pid is not it */
	uint64_t dlopen_fn, dlerror_fn; /* dlerror_fn = 0 with __libc_dlopen_mode */
	uint64_t restorer;		/* libc's __restore_rt */
	struct region libc_text, ldso_text;
	bool seized, saved, parked;
	bool held;		      /* inject_opts.held_tid: the caller's tracee, left stopped */
	bool released;		      /* held, and let go all the same (abandon()) */
	bool running;		      /* resumed, not seen stopped since */
	struct user_regs_struct regs; /* as they were when we stopped the thread */
	uint64_t sigmask;
	struct iovec xstate;
	uint64_t uc;	       /* our frame's ucontext: rsp while parked */
	uint64_t stub;	       /* our page in the target, 0 when none */
	uint64_t str_a, str_b; /* the strings written with the frame */
	uint64_t scratch;      /* lowest byte we wrote on the stack */
	uint8_t *old_mem;      /* the bytes it had */
	size_t old_len;
	unsigned int timeout_ms;
	char *err;
	size_t errlen;
};

enum stop_wanted {
	PARKED,	      /* the next entry of our rt_sigreturn */
	SYSCALL_EXIT, /* the end of the system call the thread is in */
};

/* The first reason given sticks: later failures are its consequences. */
static inline int inject_fail(struct target *t, int ret, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int inject_fail(struct target *t, int ret, const char *fmt, ...)
{
	va_list ap;

	if (t->err[0])
		return ret;
	va_start(ap, fmt);
	vsnprintf(t->err, t->errlen, fmt, ap);
	va_end(ap);
	return ret;
}
int inject_mem_write(struct target *t, uint64_t addr, const void *buf, size_t len);
int inject_run_to(struct target *t, enum stop_wanted want, struct user_regs_struct *r);
/* Parked: system call nr(a0..a2) in the thread, then parked again; its result in *ret. */
int inject_syscall(struct target *t, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *ret);
int inject_run(pid_t pid, struct inject_src *src, const struct inject_opts *opts,
	       struct inject_result *res, char *err, size_t errlen);

/* The target's fd tfd, which it has just made, as a descriptor of ours (pidfd_getfd). */
int inject_target_fd(struct target *t, int tfd);

/* inject_syms.c: dlopen, dlerror and the signal trampoline in the target's libc. */
int inject_find_functions(struct target *t);

#endif /* PTG_INJECT_INT_H */
