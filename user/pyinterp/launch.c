// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fdlimit.h"
#include "proc/elf_file.h"
#include "proc/procfs.h"
#include "pyinterp/launch.h"

#define EXEC_EVENT (SIGTRAP | (PTRACE_EVENT_EXEC << 8))
/* a held process's threads are held too, those it starts from birth (launch_threads.c) */
#define HOLD_OPTS     (PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE)
#define SC_INFO_ENTRY 1 /* <linux/ptrace.h>, which clashes with <sys/ptrace.h> */

static int read_auxv_entry(pid_t pid, uint64_t type, uint64_t *val)
{
	uint64_t pair[2];
	char path[64];
	int fd, err = -ENOENT;

	snprintf(path, sizeof(path), "/proc/%d/auxv", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (read(fd, pair, sizeof(pair)) == sizeof(pair) && pair[0] != AT_NULL) {
		if (pair[0] == type) {
			*val = pair[1];
			err = 0;
			break;
		}
	}
	close(fd);
	return err;
}

struct ldso_text {
	uint64_t base; /* AT_BASE: where ld.so is mapped */
	char path[PATH_MAX];
	uint64_t lo, hi;
};

static int find_ldso_path(const struct proc_map *m, void *ctx)
{
	struct ldso_text *l = ctx;

	if (m->start == l->base)
		snprintf(l->path, sizeof(l->path), "%s", m->path);
	return 0;
}

static int find_ldso_text(const struct proc_map *m, void *ctx)
{
	struct ldso_text *l = ctx;

	if (m->perms[2] == 'x' && !strcmp(m->path, l->path)) {
		l->lo = m->start;
		l->hi = m->end;
	}
	return 0;
}

static bool syscall_entry(pid_t pid)
{
	uint8_t info[128];

	return ptrace(PTRACE_GET_SYSCALL_INFO, pid, (void *)sizeof(info), info) > 0 &&
	       info[0] == SC_INFO_ENTRY;
}

/*
 * An executable that links libpython: ld.so maps it before the program's
 * first system call, which comes from outside ld.so's text once ld.so has
 * mapped and relocated everything. Stepping from one system call to the
 * next patches nothing: were ptrace-gpu killed, the kernel lets the child
 * go on from any of these stops (TRACESYSGOOD: no stray SIGTRAP either).
 */
static int run_past_ldso(pid_t pid)
{
	struct ldso_text l = {};
	struct user_regs_struct regs;
	int status, sig = 0, err;

	if (read_auxv_entry(pid, AT_BASE, &l.base) || !l.base)
		return 0; /* no interpreter: a static program is all mapped already */
	err = proc_maps__for_each(pid, find_ldso_path, &l);
	if (!err && l.path[0])
		err = proc_maps__for_each(pid, find_ldso_text, &l);
	if (err || !l.hi)
		return err ?: -ENOENT;
	for (;;) {
		err = launch_cont(pid, PTRACE_SYSCALL, sig);
		if (!err)
			err = launch_wait_stop(pid, &status);
		if (err)
			return err;
		sig = launch_stop_signal(status);
		if (WSTOPSIG(status) != SYSCALL_STOP || (status >> 16) || !syscall_entry(pid))
			continue;
		if (ptrace(PTRACE_GETREGS, pid, 0, &regs))
			return -errno;
		if (regs.rip < l.lo || regs.rip >= l.hi)
			return 0;
	}
}

static bool links_libpython(pid_t pid)
{
	struct elf_file *ef;
	char exe[64], name[256];
	bool ret;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	if (elf_file__open(exe, &ef))
		return false;
	ret = elf_file__needed(ef, "libpython", name, sizeof(name)) == 0;
	elf_file__close(ef);
	return ret;
}

/* At an exec stop: is this image a Python we support? 1 yes, 0 not Python, < 0 error. */
static int check_image(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	bool linked = links_libpython(pid);
	int ret = 0;

	if (linked)
		ret = run_past_ldso(pid);
	if (!ret) {
		ret = py_interp__find(pid, py, err, errlen);
		/*
		 * No Python: the libraries it links (libcuda) mapped before
		 * it runs, so that their probes see its first calls too
		 */
		if (ret == -ENOEXEC && !linked) {
			err[0] = '\0';
			ret = run_past_ldso(pid) ?: -ENOEXEC;
		}
		if (ret == -ENOEXEC)
			return 0;
		return ret ? ret : 1;
	}
	snprintf(err, errlen, "cannot run the command past its dynamic loader: %s", strerror(-ret));
	return ret;
}

/* Execs once the parent has seized it (or died: then it runs untraced). */
static void child_exec(char **argv, int sync)
{
	/* the recorder ignores it (record/session.c); an ignored signal stays so across exec */
	signal(SIGXFSZ, SIG_DFL);
	char c;

	fdlimit_restore();

	while (read(sync, &c, 1) < 0 && errno == EINTR) {
	}
	close(sync);
	execvp(argv[0], argv);
	_exit(127);
}

/* What execvp() would run, so that a missing program is reported before forking. */
static int find_program(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	const char *p, *end;

	if (strchr(name, '/'))
		return access(name, X_OK) ? -errno : 0;
	for (p = path ? path : "/usr/local/bin:/usr/bin:/bin"; *p; p = *end ? end + 1 : end) {
		end = strchrnul(p, ':');
		snprintf(buf, len, "%.*s/%s", (int)(end - p), p, name);
		if (!access(buf, X_OK))
			return 0;
	}
	return -ENOENT;
}

int launch__start(char **argv, pid_t *pidp, struct py_interp *py, char *err, size_t errlen)
{
	char exe[PATH_MAX];
	int status, ret, sync[2];
	pid_t pid;

	err[0] = '\0';
	ret = find_program(argv[0], exe, sizeof(exe));
	if (ret) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(-ret));
		return ret;
	}
	if (pipe2(sync, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(sync[0]);
		close(sync[1]);
		return ret;
	}
	if (pid == 0) {
		close(sync[1]);
		child_exec(argv, sync[0]);
	}
	close(sync[0]);
	/*
	 * Seized, not PTRACE_TRACEME + raise(SIGSTOP): a SIGSTOP pending when
	 * ptrace-gpu dies would leave the child stopped. No PTRACE_O_EXITKILL:
	 * the child runs on if ptrace-gpu dies.
	 */
	ret = ptrace(PTRACE_SEIZE, pid, 0, (void *)HOLD_OPTS) ? -errno : 0;
	if (write(sync[1], "", 1) != 1 && !ret)
		ret = -errno;
	close(sync[1]);
	while (!ret) {
		ret = launch_wait_stop(pid, &status);
		if (ret)
			break;
		if ((status >> 8) != EXEC_EVENT) {
			ret = launch_cont(pid, PTRACE_CONT, launch_stop_signal(status));
			continue;
		}
		/*
		 * The command's own image, Python or not: a program with no
		 * interpreter (a shell, a C program) is recorded as it is, held
		 * so that a later exec into Python is seen (launch__poll).
		 */
		ret = check_image(pid, py, err, errlen);
		if (ret >= 0) {
			if (ret == 0)
				memset(py, 0, sizeof(*py));
			*pidp = pid;
			return 0;
		}
	}
	if (ret == -ECHILD)
		snprintf(err, errlen, "%s exited before it could be recorded", argv[0]);
	else if (!err[0])
		snprintf(err, errlen, "cannot start %s: %s", argv[0], strerror(-ret));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return ret;
}

