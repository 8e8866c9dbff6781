// SPDX-License-Identifier: MIT
/*
 * dlopen() in a running process, through ptrace, x86-64 only. One thread is
 * borrowed (the main thread, or the first live one): the others keep
 * running, so a lock that one of them holds and that dlopen() needs (the
 * malloc arenas, the loader's lock) is released as usual instead of
 * deadlocking the call. The borrowed thread is only used at a safe point:
 * outside ld.so, and outside libc unless blocked in a waiting system call,
 * so it holds no lock that dlopen() takes.
 *
 * Whoever dies, the thread gets its own state back. Before any register is
 * changed, a signal frame is written below its red zone: a ucontext with the
 * registers, the signal mask and the XSAVE area as they were, the frame
 * that rt_sigreturn reads. From then on the thread only ever runs toward
 * libc's signal trampoline (__restore_rt: mov $15,%rax; syscall) over that
 * frame: "parked" there, or in a call whose return address is a stub that
 * ends in the same two instructions. With ptrace-gpu alive, each of those
 * rt_sigreturn calls is caught at its syscall-entry stop and turned into
 * the next step; were ptrace-gpu killed, the kernel lets it run and
 * rt_sigreturn puts the thread back as it was. No code of the program is
 * patched.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "inject/inject.h"
#include "inject/inject_int.h"
#include "inject/sigframe.h"
#include "proc/elf_file.h"
#include "proc/procfs.h"

#ifdef __x86_64__

#define RED_ZONE	   128	      /* the x86-64 ABI's scratch area below rsp */
#define XSTATE_MAX	   (64 << 10) /* room for the largest XSAVE area (AMX included) */
#define MAX_STR		   4096	      /* longest path or argument written into the target */
#define DEFAULT_TIMEOUT_MS 10000
#define RTLD_NOW_	   0x2		    /* <dlfcn.h>'s value on Linux */
#define SYSCALL_STOP	   (SIGTRAP | 0x80) /* with PTRACE_O_TRACESYSGOOD */
#define SC_INFO_ENTRY	   1 /* <linux/ptrace.h>, which clashes with <sys/ptrace.h> */
#define PAGE		   4096
#define SOCK_ARG_ROOM	   "fd:-2147483648" /* pass_socket: room for the entry's "fd:N" */

/* where a call returns: mov %rax,%r12, then the same rt_sigreturn as libc's __restore_rt */
static const uint8_t stub_code[] = {0x49, 0x89, 0xc4, 0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static bool in_region(const struct region *r, uint64_t addr)
{
	return addr >= r->lo && addr < r->hi;
}

/* The main thread, or the first thread that is not a zombie (the main one may have exited). */
static pid_t pick_thread(pid_t pid)
{
	char path[320], buf[256], *p;
	struct dirent *d;
	pid_t tid = pid;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return pid;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", pid, d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (p && p[1] && p[2] != 'Z' && p[2] != 'X') {
			tid = atoi(d->d_name);
			if (tid == pid)
				break;
		}
	}
	closedir(dir);
	return tid;
}

/*
 * Waits for the next stop of the borrowed thread. Returns 0 with *status,
 * -ESRCH if it exited, -ETIMEDOUT at the deadline.
 */
/*
 * A thread started while we run the target's (the agent's own): under ptrace
 * from birth where the holder takes a process's new threads
 * (PTRACE_O_TRACECLONE, user/pyinterp/launch_threads.c), and no one of
 * ours would resume it. It is let go at its first stop.
 */
static void let_go_clone(const struct target *t, int status, uint64_t deadline)
{
	unsigned long tid = 0;
	int st;

	if ((status >> 16) != PTRACE_EVENT_CLONE || ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &tid) ||
	    !tid)
		return;
	for (;;) {
		pid_t w = waitpid((pid_t)tid, &st, __WALL | WNOHANG);

		if (w == (pid_t)tid && WIFSTOPPED(st)) {
			ptrace(PTRACE_DETACH, (pid_t)tid, 0, 0);
			return;
		}
		if ((w < 0 && errno != EINTR) || w == (pid_t)tid ||
		    now_ms(CLOCK_MONOTONIC) >= deadline)
			return;
		sleep_ms(1);
	}
}

