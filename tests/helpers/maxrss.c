// SPDX-License-Identifier: MIT
/*
 * maxrss FD CMD [ARG...]: runs CMD, writes its peak resident set size in KiB
 * to the inherited file descriptor FD and exits with its status. The tests
 * cannot measure it themselves: a child's ru_maxrss counts the memory of the
 * process that forked it, a whole Python interpreter there, a small one here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru;
	int status, fd;
	char *end;
	pid_t pid;

	fd = argc >= 3 ? (int)strtol(argv[1], &end, 10) : -1;
	if (fd < 0 || *end) {
		fprintf(stderr, "usage: maxrss FD CMD [ARG...]\n");
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("maxrss: fork");
		return 125;
	}
	if (!pid) {
		close(fd);
		execvp(argv[2], argv + 2);
		fprintf(stderr, "maxrss: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0) {
		perror("maxrss: wait4");
		return 125;
	}
	dprintf(fd, "%ld\n", ru.ru_maxrss);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