int launch__seize(pid_t pid)
{
	/* as launch__start(): a killed recorder leaves it running, untraced and unchanged */
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)HOLD_OPTS))
		return -errno;
	return threads_seize(pid, HOLD_OPTS);
}

int launch__release(pid_t pid)
{
	threads_release(pid, pid);
	return ptrace(PTRACE_DETACH, pid, 0, 0) ? -errno : 0;
}

int launch__resume(pid_t pid)
{
	return launch_cont(pid, PTRACE_CONT, 0);
}

static struct {
	launch_urg_fn fn;
	void *ctx;
} urg[LAUNCH_URG_MAX];
static int nurg;

int launch__on_urg(launch_urg_fn fn, void *ctx)
{
	for (int i = 0; i < nurg; i++) {
		if (urg[i].fn == fn && urg[i].ctx == ctx)
			return 0;
	}
	if (nurg == LAUNCH_URG_MAX)
		return -E2BIG;
	urg[nurg].fn = fn;
	urg[nurg++].ctx = ctx;
	return 0;
}

void launch__off_urg(launch_urg_fn fn, void *ctx)
{
	for (int i = 0; i < nurg; i++) {
		if (urg[i].fn == fn && urg[i].ctx == ctx) {
			urg[i] = urg[--nurg];
			return;
		}
	}
}

