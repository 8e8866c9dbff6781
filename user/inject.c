// SPDX-License-Identifier: MIT
/*
 * dlopen() in a running process, through ptrace, x86-64 only. One thread is
 * borrowed (the main thread, or the first live one): the others keep
 * running, so a lock that one of them holds and that dlopen() needs (the
 * malloc arenas, the loader's lock) is released as usual instead of
 * deadlocking the call. The borrowed thread is only used at a safe point:
 * outside ld.so, and outside libc unless blocked in a waiting system call,
 * so it holds no lock that dlopen() takes. Calls return to an address that
 * is never mapped (below mmap_min_addr): the fault there ends the call
 * without patching any code that the other threads run.
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
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "elf_file.h"
#include "inject.h"
#include "procfs.h"

#ifdef __x86_64__

#define RET_MAGIC	   0x7e57ull  /* return address: unmapped, the fault ends a call */
#define RED_ZONE	   128	      /* the x86-64 ABI's scratch area below rsp */
#define XSTATE_MAX	   (64 << 10) /* room for the largest XSAVE area (AMX included) */
#define MAX_PENDING	   16	      /* signals held back while our call runs */
#define MAX_STR		   4096	      /* longest path or argument written into the target */
#define DEFAULT_TIMEOUT_MS 10000
#define RTLD_NOW_	   0x2 /* <dlfcn.h>'s value on Linux */

struct region {
	uint64_t lo, hi;
};

struct target {
	pid_t pid, tid;
	int memfd;
	uint64_t dlopen_fn, dlerror_fn; /* dlerror_fn = 0 with __libc_dlopen_mode */
	struct region libc_text, ldso_text;
	bool seized, saved;
	struct user_regs_struct regs; /* as they were when we stopped the thread */
	struct iovec xstate;
	uint64_t scratch; /* lowest byte we wrote on the stack */
	uint8_t old_mem[2 * MAX_STR + 64];
	size_t old_len;
	int pending[MAX_PENDING];
	int npending;
	unsigned int timeout_ms;
	char *err;
	size_t errlen;
};

static int fail(struct target *t, int ret, const char *fmt, ...)
{
	va_list ap;

	if (t->err[0])
		return ret;
	va_start(ap, fmt);
	vsnprintf(t->err, t->errlen, fmt, ap);
	va_end(ap);
	return ret;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static bool in_region(const struct region *r, uint64_t addr)
{
	return addr >= r->lo && addr < r->hi;
}

static bool is_libc(const char *base)
{
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7);
}

static bool is_ldso(const char *base)
{
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-2.", 5);
}

/* libc's dlopen (glibc >= 2.34) or __libc_dlopen_mode (older glibc), and dlerror. */
static int find_dlopen(struct target *t, const struct proc_map *m, uint64_t bias)
{
	char path[PATH_MAX];
	struct elf_file *ef;
	struct elf_sym_info s;
	int err;

	proc_target_path(t->pid, m->path, m->inode, path, sizeof(path));
	err = elf_file__open(path, &ef);
	if (err)
		return err;
	if (!elf_file__find_sym(ef, "dlopen", false, &s) && s.addr) {
		t->dlopen_fn = bias + s.addr;
		if (!elf_file__find_sym(ef, "dlerror", false, &s) && s.addr)
			t->dlerror_fn = bias + s.addr;
	} else if (!elf_file__find_sym(ef, "__libc_dlopen_mode", false, &s) && s.addr) {
		t->dlopen_fn = bias + s.addr;
	}
	elf_file__close(ef);
	return 0;
}

static int map_bias(pid_t pid, const struct proc_map *m, uint64_t *bias)
{
	char path[PATH_MAX];

	proc_target_path(pid, m->path, m->inode, path, sizeof(path));
	return elf_load_bias(path, m->start, m->offset, bias);
}

