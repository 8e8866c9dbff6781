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
#include <unistd.h>

#include "elf_file.h"
#include "launch.h"

#define EXEC_EVENT (SIGTRAP | (PTRACE_EVENT_EXEC << 8))

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

/* Waits for the next stop of pid; forwards signals that are not ours. */
static int wait_stop(pid_t pid, int *status)
{
	for (;;) {
		if (waitpid(pid, status, 0) < 0)
			return -errno;
		if (WIFEXITED(*status) || WIFSIGNALED(*status))
			return -ECHILD;
		if (WIFSTOPPED(*status))
			return 0;
	}
}

static int cont(pid_t pid, int sig)
{
	return ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig) ? -errno : 0;
}

/*
 * An executable that links libpython: ld.so maps it before the program's
 * entry point, so run to a breakpoint there.
 */
static int run_to_entry(pid_t pid)
{
	struct user_regs_struct regs;
	uint64_t entry = 0;
	long word;
	int status, err;

	err = read_auxv_entry(pid, AT_ENTRY, &entry);
	if (err)
		return err;
	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, pid, (void *)entry, 0);
	if (errno)
		return -errno;
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)((word & ~0xffL) | 0xcc)))
		return -errno;
	err = cont(pid, 0);
	while (!err) {
		err = wait_stop(pid, &status);
		if (err)
			return err;
		if (WSTOPSIG(status) == SIGTRAP)
			break;
		err = cont(pid, WSTOPSIG(status));
	}
	if (ptrace(PTRACE_POKETEXT, pid, (void *)entry, (void *)word) ||
	    ptrace(PTRACE_GETREGS, pid, 0, &regs))
		return -errno;
	regs.rip = entry;
	return ptrace(PTRACE_SETREGS, pid, 0, &regs) ? -errno : 0;
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
	int ret;

	if (links_libpython(pid)) {
		ret = run_to_entry(pid);
		if (ret) {
			snprintf(err, errlen, "cannot run the command to its entry point: %s",
				 strerror(-ret));
			return ret;
		}
	}
	ret = py_interp__find(pid, py, err, errlen);
	if (ret == -ENOEXEC)
		return 0;
	return ret ? ret : 1;
}

static void child_exec(char **argv)
{
	/* the recorder ignores it (cmd_record.c); an ignored signal stays so across exec */
	signal(SIGXFSZ, SIG_DFL);
	if (ptrace(PTRACE_TRACEME, 0, 0, 0) == 0)
		raise(SIGSTOP);
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
	int status, ret;
	pid_t pid;

	err[0] = '\0';
	ret = find_program(argv[0], exe, sizeof(exe));
	if (ret) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(-ret));
		return ret;
	}
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child_exec(argv);
	ret = wait_stop(pid, &status);
	if (!ret && ptrace(PTRACE_SETOPTIONS, pid, 0, (void *)PTRACE_O_TRACEEXEC))
		ret = -errno;
	if (!ret)
		ret = cont(pid, 0);
	while (!ret) {
		ret = wait_stop(pid, &status);
		if (ret)
			break;
		if ((status >> 8) != EXEC_EVENT) {
			ret = cont(pid, WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status));
			continue;
		}
		ret = check_image(pid, py, err, errlen);
		if (ret == 1) {
			*pidp = pid;
			return 0;
		}
		if (ret == 0)
			ret = cont(pid, 0);
	}
	if (ret == -ECHILD)
		snprintf(err, errlen, "%s exited before it started a Python interpreter", argv[0]);
	else if (!err[0])
		snprintf(err, errlen, "cannot start %s: %s", argv[0], strerror(-ret));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return ret;
}

int launch__release(pid_t pid)
{
	return ptrace(PTRACE_DETACH, pid, 0, 0) ? -errno : 0;
}