static int wait_stop(struct target *t, int *status, uint64_t deadline)
{
	pid_t w;

	for (;;) {
		w = waitpid(t->tid, status, __WALL | WNOHANG);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == ECHILD ? -ESRCH : -errno;
		if (w == t->tid && (WIFEXITED(*status) || WIFSIGNALED(*status)))
			return -ESRCH;
		if (w == t->tid && WIFSTOPPED(*status)) {
			let_go_clone(t, *status, deadline);
			return 0;
		}
		if (now_ms(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		sleep_ms(1);
	}
}

/* The signal of a signal-delivery-stop, 0 for the other stops (events, system calls). */
static int stop_signal(int status)
{
	return (status >> 16) || WSTOPSIG(status) == SYSCALL_STOP ? 0 : WSTOPSIG(status);
}

/* Stops the thread wherever it is. */
static int interrupt(struct target *t)
{
	uint64_t deadline = now_ms(CLOCK_MONOTONIC) + t->timeout_ms;
	int status, err;

	if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0))
		return -errno;
	for (;;) {
		err = wait_stop(t, &status, deadline);
		if (err)
			return err;
		if ((status >> 16) == PTRACE_EVENT_STOP)
			return 0;
		/* a signal arrived first: the thread still runs its own code, deliver it */
		if (ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)stop_signal(status)))
			return -errno;
	}
}

/* System calls that wait, made with no lock of libc or ld.so held. */
static bool waiting_syscall(long nr)
{
	static const long ok[] = {
	    SYS_read,
	    SYS_write,
	    SYS_readv,
	    SYS_writev,
	    SYS_pread64,
	    SYS_poll,
	    SYS_ppoll,
	    SYS_select,
	    SYS_pselect6,
	    SYS_epoll_wait,
	    SYS_epoll_pwait,
	    SYS_nanosleep,
	    SYS_clock_nanosleep,
	    SYS_futex,
	    SYS_wait4,
	    SYS_waitid,
	    SYS_accept,
	    SYS_accept4,
	    SYS_recvfrom,
	    SYS_recvmsg,
	    SYS_sendto,
	    SYS_sendmsg,
	    SYS_connect,
	    SYS_pause,
	    SYS_rt_sigsuspend,
	    SYS_rt_sigtimedwait,
	    SYS_sched_yield,
	    SYS_ioctl,
	    SYS_epoll_pwait2,
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		if (ok[i] == nr)
			return true;
	}
	return false;
}

static bool safe_point(const struct target *t, const struct user_regs_struct *r)
{
	if (in_region(&t->ldso_text, r->rip))
		return false;
	if ((long)r->orig_rax >= 0)
		return waiting_syscall((long)r->orig_rax);
	return !in_region(&t->libc_text, r->rip);
}

/* Lets the thread run a little until it stops at a safe point. */
static int reach_safe_point(struct target *t)
{
	uint64_t deadline = now_ms(CLOCK_MONOTONIC) + t->timeout_ms;
	int err;

	for (unsigned int wait = 1;; wait = wait < 16 ? wait * 2 : 16) {
		err = interrupt(t);
		if (err)
			return err;
		if (ptrace(PTRACE_GETREGS, t->tid, 0, &t->regs))
			return -errno;
		if (safe_point(t, &t->regs))
			return 0;
		if (now_ms(CLOCK_MONOTONIC) >= deadline)
			return inject_fail(t, -EAGAIN,
					   "thread %d of pid %d never stopped outside libc/ld.so",
					   t->tid, t->pid);
		if (ptrace(PTRACE_CONT, t->tid, 0, 0))
			return -errno;
		sleep_ms(wait);
	}
}