static int scan_map(const struct proc_map *m, void *ctx)
{
	struct target *t = ctx;
	const char *base = strrchr(m->path, '/');
	uint64_t bias;

	if (!base || m->perms[2] != 'x')
		return 0;
	base++;
	if (is_ldso(base)) {
		t->ldso_text = (struct region){m->start, m->end};
	} else if (is_libc(base) && !t->dlopen_fn) {
		t->libc_text = (struct region){m->start, m->end};
		if (!map_bias(t->pid, m, &bias))
			find_dlopen(t, m, bias);
	}
	return 0;
}

static int find_functions(struct target *t)
{
	int err = proc_maps__for_each(t->pid, scan_map, t);

	if (err == -ENOENT)
		return fail(t, -ESRCH, "no process %d", t->pid);
	if (err)
		return fail(t, err, "cannot read the mappings of pid %d: %s", t->pid,
			    strerror(-err));
	if (!t->dlopen_fn)
		return fail(t, -ENOTSUP,
			    "pid %d has no glibc with dlopen (static or musl program?)", t->pid);
	return 0;
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
		if (w == t->tid && WIFSTOPPED(*status))
			return 0;
		if (now_ms(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		sleep_ms(1);
	}
}

/* A signal that came while we held the thread: delivered once it runs its own code again. */
static void hold_signal(struct target *t, int sig)
{
	if (sig == SIGSTOP || sig == SIGTRAP)
		return;
	for (int i = 0; i < t->npending; i++) {
		if (t->pending[i] == sig)
			return; /* standard signals do not queue either */
	}
	if (t->npending < MAX_PENDING)
		t->pending[t->npending++] = sig;
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
		if (ptrace(PTRACE_CONT, t->tid, 0, (void *)(long)WSTOPSIG(status)))
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
			return fail(t, -EAGAIN,
				    "thread %d of pid %d never stopped outside libc/ld.so", t->tid,
				    t->pid);
		if (ptrace(PTRACE_CONT, t->tid, 0, 0))
			return -errno;
		sleep_ms(wait);
	}
}

static int save_state(struct target *t)
{
	t->xstate.iov_base = malloc(XSTATE_MAX);
	t->xstate.iov_len = XSTATE_MAX;
	if (!t->xstate.iov_base)
		return -ENOMEM;
	/* the thread was stopped between two arbitrary instructions: every register is live */
	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &t->xstate)) {
		t->xstate.iov_len = sizeof(struct user_fpregs_struct);
		if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRFPREG, &t->xstate))
			return -errno;
	}
	t->saved = true;
	return 0;
}

