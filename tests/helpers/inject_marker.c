// SPDX-License-Identifier: MIT
/*
 * A library for tests/integration/test_inject.py to load into running
 * processes: its constructor proves it ran in the target by writing the
 * target's pid to /tmp/ptg-inject-marker.PID; inject_marker_call() proves
 * that `inject --call` reaches it with its argument.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void write_file(const char *prefix, const char *text)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/tmp/%s.%d", prefix, getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0) {
		/* the test sees the file empty and fails with that */
	}
	close(fd);
}

__attribute__((constructor)) static void inject_marker_init(void)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d\n", getpid());
	write_file("ptg-inject-marker", pid);
}

__attribute__((visibility("default"))) int inject_marker_call(const char *arg)
{
	write_file("ptg-inject-call", arg);
	return 42;
}
