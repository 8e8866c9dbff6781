/* SPDX-License-Identifier: MIT */
/*
 * How an injected agent gets its connection to the loader: the entry's
 * argument is "fd:N", N the agent's end of a socketpair that the borrowed
 * thread made (user/inject/inject.c, inject_opts.pass_socket), whose other end
 * the loader took with pidfd_getfd. No name exists that anyone else could
 * connect to. The injector closes N once the entry returns: an agent that
 * keeps the connection takes a copy.
 */
#ifndef PTG_AGENT_FD_H
#define PTG_AGENT_FD_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A copy (close-on-exec) of the fd arg names, or -EINVAL when arg is no "fd:N". */
static inline int ptg_agent_take_fd(const char *arg)
{
	char *end;
	long n;
	int fd;

	if (!arg || strncmp(arg, "fd:", 3))
		return -EINVAL;
	errno = 0;
	n = strtol(arg + 3, &end, 10);
	if (errno || end == arg + 3 || *end || n < 0 || n > INT_MAX)
		return -EINVAL;
	fd = fcntl((int)n, F_DUPFD_CLOEXEC, 3);
	return fd < 0 ? -errno : fd;
}

#endif /* PTG_AGENT_FD_H */
