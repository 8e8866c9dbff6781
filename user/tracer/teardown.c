// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "base/log.h"
#include "tracer/teardown.h"

/* from this many on (per-site perf events: kernels before 6.6), a child closes them */
#define CHILD_MIN 16

static bool defer;
static struct bpf_link **links;
static size_t nlinks, links_cap;
static int *fds;
static size_t nfds, fds_cap;

void teardown_defer(bool on)
{
	defer = on;
}

void teardown_link(struct bpf_link *link)
{
	if (!link)
		return;
	if (defer && nlinks == links_cap) {
		size_t cap = links_cap ? 2 * links_cap : 64;
		struct bpf_link **n = realloc(links, cap * sizeof(*n));

		if (n) {
			links = n;
			links_cap = cap;
		}
	}
	if (!defer || nlinks == links_cap) {
		bpf_link__destroy(link);
		return;
	}
	links[nlinks++] = link;
}

void teardown_fd(int fd)
{
	if (fd < 0)
		return;
	if (defer && nfds == fds_cap) {
		size_t cap = fds_cap ? 2 * fds_cap : 16;
		int *n = realloc(fds, cap * sizeof(*n));

		if (n) {
			fds = n;
			fds_cap = cap;
		}
	}
	if (!defer || nfds == fds_cap) {
		close(fd);
		return;
	}
	fds[nfds++] = fd;
}

size_t teardown_pending(void)
{
	return nlinks + nfds;
}

static void close_all(void)
{
	for (size_t i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
}

/* This process lets go of them: its copies of the descriptors close with it, cheaply. */
static void forget_all(void)
{
	for (size_t i = 0; i < nlinks; i++) {
		bpf_link__disconnect(links[i]);
		bpf_link__destroy(links[i]);
	}
}

static void free_lists(void)
{
	free(links);
	free(fds);
	links = NULL;
	fds = NULL;
	nlinks = links_cap = nfds = fds_cap = 0;
}

/*
 * The child keeps the kernel objects the links are made of (perf events,
 * BPF links, programs and maps: anonymous inodes) and nothing else: a pipe
 * or a socket kept open would hold up whoever waits for its other end
 * (a shell's pipeline, an agent that hangs up when we do).
 */
static void close_others(void)
{
	char path[64], target[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	ssize_t n;
	int fd;

	if (!dir)
		return;
	while ((d = readdir(dir))) {
		fd = atoi(d->d_name);
		if (d->d_name[0] == '.' || fd <= 2 || fd == dirfd(dir))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if (strncmp(target, "anon_inode:", 11))
			close(fd);
	}
	closedir(dir);
}

int teardown_run(void)
{
	pid_t pid;
	int null, err;

	/* a few (uprobe_multi links: one a library) take a few grace periods: here */
	if (teardown_pending() < CHILD_MIN) {
		close_all();
		free_lists();
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		/* nobody waits for it, nor reads what it would say; no terminal's signals */
		setsid();
		null = open("/dev/null", O_RDWR);
		for (int fd = 0; null >= 0 && fd <= 2; fd++)
			dup2(null, fd);
		close_others();
		close_all();
		_exit(0);
	}
	if (pid < 0) {
		err = -errno;
		pr_debug("teardown: no child (%s): closing %zu probe links here", strerror(-err),
			 teardown_pending());
		close_all();
		free_lists();
		return err;
	}
	forget_all();
	free_lists();
	return pid;
}