/* inject_opts.held_tid: the caller's stopped tracee, used where it stands. */
static int held_point(struct target *t)
{
	if (ptrace(PTRACE_GETREGS, t->tid, 0, &t->regs))
		return errno == ESRCH ? -ESRCH : -errno;
	if (!safe_point(t, &t->regs))
		return inject_fail(
		    t, -EAGAIN,
		    "thread %d of pid %d is stopped in libc or ld.so, not at a safe point", t->tid,
		    t->pid);
	return 0;
}

static int save_state(struct target *t)
{
	t->xstate.iov_base = calloc(1, XSTATE_MAX);
	t->xstate.iov_len = XSTATE_MAX;
	if (!t->xstate.iov_base)
		return -ENOMEM;
	if (ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(t->sigmask), &t->sigmask))
		return -errno;
	/* the thread was stopped between two arbitrary instructions: every register is live */
	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &t->xstate)) {
		t->xstate.iov_len = sizeof(struct user_fpregs_struct);
		if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRFPREG, &t->xstate))
			return -errno;
	}
	t->saved = true;
	return 0;
}

int inject_mem_write(struct target *t, uint64_t addr, const void *buf, size_t len)
{
	ssize_t n = pwrite(t->memfd, buf, len, (off_t)addr);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/*
 * Below the red zone, from the top: strings a and b, the XSAVE area (64-byte
 * aligned for XRSTOR), the ucontext (16-byte aligned: a call made with rsp
 * 8 below it has the alignment the ABI wants) and the slot under it for a
 * return address. The bytes overwritten are kept in old_mem.
 */
static int write_frame(struct target *t, const char *a, size_t a_room, const char *b)
{
	size_t la = strlen(a) + 1, lb = strlen(b) + 1, fplen = t->xstate.iov_len + 4;
	uint64_t top = t->regs.rsp - RED_ZONE, fp, ret = t->restorer;
	uint8_t *frame;
	int err;

	if (la > MAX_STR || lb > MAX_STR)
		return inject_fail(t, -ENAMETOOLONG, "path or argument longer than %d bytes",
				   MAX_STR);
	/* string a's room: at least a_room bytes, for what is written over it later */
	t->str_a = top - (la > a_room ? la : a_room);
	t->str_b = t->str_a - lb;
	fp = (t->str_b - fplen) & ~63ull;
	t->uc = (fp - SIGFRAME_UC_ROOM) & ~15ull;
	t->scratch = t->uc - 8;
	t->old_len = top - t->scratch;
	t->old_mem = malloc(t->old_len);
	frame = malloc(t->old_len);
	err = t->old_mem && frame ? proc_mem_read(t->memfd, t->scratch, t->old_mem, t->old_len)
				  : -ENOMEM;
	if (err) {
		t->old_len = 0; /* nothing written, nothing to put back */
		free(frame);
		return err;
	}
	memcpy(frame, t->old_mem, t->old_len);
	memcpy(frame, &ret, sizeof(ret));
	sigframe_fill_ucontext(frame + 8, &t->regs, t->sigmask, fp);
	sigframe_fill_fpstate(frame + (fp - t->scratch), t->xstate.iov_base, t->xstate.iov_len);
	memcpy(frame + (t->str_a - t->scratch), a, la);
	memcpy(frame + (t->str_b - t->scratch), b, lb);
	err = inject_mem_write(t, t->scratch, frame, t->old_len);
	free(frame);
	return err;
}

static bool syscall_entry(struct target *t)
{
	uint8_t info[128];

	return ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof(info), info) > 0 &&
	       info[0] == SC_INFO_ENTRY;
}

/* At the syscall-entry stop of one of our rt_sigreturn calls. */
static bool parked(const struct target *t, const struct user_regs_struct *r)
{
	if (r->orig_rax != SYS_rt_sigreturn || r->rsp != t->uc)
		return false;
	return r->rip == t->restorer + sizeof(sigframe_restorer_code) ||
	       (t->stub && r->rip == t->stub + sizeof(stub_code));
}

