// SPDX-License-Identifier: MIT
/*
 * A library whose constructor takes two seconds (and says when it starts,
 * in /tmp/ptg-inject-slow.PID): tests/integration/test_inject.py makes the
 * target exit while an injection waits for this dlopen() to return.
 */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

__attribute__((constructor)) static void inject_slow_init(void)
{
	struct timespec ts = {2, 0};
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/tmp/ptg-inject-slow.%d", getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	while (nanosleep(&ts, &ts)) {
	}
}
