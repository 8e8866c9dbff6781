// SPDX-License-Identifier: MIT
/*
 * inject_opts.held_tid: a library loaded into a thread that is our tracee
 * already, stopped where we want it (here by a SIGURG's signal-delivery
 * stop, as a BPF program would stop it), and left stopped for us: the
 * marker library's constructor runs, the thread stays in its stop, and the
 * resume without the signal drops it (the target's handler never runs).
 * A child of ours, so no root is needed.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject/inject.h"
#include "test.h"

static volatile sig_atomic_t got_urg;

static void on_urg(int sig)
{
	(void)sig;
	got_urg = 1;
}

/* Spins in its own code until the marker appears: 0, 3 if SIGURG reached it, 4 at the timeout. */
static int child(int ready)
{
	struct sigaction sa = {.sa_handler = on_urg};
	char path[64];
	time_t end = time(NULL) + 20;
	volatile unsigned long spin = 0;

	sigaction(SIGURG, &sa, NULL);
	snprintf(path, sizeof(path), "/tmp/ptg-inject-marker.%d", getpid());
	if (write(ready, "r", 1) != 1)
		return 5;
	while (access(path, F_OK)) {
		for (int i = 0; i < 100000; i++)
			spin++;
		if (time(NULL) > end)
			return 4;
	}
	return got_urg ? 3 : 0;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[256], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return p && p[1] ? p[2] : '?';
}

int main(void)
{
	char lib[PATH_MAX + 32], exe[PATH_MAX], err[512], c, marker[64];
	struct inject_result res;
	struct inject_opts o = {0};
	int fds[2], status = 0, ret;
	ssize_t n;
	pid_t pid;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 1;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(lib, sizeof(lib), "%s/libinject_marker.so", exe);
	if (access(lib, R_OK)) {
		printf("skip: no %s (the test helpers are not built)\n", lib);
		return 77;
	}
	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(child(fds[1]));
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		return 1;
	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)PTRACE_O_TRACESYSGOOD)) {
		printf("skip: cannot trace a child here: %s\n", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 77;
	}
	/*
	 * Stopped as the BPF side would stop it: the signal's delivery is our
	 * stop. One that lands in a system call of libc's (the child's access())
	 * is no safe point: refused (-EAGAIN), and the child is let run a little.
	 */
	o.held_tid = pid;
	for (int tries = 0;; tries++) {
		syscall(SYS_tgkill, pid, pid, SIGURG);
		ASSERT_EQ(waitpid(pid, &status, __WALL), pid, "the stop is ours");
		ASSERT_TRUE(WIFSTOPPED(status) && WSTOPSIG(status) == SIGURG && !(status >> 16),
			    "a SIGURG signal-delivery stop");
		err[0] = '\0';
		ret = inject_library(pid, lib, &o, &res, err, sizeof(err));
		if (ret != -EAGAIN || tries == 100)
			break;
		ptrace(PTRACE_CONT, pid, 0, 0);
		usleep(1000);
	}
	ASSERT_EQ(ret, 0, err);
	ASSERT_TRUE(!res.released, "still ours");
	snprintf(marker, sizeof(marker), "/tmp/ptg-inject-marker.%d", pid);
	ASSERT_EQ(access(marker, F_OK), 0, "the library's constructor ran");
	/* left in a ptrace stop for us, not running */
	ASSERT_EQ(proc_state(pid), 't', "in a ptrace stop");

	/* resumed without the signal: its handler never runs, and it sees the marker */
	ASSERT_EQ(ptrace(PTRACE_CONT, pid, 0, 0), 0, "resume");
	ASSERT_EQ(waitpid(pid, &status, __WALL), pid, "its end");
	ASSERT_TRUE(WIFEXITED(status), "it exited");
	ASSERT_EQ(WEXITSTATUS(status), 0, "no SIGURG reached it, and it ran on");
	unlink(marker);

	printf("%d checks, %d failures\n", test_checks, test_failures);
	return test_failures ? 1 : 0;
}