/*
 * Resumes the thread (from a stop where it may be left to itself) until the
 * stop wanted, with its registers in *r. Signals are delivered as they come:
 * a handler runs on the stack below ours and returns where the thread was.
 */
int inject_run_to(struct target *t, enum stop_wanted want, struct user_regs_struct *r)
{
	uint64_t deadline = now_ms(CLOCK_MONOTONIC) + t->timeout_ms;
	int status, sig = 0, err;
	bool stopped = false;

	for (;;) {
		/* a group stop (SIGSTOP...) holds the thread too, until SIGCONT */
		if (stopped ? ptrace(PTRACE_LISTEN, t->tid, 0, 0)
			    : ptrace(PTRACE_SYSCALL, t->tid, 0, (void *)(long)sig))
			return -errno;
		t->running = true;
		err = wait_stop(t, &status, deadline);
		if (err)
			return err;
		t->running = false;
		sig = stop_signal(status);
		stopped = (status >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(status) != SIGTRAP;
		if (WSTOPSIG(status) != SYSCALL_STOP || (status >> 16))
			continue;
		if (ptrace(PTRACE_GETREGS, t->tid, 0, r))
			return -errno;
		if (want == SYSCALL_EXIT ? !syscall_entry(t) : syscall_entry(t) && parked(t, r))
			return 0;
	}
}

/* From a stop in get_signal (the interrupt) to the first parked stop. */
static int park(struct target *t, const char *a, size_t a_room, const char *b)
{
	struct user_regs_struct r = t->regs;
	int err;

	err = write_frame(t, a, a_room, b);
	if (err)
		return err;
	r.rip = t->restorer;
	r.rsp = t->uc;
	/* an interrupted system call is the frame's to restart, not the kernel's now */
	r.orig_rax = (unsigned long long)-1;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r))
		return -errno;
	t->parked = true;
	return inject_run_to(t, PARKED, &r);
}

/*
 * Parked: makes the pending rt_sigreturn system call nr(a0..a2) instead,
 * after which the thread goes back to the trampoline. Returns at the
 * syscall-exit stop, with the result in *ret.
 */
static int syscall4(struct target *t, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
		    uint64_t *ret)
{
	struct user_regs_struct r;
	int err;

	if (ptrace(PTRACE_GETREGS, t->tid, 0, &r))
		return -errno;
	r.orig_rax = (unsigned long long)nr;
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	r.r10 = a3;
	r.r8 = (unsigned long long)-1;
	r.r9 = 0;
	r.rip = t->restorer;
	r.rsp = t->uc;
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r))
		return -errno;
	err = inject_run_to(t, SYSCALL_EXIT, &r);
	*ret = r.rax;
	return err;
}

int inject_syscall(struct target *t, long nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *ret)
{
	/* the 4th argument for mmap; ignored by the others */
	return syscall4(t, nr, a0, a1, a2, MAP_PRIVATE | MAP_ANONYMOUS, ret);
}

int inject_target_fd(struct target *t, int tfd)
{
	int pidfd, fd;

	pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
	if (pidfd < 0)
		return inject_fail(t, -errno, "pidfd_open(%d): %s", t->pid, strerror(errno));
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, tfd, 0);
	close(pidfd);
	if (fd < 0)
		return inject_fail(t, -errno, "cannot get fd %d of pid %d: %s", tfd, t->pid,
				   strerror(errno));
	return fd;
}

/*
 * A page for the stub that calls return to: mapped writable, written, then
 * made executable (no write to a read-only mapping through /proc/PID/mem,
 * which proc_mem.force_override=never forbids).
 */