static int let_go_main(pid_t pid, int *wstatus);

/*
 * Let go at the stop of thread tid: the other threads first, the main one
 * (stopped to be detached), and tid last, which, stopped, keeps the
 * process from ending meanwhile. URG_LET_GO, or URG_ENDED (*wstatus) when
 * it ended all the same.
 */
static int release_at(pid_t pid, pid_t tid, int *wstatus)
{
	int ret = 0;

	threads_release(pid, tid);
	if (tid != pid) {
		ret = let_go_main(pid, wstatus);
		threads_release(pid, tid); /* one it started meanwhile */
	}
	ptrace(PTRACE_DETACH, tid, 0, 0);
	return ret == -ECHILD ? URG_ENDED : URG_LET_GO;
}

/* A SIGURG stop of thread tid of held process pid: launch_our_urg_fn (launch_threads.h). */
static int launch_our_urg(pid_t pid, pid_t tid, int *wstatus)
{
	for (int i = 0; i < nurg; i++) {
		switch (urg[i].fn(urg[i].ctx, pid, tid)) {
		case LAUNCH_URG_RESUME:
			return launch_cont(tid, PTRACE_CONT, 0) ?: URG_RESUMED;
		case LAUNCH_URG_RELEASE:
			return release_at(pid, tid, wstatus);
		case LAUNCH_URG_NOT_OURS:
			break;
		}
	}
	return 0;
}

/*
 * A signal sent to the held process (not an event, not a group stop) is
 * passed on without consuming its stop (WNOWAIT): were ptrace-gpu killed
 * between the wait and the resume, a stop already waited for would lose
 * the signal, one only seen keeps it (tests/integration/test_ptrace_stop.py).
 * 1 when one was passed on (or one of ours handled), URG_LET_GO or
 * URG_ENDED as launch_our_urg(), 0 when there is none.
 */
static int peek_signal(pid_t pid, int *wstatus)
{
	siginfo_t si = {};
	int ret;

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL))
		return -errno;
	if (!si.si_pid || si.si_code != CLD_TRAPPED || (si.si_status >> 8) ||
	    si.si_status == SYSCALL_STOP)
		return 0;
	if (si.si_status == SIGURG && (ret = launch_our_urg(pid, pid, wstatus)))
		return ret;
	return launch_cont(pid, PTRACE_CONT, si.si_status) ?: 1;
}

/* What next_stop() found. */
enum held_state { HELD_RUNS, HELD_STOPPED, HELD_ENDED, HELD_LET_GO, HELD_FORK };

/*
 * The next stop of held process pid, its other threads' stops handled and
 * the signals sent to it passed on first (peek_signal()): HELD_STOPPED
 * with its *status, HELD_RUNS when none is pending, HELD_ENDED with
 * *wstatus when it ended, HELD_LET_GO when a stop of ours let it go,
 * HELD_FORK when a thread other than the main one forked (*child); or
 * -errno (-ECHILD: no tracee of ours by that pid).
 */
static int next_stop(pid_t pid, int *status, int *wstatus, pid_t *child)
{
	for (;;) {
		int ret = threads_poll(pid, child, wstatus, launch_our_urg);
		pid_t got;

		ret = ret ?: peek_signal(pid, wstatus);
		if (ret == 1)
			continue;
		if (ret == URG_LET_GO || ret == URG_ENDED)
			return ret == URG_LET_GO ? HELD_LET_GO : HELD_ENDED;
		if (ret == LAUNCH_FORK)
			return HELD_FORK;
		if (ret < 0 && ret != -ESRCH)
			return ret;
		got = waitpid(pid, status, WNOHANG | __WALL);
		if (got < 0)
			return -errno;
		if (got == 0)
			return HELD_RUNS;
		if (WIFEXITED(*status) || WIFSIGNALED(*status)) {
			*wstatus = *status;
			threads_forget(pid);
			return HELD_ENDED;
		}
		if (WIFSTOPPED(*status) && (*status >> 16) == PTRACE_EVENT_CLONE) {
			/* a thread started: ours from birth, its stops handled with the others' */
			threads_note_clone(pid, pid, *status);
			ret = launch_cont(pid, PTRACE_CONT, 0);
			if (ret && ret != -ESRCH)
				return ret;
			continue;
		}
		if (WIFSTOPPED(*status))
			return HELD_STOPPED;
	}
}

