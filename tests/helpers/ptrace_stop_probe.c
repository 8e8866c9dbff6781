// SPDX-License-Identifier: MIT
/*
 * What the kernel does to a thread held in a ptrace-stop when its tracer
 * is killed: the question behind holding a thread that is loading a
 * library until its probes are in (docs/late-libs.md). A target counts in
 * a loop and counts SIGURGs in a handler; a tracer PTRACE_SEIZEs it and
 * stops it one way, then is killed with SIGKILL while it holds the stop:
 *
 *   interrupt        PTRACE_INTERRUPT, the stop waited for
 *   signal-unwaited  a SIGURG sent to it, the stop not yet waited for
 *   signal-waited    a SIGURG sent to it, the stop waited for (waitpid)
 *   signal-nowait    a SIGURG sent to it, the stop seen with waitid(WNOWAIT)
 *   default-unwaited as signal-unwaited, to a target that left SIGURG at
 *                    SIG_DFL (ignored): delivered, and nothing happens
 *
 * usage: ptrace_stop_probe MODE DELAY_US
 * prints "MODE stopped=1 resumed=R handled=H": whether the target ran on
 * after its tracer died (R) and how many SIGURGs its handler got (H).
 * DELAY_US: how long the tracer holds the stop before it is killed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Bounds a wait for something that must happen; not a timing. */
#define WAIT_LIMIT_MS 10000

struct shared {
	volatile long ticks;
	volatile int handled;
	volatile int stopped; /* set by the tracer once it holds the stop */
};

static struct shared *sh;

static void on_urg(int sig)
{
	sh->handled++;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return p && p[1] && p[2] ? p[2] : '?';
}

static void run_target(int handler)
{
	struct sigaction sa = {.sa_handler = on_urg};

	if (handler)
		sigaction(SIGURG, &sa, NULL);
	for (;;)
		sh->ticks++;
}

static int wait_traced(pid_t t)
{
	for (int i = 0; i < WAIT_LIMIT_MS; i++) {
		if (proc_state(t) == 't')
			return 0;
		sleep_ms(1);
	}
	return -ETIMEDOUT;
}

static void run_tracer(pid_t t, const char *mode)
{
	siginfo_t si;
	int st;

	if (ptrace(PTRACE_SEIZE, t, 0, 0))
		_exit(2);
	if (!strcmp(mode, "interrupt")) {
		if (ptrace(PTRACE_INTERRUPT, t, 0, 0) || waitpid(t, &st, __WALL) != t)
			_exit(3);
	} else {
		if (syscall(SYS_tgkill, t, t, SIGURG))
			_exit(3);
		if (!strcmp(mode, "signal-unwaited") || !strcmp(mode, "default-unwaited")) {
			if (wait_traced(t))
				_exit(4);
		} else if (!strcmp(mode, "signal-waited")) {
			if (waitpid(t, &st, __WALL) != t || !WIFSTOPPED(st) ||
			    WSTOPSIG(st) != SIGURG)
				_exit(4);
		} else {
			if (waitid(P_PID, t, &si, WSTOPPED | WNOWAIT | __WALL) ||
			    si.si_status != SIGURG)
				_exit(4);
		}
	}
	sh->stopped = 1;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	long ticks, delay_us = argc > 2 ? atol(argv[2]) : 0;
	int resumed = 0, st;
	pid_t t, r;

	if (argc < 2)
		return 2;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	t = fork();
	if (t == 0)
		run_target(strcmp(argv[1], "default-unwaited"));
	while (!sh->ticks)
		sleep_ms(1);
	r = fork();
	if (r == 0)
		run_tracer(t, argv[1]);
	for (int i = 0; i < WAIT_LIMIT_MS && !sh->stopped && !waitpid(r, &st, WNOHANG); i++)
		sleep_ms(1);
	if (!sh->stopped || proc_state(t) != 't') {
		fprintf(stderr, "ptrace_stop_probe: the tracer did not stop the target\n");
		kill(t, SIGKILL);
		kill(r, SIGKILL);
		return 1;
	}
	usleep(delay_us);
	ticks = sh->ticks;
	kill(r, SIGKILL);
	waitpid(r, &st, 0);
	for (int i = 0; i < WAIT_LIMIT_MS && !resumed; i++) {
		resumed = sh->ticks != ticks;
		if (!resumed)
			sleep_ms(1);
	}
	/* the handler runs before the interrupted loop goes on, if it runs */
	printf("%s stopped=1 resumed=%d handled=%d\n", argv[1], resumed, sh->handled);
	kill(t, SIGKILL);
	waitpid(t, &st, 0);
	return 0;
}