static int mem_write(struct target *t, uint64_t addr, const void *buf, size_t len)
{
	ssize_t n = pwrite(t->memfd, buf, len, (off_t)addr);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/*
 * Writes strings a and b below the red zone of the thread's stack, and a
 * return address under them. Returns the stack pointer for the call; the
 * bytes overwritten are kept in old_mem.
 */
static int write_frame(struct target *t, const char *a, const char *b, uint64_t *rsp, uint64_t *pa,
		       uint64_t *pb)
{
	size_t la = strlen(a) + 1, lb = strlen(b) + 1;
	uint64_t top = t->regs.rsp - RED_ZONE, ret = RET_MAGIC;
	uint8_t frame[sizeof(t->old_mem)];
	int err;

	if (la > MAX_STR || lb > MAX_STR)
		return fail(t, -ENAMETOOLONG, "path or argument longer than %d bytes", MAX_STR);
	*pa = top - la;
	*pb = *pa - lb;
	/* the ABI wants rsp + 8 aligned to 16 when a function starts */
	*rsp = ((*pb - 8) & ~15ull) - 8;
	t->scratch = *rsp;
	t->old_len = top - *rsp;
	err = proc_mem_read(t->memfd, t->scratch, t->old_mem, t->old_len);
	if (err)
		return err;
	memcpy(frame, t->old_mem, t->old_len);
	memcpy(frame, &ret, sizeof(ret));
	memcpy(frame + (*pa - *rsp), a, la);
	memcpy(frame + (*pb - *rsp), b, lb);
	return mem_write(t, t->scratch, frame, t->old_len);
}

/* Reacts to one stop during a call: 1 = our return, 0 = go on, < 0 = failure. */
static int call_stop(struct target *t, int status, uint64_t rsp, struct user_regs_struct *r)
{
	int sig = WSTOPSIG(status);

	if ((status >> 16) == PTRACE_EVENT_STOP)
		return 0;
	if (sig == SIGSEGV) {
		if (ptrace(PTRACE_GETREGS, t->tid, 0, r))
			return -errno;
		if (r->rip == RET_MAGIC && r->rsp == rsp + 8)
			return 1;
		return fail(t, -EFAULT, "the call in pid %d crashed (SIGSEGV at %#llx)", t->pid,
			    (unsigned long long)r->rip);
	}
	hold_signal(t, sig);
	return 0;
}

/* Calls fn(a0, a1) in the thread; *ret = rax. */
static int remote_call(struct target *t, uint64_t fn, uint64_t a0, uint64_t a1, uint64_t rsp,
		       uint64_t *ret)
{
	struct user_regs_struct r = t->regs;
	uint64_t deadline = now_ms(CLOCK_MONOTONIC) + t->timeout_ms;
	int status, err;

	r.rip = fn;
	r.rsp = rsp;
	r.rdi = a0;
	r.rsi = a1;
	r.rax = 0;
	/* not in a system call any more: the kernel must not "restart" into our call */
	r.orig_rax = (unsigned long long)-1;
	r.eflags &= ~0x400ull; /* DF clear, as the ABI requires at a call */
	if (ptrace(PTRACE_SETREGS, t->tid, 0, &r))
		return -errno;
	for (err = 0; !err;) {
		if (ptrace(PTRACE_CONT, t->tid, 0, 0))
			return -errno;
		err = wait_stop(t, &status, deadline);
		if (!err)
			err = call_stop(t, status, rsp, &r);
	}
	if (err == -ETIMEDOUT) {
		/* stuck (a lock never released?): take the thread back to its own code */
		interrupt(t);
		return fail(t, err,
			    "the call in pid %d did not return within %u ms; thread %d "
			    "was put back where it was",
			    t->pid, t->timeout_ms, t->tid);
	}
	*ret = r.rax;
	return err < 0 ? err : 0;
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

static int call_dlopen(struct target *t, const char *lib, const char *arg, uint64_t *handle,
		       uint64_t *parg, uint64_t *rsp)
{
	char msg[512] = "";
	uint64_t plib = 0, ret = 0;
	int err;

	err = write_frame(t, lib, arg, rsp, &plib, parg);
	if (!err)
		err = remote_call(t, t->dlopen_fn, plib, RTLD_NOW_, *rsp, handle);
	if (err || *handle)
		return err;
	if (t->dlerror_fn && !remote_call(t, t->dlerror_fn, 0, 0, *rsp, &ret) && ret)
		read_string(t, ret, msg, sizeof(msg));
	return fail(t, -ENOENT, "dlopen in pid %d failed: %s", t->pid,
		    msg[0] ? msg : "no reason given");
}

/* The handle of glibc's dlopen is its struct link_map, whose first field is the load bias. */
static int entry_address(struct target *t, const char *lib, uint64_t handle, const char *entry,
			 uint64_t *addr)
{
	struct elf_sym_info s;
	struct elf_file *ef;
	uint64_t l_addr;
	char path[PATH_MAX];
	int err;

	err = proc_mem_read(t->memfd, handle, &l_addr, sizeof(l_addr));
	if (err)
		return fail(t, err, "cannot read the link map of %s in pid %d", lib, t->pid);
	snprintf(path, sizeof(path), "/proc/%d/root%s", t->pid, lib);
	err = elf_file__open(lib[0] == '/' && !access(path, R_OK) ? path : lib, &ef);
	if (err)
		return fail(t, err, "cannot read %s: %s", lib, strerror(-err));
	err = elf_file__find_sym(ef, entry, false, &s);
	elf_file__close(ef);
	if (err || !s.addr)
		return fail(t, -ENOENT, "%s has no function %s", lib, entry);
	*addr = l_addr + s.addr;
	return 0;
}

static int load(struct target *t, const char *lib, const struct inject_opts *o,
		struct inject_result *res)
{
	uint64_t parg = 0, rsp = 0, fn = 0, ret = 0;
	int err;

	err = call_dlopen(t, lib, o->arg ? o->arg : "", &res->handle, &parg, &rsp);
	if (err || !o->entry)
		return err;
	err = entry_address(t, lib, res->handle, o->entry, &fn);
	if (!err)
		err = remote_call(t, fn, parg, 0, rsp, &ret);
	if (!err)
		res->entry_ret = (int)ret;
	return err;
}

/* Puts back memory, registers and held signals, and lets the thread go. */
static int restore(struct target *t)
{
	int err = 0;

	if (t->old_len && mem_write(t, t->scratch, t->old_mem, t->old_len))
		err = -errno;
	if (t->saved) {
		/*
		 * orig_rax and rax as saved: a system call we interrupted is
		 * restarted by the kernel exactly as after any signal stop
		 */
		if (ptrace(PTRACE_SETREGS, t->tid, 0, &t->regs) ||
		    ptrace(PTRACE_SETREGSET, t->tid,
			   (void *)(long)(t->xstate.iov_len == sizeof(struct user_fpregs_struct)
					      ? NT_PRFPREG
					      : NT_X86_XSTATE),
			   &t->xstate))
			err = err ?: -errno;
	}
	for (int i = 0; i < t->npending; i++)
		syscall(SYS_tgkill, t->pid, t->tid, t->pending[i]);
	if (ptrace(PTRACE_DETACH, t->tid, 0, 0))
		err = err ?: -errno;
	return err;
}

static int seize(struct target *t)
{
	if (ptrace(PTRACE_SEIZE, t->tid, 0, 0)) {
		if (errno == ESRCH)
			return fail(t, -ESRCH, "no process %d", t->pid);
		return fail(t, -errno, "cannot trace pid %d: %s%s", t->pid, strerror(errno),
			    errno == EPERM ? " (not root, or another debugger is attached?)" : "");
	}
	t->seized = true;
	return 0;
}

static int open_target(struct target *t)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0 && errno == ENOENT)
		return fail(t, -ESRCH, "no process %d", t->pid);
	if (t->memfd < 0)
		return fail(t, -errno, "cannot open %s: %s", path, strerror(errno));
	return find_functions(t);
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
		return fail(t, -ESRCH, "pid %d exited during injection", t->pid);
	}
	if (!ret && rret)
		return fail(t, rret, "cannot restore pid %d: %s", t->pid, strerror(-rret));
	if (ret)
		fail(t, ret, "injection into pid %d failed: %s", t->pid, strerror(-ret));
	return ret;
}

int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen)
{
	struct inject_opts none = {};
	struct target t = {.pid = pid, .memfd = -1, .err = err, .errlen = errlen};
	const struct inject_opts *o = opts ? opts : &none;
	sigset_t old;
	int ret;

	err[0] = '\0';
	*res = (struct inject_result){};
	t.timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	t.tid = pick_thread(pid);
	block_stop_signals(&old);
	ret = open_target(&t);
	if (!ret)
		ret = seize(&t);
	if (!ret)
		ret = reach_safe_point(&t);
	if (!ret)
		ret = save_state(&t);
	if (!ret)
		ret = load(&t, lib_path, o, res);
	ret = finish(&t, ret);
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(t.xstate.iov_base);
	if (t.memfd >= 0)
		close(t.memfd);
	return ret;
}

#else /* !__x86_64__ */

int inject_library(pid_t pid, const char *lib_path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen)
{
	snprintf(err, errlen, "injection is implemented for x86-64 only");
	return -ENOTSUP;
}

#endif