int launch__poll(pid_t pid, struct py_interp *py, int *wstatus, char *err, size_t errlen)
{
	int status, ret;
	pid_t child;

	err[0] = '\0';
	for (;;) {
		ret = next_stop(pid, &status, wstatus, &child);
		/* forks are not followed here (no PTRACE_O_TRACEFORK): were one, it goes */
		if (ret == HELD_FORK) {
			launch__drop_new(child);
			continue;
		}
		/* let go at a stop of ours: whoever did knows */
		if (ret != HELD_STOPPED)
			return ret == HELD_RUNS || ret == HELD_LET_GO ? LAUNCH_NOTHING
			       : ret == HELD_ENDED		      ? -ECHILD
								      : ret;
		if ((status >> 8) != EXEC_EVENT) {
			ret = launch_pass_stop(pid, status);
			/* ESRCH: killed meanwhile; its exit is the next status */
			if (ret && ret != -ESRCH)
				return ret;
			continue;
		}
		return launch__examine(pid, py, err, errlen);
	}
}

/* launch__let_go() of the main thread alone. */
static int let_go_main(pid_t pid, int *wstatus)
{
	int status, sig = 0;

	/* a running tracee cannot be detached: stop it first, and pass on what stopped it */
	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0)) {
		if (errno != ESRCH)
			return -errno;
		/* it ended: its exit is ours to collect first (a -p target's parent waits on us) */
		if (waitpid(pid, &status, WNOHANG | __WALL) == pid &&
		    (WIFEXITED(status) || WIFSIGNALED(status))) {
			*wstatus = status;
			return -ECHILD;
		}
		return 0;
	}
	for (;;) {
		struct timespec pause = {0, 100000};
		pid_t got = waitpid(pid, &status, __WALL | WNOHANG);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == pid && (WIFEXITED(status) || WIFSIGNALED(status))) {
			*wstatus = status;
			threads_forget(pid);
			return -ECHILD;
		}
		if (got == pid && WIFSTOPPED(status))
			break;
		/*
		 * A main thread that exited while others run never stops, and its
		 * exit waits for theirs, each ours to reap: the others go (the
		 * ended ones reaped), and it stays ours until the process ends
		 */
		if (proc_thread_state(pid, pid) == 'Z') {
			threads_release(pid, pid);
			return 0;
		}
		nanosleep(&pause, NULL);
	}
	threads_note_clone(pid, pid, status);
	if (!(status >> 16))
		sig = launch_stop_signal(status);
	/* a fork stop (launch__hold()): the child is ours from birth, and goes too */
	if ((status >> 16) == PTRACE_EVENT_FORK || (status >> 16) == PTRACE_EVENT_VFORK) {
		unsigned long child = 0;

		if (!ptrace(PTRACE_GETEVENTMSG, pid, 0, &child) && child)
			launch__drop_new((pid_t)child);
	}
	return ptrace(PTRACE_DETACH, pid, 0, (void *)(long)sig) ? -errno : 0;
}

int launch__main_only(pid_t pid)
{
	threads_release(pid, pid);
	return ptrace(PTRACE_SETOPTIONS, pid, 0,
		      (void *)(PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD))
		   ? -errno
		   : 0;
}

int launch__let_go(pid_t pid, int *wstatus)
{
	int ret;

	/* the others first: one that ended is reaped, or the main thread's exit would wait */
	threads_release(pid, pid);
	ret = let_go_main(pid, wstatus);
	threads_release(pid, pid); /* one it started meanwhile */
	return ret;
}

int launch__hold(pid_t pid, bool forks, bool stopped)
{
	long opts = HOLD_OPTS;

	/* a child born seized is seized too: its own exec and forks stop it, its SIGSTOP none */
	if (forks)
		opts |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
	if (stopped ? ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)opts)
		    /* as launch__seize(): no SIGSTOP, no PTRACE_O_EXITKILL */
		    : ptrace(PTRACE_SEIZE, pid, 0, (void *)opts))
		return -errno;
	return threads_seize(pid, opts);
}