static int map_stub(struct target *t)
{
	struct user_regs_struct r;
	uint64_t page = 0, ret = 0;
	int err;

	err = inject_syscall(t, SYS_mmap, 0, PAGE, PROT_READ | PROT_WRITE, &page);
	if (!err && page <= -4096ull)
		t->stub = page; /* from now on unpark() unmaps it */
	/* parked again, whatever mmap said: unpark() starts from there */
	if (!err)
		err = inject_run_to(t, PARKED, &r);
	if (!err && !t->stub)
		return inject_fail(t, (int)page, "mmap in pid %d failed: %s", t->pid,
				   strerror(-(int)page));
	if (!err)
		err = inject_mem_write(t, page, stub_code, sizeof(stub_code));
	if (!err)
		err = inject_syscall(t, SYS_mprotect, page, PAGE, PROT_READ | PROT_EXEC, &ret);
	if (!err)
		err = inject_run_to(t, PARKED, &r);
	if (!err && ret)
		return inject_fail(t, (int)ret, "mprotect in pid %d failed: %s", t->pid,
				   strerror(-(int)ret));
	return err;
}

/* Parked: calls fn(a0, a1) in the thread; *ret = rax. */
static int remote_call(struct target *t, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t *ret)
{
	struct user_regs_struct r;
	int err;

	err = inject_mem_write(t, t->uc - 8, &t->stub, sizeof(t->stub));
	if (!err && ptrace(PTRACE_GETREGS, t->tid, 0, &r))
		err = -errno;
	if (err)
		return err;
	r.rip = fn;
	r.rsp = t->uc - 8;
	r.rdi = a0;
	r.rsi = a1;
	r.orig_rax = (unsigned long long)-1; /* the pending rt_sigreturn is skipped */
	r.eflags &= ~0x400ull;		     /* DF clear, as the ABI requires at a call */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r))
		return -errno;
	err = inject_run_to(t, PARKED, &r);
	if (err == -ETIMEDOUT)
		return inject_fail(
		    t, err,
		    "the call in pid %d did not return within %u ms; thread %d goes back "
		    "to its own code when it does",
		    t->pid, t->timeout_ms, t->tid);
	if (!err && r.rip != t->stub + sizeof(stub_code))
		return inject_fail(t, -EFAULT, "the call in pid %d did not return through the stub",
				   t->pid);
	*ret = r.r12;
	return err;
}

static int read_string(struct target *t, uint64_t addr, char *buf, size_t len)
{
	size_t n = 0;

	/* byte by byte: the string may end right before an unmapped page */
	while (n + 1 < len && !proc_mem_read(t->memfd, addr + n, buf + n, 1) && buf[n])
		n++;
	buf[n] = '\0';
	return n ? 0 : -EIO;
}

static int call_dlopen(struct target *t, uint64_t *handle)
{
	char msg[512] = "";
	uint64_t ret = 0;
	int err;

	err = remote_call(t, t->dlopen_fn, t->str_a, RTLD_NOW_, handle);
	if (err || *handle)
		return err;
	if (t->dlerror_fn && !remote_call(t, t->dlerror_fn, 0, 0, &ret) && ret)
		read_string(t, ret, msg, sizeof(msg));
	return inject_fail(t, -ENOENT, "dlopen in pid %d failed: %s", t->pid,
			   msg[0] ? msg : "no reason given");
}

/* The handle of glibc's dlopen is its struct link_map, whose first field is the load bias. */
static int handle_bias(struct target *t, uint64_t handle, uint64_t *bias)
{
	int err = proc_mem_read(t->memfd, handle, bias, sizeof(*bias));

	return err ? inject_fail(t, err, "cannot read the link map of the library in pid %d",
				 t->pid)
		   : 0;
}

/*
 * entry's address: its offset read off our own descriptor of the library
 * where we have one (the target's file system may hold anything at its
 * path), else off the path through the target's root.
 */