int launch__poll_held(pid_t pid, pid_t *child, int *wstatus)
{
	int status, ret, ev;

	for (;;) {
		ret = next_stop(pid, &status, wstatus, child);
		/* ECHILD: no tracee of ours by that pid (any more) */
		if (ret < 0)
			return ret == -ECHILD ? -ESRCH : ret;
		if (ret == HELD_LET_GO)
			return -ESRCH;
		if (ret == HELD_FORK)
			return LAUNCH_FORK;
		if (ret != HELD_STOPPED)
			return ret == HELD_RUNS ? LAUNCH_NOTHING : -ECHILD;
		ev = status >> 16;
		if (ev == PTRACE_EVENT_EXEC)
			return LAUNCH_AT_EXEC;
		if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
			ret = launch_forked(pid, child);
			if (ret)
				return ret;
			continue;
		}
		ret = launch_pass_stop(pid, status);
		/* ESRCH: killed meanwhile; its exit is the next status */
		if (ret && ret != -ESRCH)
			return ret;
	}
}

int launch__examine(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	int ret;

	err[0] = '\0';
	ret = check_image(pid, py, err, errlen);
	if (ret == 0)
		memset(py, 0, sizeof(*py));
	if (ret < 0)
		return ret;
	return ret ? LAUNCH_EXEC_PYTHON : LAUNCH_EXEC_OTHER;
}

int launch__interrupt(pid_t pid)
{
	return ptrace(PTRACE_INTERRUPT, pid, 0, 0) ? -errno : 0;
}

int launch__wait_interrupt(pid_t pid, bool *at_exec, pid_t *child)
{
	unsigned long msg;
	int status, ret, ev;

	*at_exec = false;
	for (;;) {
		ret = launch_wait_stop(pid, &status);
		if (ret)
			return ret;
		ev = status >> 16;
		if (ev == PTRACE_EVENT_STOP)
			return 0;
		/* an exec stop is a better stop */
		if (ev == PTRACE_EVENT_EXEC) {
			*at_exec = true;
			return 0;
		}
		if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
			msg = 0;
			ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg);
			ret = launch_cont(pid, PTRACE_CONT, 0);
			if (ret)
				return ret;
			if (!msg)
				continue;
			*child = (pid_t)msg;
			return LAUNCH_FORK;
		}
		/* a signal that stops it first is its own: passed on */
		ret = launch_cont(pid, PTRACE_CONT, launch_stop_signal(status));
		if (ret)
			return ret;
	}
}

int launch__start_any(char **argv, pid_t *pidp, struct py_interp *py, char *err, size_t errlen)
{
	int ret = launch__start(argv, pidp, py, err, errlen);

	return !ret && !py->info ? -ENOEXEC : ret;
}

/* hold_any: one that runs no Python stays held too, past ld.so */
static int catch_common(pid_t pid, struct py_interp *py, bool hold_any, char *err, size_t errlen)
{
	int status, ret;

	err[0] = '\0';
	/* as launch__start(): no PTRACE_O_EXITKILL, no SIGSTOP, so a killed recorder lets it go */
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)PTRACE_O_TRACESYSGOOD))
		return -errno;
	ret = ptrace(PTRACE_INTERRUPT, pid, 0, 0) ? -errno : 0;
	/* a signal that stops it first is its own: passed on, then wait for our stop */
	while (!ret && !(ret = launch_wait_stop(pid, &status)) &&
	       (status >> 16) != PTRACE_EVENT_STOP)
		ret = launch_cont(pid, PTRACE_CONT, launch_stop_signal(status));
	if (!ret)
		ret = check_image(pid, py, err, errlen);
	if (ret == 1)
		return 0;
	if (!ret && hold_any)
		return -ENOEXEC;
	ptrace(PTRACE_DETACH, pid, 0, 0);
	return ret ?: -ENOEXEC;
}

int launch__catch(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	return catch_common(pid, py, false, err, errlen);
}

int launch__catch_any(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	return catch_common(pid, py, true, err, errlen);
}