static int entry_address(struct target *t, const struct inject_src *src, uint64_t bias,
			 const char *entry, uint64_t *addr)
{
	const char *lib = src->path ? src->path : src->memfd_name;
	struct elf_sym_info s;
	struct elf_file *ef;
	char path[PATH_MAX];
	int err;

	if (src->fd >= 0)
		snprintf(path, sizeof(path), "/proc/self/fd/%d", src->fd);
	else
		snprintf(path, sizeof(path), "/proc/%d/root%s", t->pid, lib);
	err =
	    elf_file__open(src->fd < 0 && (lib[0] != '/' || access(path, R_OK)) ? lib : path, &ef);
	if (err)
		return inject_fail(t, err, "cannot read %s: %s", lib, strerror(-err));
	err = elf_file__find_sym(ef, entry, false, &s);
	elf_file__close(ef);
	if (err || !s.addr)
		return inject_fail(t, -ENOENT, "%s has no function %s", lib, entry);
	*addr = bias + s.addr;
	return 0;
}

/* Parked: closes the target's descriptor *fd (of our memfd, of the pair), then -1. */
static int close_target_fd(struct target *t, int *fd)
{
	struct user_regs_struct r;
	uint64_t ret;
	int err;

	err = inject_syscall(t, SYS_close, (uint64_t)*fd, 0, 0, &ret);
	if (!err)
		err = inject_run_to(t, PARKED, &r);
	if (!err)
		*fd = -1;
	return err;
}

static int close_tfd(struct target *t)
{
	return close_target_fd(t, &t->tfd);
}

/*
 * Parked: the thread makes a socketpair (its int[2] at str_b, the
 * argument's room), one end comes to us by pidfd_getfd and is closed
 * there, and the argument becomes "fd:N" for the other. Nobody but the
 * target can reach either end: there is no name to connect to.
 */
static int pass_socket(struct target *t, struct inject_result *res)
{
	struct user_regs_struct r;
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	char arg[sizeof(SOCK_ARG_ROOM)];
	int32_t sv[2] = {-1, -1};
	uint64_t ret = 0;
	int err;

	err = syscall4(t, SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t->str_b, &ret);
	err = err ?: inject_run_to(t, PARKED, &r);
	if (err)
		return err;
	if ((int64_t)ret < 0)
		return inject_fail(t, (int)ret, "socketpair in pid %d failed: %s", t->pid,
				   strerror(-(int)ret));
	err = proc_mem_read(t->memfd, t->str_b, sv, sizeof(sv));
	if (err || sv[0] < 0 || sv[1] < 0)
		return inject_fail(t, err ?: -EIO, "cannot read the socketpair of pid %d", t->pid);
	t->tsock[0] = sv[0];
	t->tsock[1] = sv[1];
	res->sock = inject_target_fd(t, sv[0]);
	if (res->sock < 0)
		return res->sock;
	/* another thread of the target may have put something else at that number meanwhile */
	if (getsockopt(res->sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid != t->pid)
		return inject_fail(t, -EPERM, "fd %d of pid %d is not the socketpair it made",
				   sv[0], t->pid);
	err = close_target_fd(t, &t->tsock[0]);
	snprintf(arg, sizeof(arg), "fd:%d", sv[1]);
	return err ?: inject_mem_write(t, t->str_b, arg, strlen(arg) + 1);
}

static int load(struct target *t, struct inject_src *src, const struct inject_opts *o,
		struct inject_result *res)
{
	uint64_t fn = 0, ret = 0, bias = src->loaded_bias;
	int err;

	/* the memfd's name, then the path of its fd over it (memfd_place) */
	err = park(t, src->path ? src->path : src->memfd_name, src->path ? 0 : INJECT_FD_PATH_MAX,
		   o->pass_socket ? SOCK_ARG_ROOM
		   : o->arg	  ? o->arg
				  : "");
	if (!err)
		err = map_stub(t);
	if (!err && !src->path && !bias)
		err = src->memfd->place(t, src);
	/* place() wrote the path to the memfd at str_a */
	if (!err && !bias) {
		err = call_dlopen(t, &res->handle);
		/* dlopen said no (its /proc not procfs?): nothing of ours is in, a copy may do */
		if (err == -ENOENT && !src->path)
			src->fallback = true;
	}
	/* the mapping holds the library now: its descriptor goes at once (unpark() otherwise) */
	if (t->tfd >= 0 && (!err || err == -ENOENT))
		err = close_tfd(t) ?: err;
	if (!err && !bias)
		err = handle_bias(t, res->handle, &bias);
	if (!err && !src->path)
		err = src->memfd->check_loaded(t, src, bias);
	res->bias = bias;
	if (err || !o->entry)
		return err;
	err = entry_address(t, src, bias, o->entry, &fn);
	if (!err && o->pass_socket)
		err = pass_socket(t, res);
	if (!err)
		err = remote_call(t, fn, t->str_b, 0, &ret);
	if (!err)
		res->entry_ret = (int)ret;
	/* the entry dup'ed its end if it keeps it */
	if (!err && t->tsock[1] >= 0)
		err = close_target_fd(t, &t->tsock[1]);
	return err;
}

/*
 * Parked: the stub page goes, then the thread's own state comes back in an
 * order where each step leaves it either parked or itself.
 */
static int unpark(struct target *t)
{
	struct user_regs_struct r = t->regs;
	uint64_t ret;
	int err = 0;

	if (t->tfd >= 0)
		err = close_tfd(t);
	for (int i = 0; i < 2 && !err; i++)
		err = t->tsock[i] >= 0 ? close_target_fd(t, &t->tsock[i]) : 0;
	if (err)
		return err;
	if (t->stub && !inject_syscall(t, SYS_munmap, t->stub, PAGE, 0, &ret))
		err = inject_run_to(t, PARKED, &r);
	if (err)
		return err;
	t->stub = 0;
	/* were we killed now, the frame's rt_sigreturn would set these same values */
	if (ptrace(PTRACE_SETREGSET, t->tid,
		   (void *)(long)(t->xstate.iov_len == sizeof(struct user_fpregs_struct)
				      ? NT_PRFPREG
				      : NT_X86_XSTATE),
		   &t->xstate) ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, (void *)sizeof(t->sigmask), &t->sigmask))
		return -errno;
	/* a syscall-exit stop: the registers set there, rax included, are what the thread sees */
	err = inject_syscall(t, SYS_getpid, 0, 0, 0, &ret);
	if (err)
		return err;
	/* the restart block is intact (our rt_sigreturn never ran): sleeps go on where they were */
	r = t->regs;
	sigframe_restart_regs(&r, true);
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r))
		return -errno;
	t->parked = false;
	return 0;
}

/*
 * A thread we cannot put back ourselves (a call that did not return in time,
 * a step that failed): let go while parked or in a call, its own
 * rt_sigreturn restores it (the frame and the stub page stay).
 */
static void abandon(struct target *t)
{
	int status;

	t->released = true;
	if (!ptrace(PTRACE_DETACH, t->tid, 0, 0))
		return;
	if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) ||
	    wait_stop(t, &status, now_ms(CLOCK_MONOTONIC) + t->timeout_ms))
		return;
	ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)stop_signal(status));
}

/* Puts back the thread's state and the memory written, and lets the thread go. */
static int restore(struct target *t)
{
	int err = 0;

	if (t->parked && !t->running)
		err = unpark(t);
	if (err == -ESRCH)
		return err;
	if (t->parked) {
		abandon(t);
		return err;
	}
	if (t->old_len && inject_mem_write(t, t->scratch, t->old_mem, t->old_len))
		err = -EIO;
	/* the caller's tracee stays in its stop: the caller resumes it */
	if (!t->held && ptrace(PTRACE_DETACH, t->tid, 0, 0))
		err = err ?: -errno;
	return err;
}

static int seize(struct target *t)
{
	char path[64];
	uint64_t st = 0;

	if (ptrace(PTRACE_SEIZE, t->tid, 0, (void *)PTRACE_O_TRACESYSGOOD)) {
		if (errno == ESRCH)
			return inject_fail(t, -ESRCH, "no process %d", t->pid);
		return inject_fail(t, -errno, "cannot trace pid %d: %s%s", t->pid, strerror(errno),
				   errno == EPERM ? " (not root, or another debugger is attached?)"
						  : "");
	}
	t->seized = true;
	/* the pid and tid looked up before are still that process, and the thread is in it */
	snprintf(path, sizeof(path), "/proc/%d/task/%d", t->pid, t->tid);
	if (access(path, F_OK) || proc_start_time(t->pid, &st) || st != t->start_time)
		return inject_fail(t, -ESRCH, "pid %d is not the process it was (it exited)",
				   t->pid);
	return 0;
}

static int open_target(struct target *t, uint64_t start_time)
{
	char path[64];
	int err;

	err = proc_start_time(t->pid, &t->start_time);
	if (err == -ENOENT)
		return inject_fail(t, -ESRCH, "no process %d", t->pid);
	if (!err && start_time && start_time != t->start_time)
		return inject_fail(t, -ESRCH, "pid %d is not the process it was (it exited)",
				   t->pid);
	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0 && errno == ENOENT)
		return inject_fail(t, -ESRCH, "no process %d", t->pid);
	if (t->memfd < 0)
		return inject_fail(t, -errno, "cannot open %s: %s", path, strerror(errno));
	return inject_find_functions(t);
}

/* Ctrl-C during the few milliseconds of a call must not leave the thread in it. */
static void block_stop_signals(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigprocmask(SIG_BLOCK, &set, old);
}

static int finish(struct target *t, int ret)
{
	int rret = 0;

	if (t->seized && ret != -ESRCH)
		rret = restore(t);
	if (t->seized && (ret == -ESRCH || rret == -ESRCH)) {
		t->err[0] = '\0';
		return inject_fail(t, -ESRCH, "pid %d exited during injection", t->pid);
	}
	if (!ret && rret)
		return inject_fail(t, rret, "cannot restore pid %d: %s", t->pid, strerror(-rret));
	if (ret)
		inject_fail(t, ret, "injection into pid %d failed: %s", t->pid, strerror(-ret));
	return ret;
}

int inject_run(pid_t pid, struct inject_src *src, const struct inject_opts *opts,
	       struct inject_result *res, char *err, size_t errlen)
{
	struct inject_opts none = {};
	struct target t = {
	    .pid = pid, .memfd = -1, .tfd = -1, .tsock = {-1, -1}, .err = err, .errlen = errlen};
	const struct inject_opts *o = opts ? opts : &none;
	sigset_t old;
	int ret;

	err[0] = '\0';
	*res = (struct inject_result){.sock = -1};
	t.timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	t.tid = o->held_tid ? o->held_tid : pick_thread(pid);
	t.held = o->held_tid != 0;
	/* held: ours already, and what is undone at the end (restore()) */
	t.seized = t.held;
	block_stop_signals(&old);
	ret = open_target(&t, o->start_time);
	if (!ret && !t.held)
		ret = seize(&t);
	if (!ret)
		ret = t.held ? held_point(&t) : reach_safe_point(&t);
	if (!ret)
		ret = save_state(&t);
	if (!ret)
		ret = load(&t, src, o, res);
	ret = finish(&t, ret);
	res->released = t.released;
	/* a socket only with an entry that ran */
	if (ret && res->sock >= 0) {
		close(res->sock);
		res->sock = -1;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(t.xstate.iov_base);
	free(t.old_mem);
	if (t.memfd >= 0)
		close(t.memfd);
	return ret;
}

int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen)
{
	struct inject_src src = {.path = lib_path, .fd = -1};

	return inject_run(pid, &src, opts, res, err, errlen);
}

#else /* !__x86_64__ */

int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen)
{
	snprintf(err, errlen, "injection is implemented for x86-64 only");
	return -ENOTSUP;
}

int inject_run(pid_t pid, struct inject_src *src, const struct inject_opts *opts,
	       struct inject_result *res, char *err, size_t errlen)
{
	snprintf(err, errlen, "injection is implemented for x86-64 only");
	return -ENOTSUP;
}

#endif
