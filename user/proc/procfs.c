// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/numarg.h"
#include "proc/procfs.h"

/*
 * One line of maps, its newline gone, into m: 0, or -EINVAL for a line that
 * is not a mapping or whose path does not fit m->path (such a mapping is
 * skipped whole: never can a part of its path pass for a line of its own).
 */
static int parse_map_line(const char *line, size_t len, struct proc_map *m)
{
	unsigned int major, minor;
	int pos = 0;

	memset(m, 0, sizeof(*m));
	if (strlen(line) != len) /* a NUL inside: not what the kernel writes */
		return -EINVAL;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m->start,
		   &m->end, m->perms, &m->offset, &major, &minor, &m->inode, &pos) < 7)
		return -EINVAL;
	m->dev = makedev(major, minor);
	if (pos > 0) {
		if (len - (size_t)pos >= sizeof(m->path))
			return -EINVAL;
		memcpy(m->path, line + pos, len - (size_t)pos + 1);
	}
	return 0;
}

int proc_maps__read(FILE *f, int (*cb)(const struct proc_map *m, void *ctx), void *ctx)
{
	struct proc_map *m = malloc(sizeof(*m));
	size_t cap = 0;
	char *line = NULL;
	ssize_t n;
	int err = 0;

	if (!m)
		return -ENOMEM;
	/* whole lines, however long: a path is the rest of its line */
	while (!err && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (!parse_map_line(line, (size_t)n, m))
			err = cb(m, ctx);
	}
	free(line);
	free(m);
	return err;
}

int proc_maps__for_each(pid_t pid, int (*cb)(const struct proc_map *m, void *ctx), void *ctx)
{
	char path[64];
	int err;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	err = proc_maps__read(f, cb, ctx);
	fclose(f);
	return err;
}

int parse_pid(const char *s, pid_t *pid)
{
	uint64_t v;

	/* digits only: no sign, space or base prefix (numarg.h) */
	if (parse_u64(s, 1, ARG_PID_MAX, &v))
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

int parse_pid_list(const char *s, pid_t *pids, int max, int *n)
{
	char buf[1024], *save = NULL, *tok;

	/* no empty item: "1,,2" is a typo, not two pids */
	if (strlen(s) >= sizeof(buf) || !s[0] || s[0] == ',' || s[strlen(s) - 1] == ',' ||
	    strstr(s, ",,"))
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == max)
			return -E2BIG;
		if (parse_pid(tok, &pids[*n]))
			return -EINVAL;
		(*n)++;
	}
	return 0;
}

/*
 * The first line of /proc/PID/status that fmt (a key, then conversions)
 * reads n values from: 0, -ENOENT when no line has them, or -errno.
 */
static int status_scan(pid_t pid, const char *fmt, int n, ...)
{
	char path[64], line[256];
	int err = -ENOENT;
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (err && fgets(line, sizeof(line), f)) {
		va_start(ap, n);
		if (vsscanf(line, fmt, ap) == n)
			err = 0;
		va_end(ap);
	}
	fclose(f);
	return err;
}

/* The Uid line of /proc/PID/status: real, effective, saved, filesystem. */
static int proc_uids(pid_t pid, uid_t *real, uid_t *effective)
{
	unsigned int r, e;
	int err = status_scan(pid, "Uid: %u %u", 2, &r, &e);

	if (!err) {
		*real = r;
		*effective = e;
	}
	return err;
}

int proc_tracer_pid(pid_t pid)
{
	int tp = 0;
	int err = status_scan(pid, "TracerPid: %d", 1, &tp);

	return err == -ENOENT ? 0 : err ?: tp;
}

int proc_uid(pid_t pid, uid_t *uid)
{
	uid_t e;

	return proc_uids(pid, uid, &e);
}

int proc_euid(pid_t pid, uid_t *uid)
{
	uid_t r;

	return proc_uids(pid, &r, uid);
}

bool proc_exists(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int proc_mem_read(int memfd, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pread(memfd, buf, len, (off_t)addr);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int read_small_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return (int)n;
}

int proc_start_time(pid_t pid, uint64_t *ticks)
{
	char path[64], buf[1024], *p;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	/* the command name may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	for (int field = 3; p && field <= 22; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EINVAL;
	*ticks = strtoull(p + 1, NULL, 10);
	return 0;
}

int proc_thread_state(pid_t pid, pid_t tid)
{
	char path[64], buf[1024], *p;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] ? p[2] : -EINVAL;
}

int proc_cmdline(pid_t pid, char *buf, size_t len)
{
	char path[64];
	int n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	n = read_small_file(path, buf, len);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		if (buf[i] == '\0')
			buf[i] = ' ';
	}
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
	return 0;
}

int proc_environ_get(pid_t pid, const char *name, char *buf, size_t len)
{
	/* torchrun's children have environments of a few KiB; a job's rarely past this */
	size_t cap = 256 * 1024, nlen = strlen(name);
	char path[64], *env = malloc(cap), *p, *end;
	int n, err = -ENOENT;

	if (!env)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	n = read_small_file(path, env, cap);
	if (n < 0)
		err = n;
	for (p = env, end = env + (n > 0 ? n : 0); p < end; p += strlen(p) + 1) {
		if (strncmp(p, name, nlen) || p[nlen] != '=')
			continue;
		err = strlen(p + nlen + 1) < len ? 0 : -ENAMETOOLONG;
		if (!err)
			strcpy(buf, p + nlen + 1);
		break;
	}
	free(env);
	return err;
}

int proc_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	int n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	n = read_small_file(path, buf, len);
	if (n < 0)
		return n;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* The numbers after "key:" in a status file, at most PROC_NS_MAX. */
static unsigned int parse_ns_line(const char *status, const char *key, uint32_t *ids)
{
	const char *p = strstr(status, key);
	unsigned int n = 0;
	char *end;

	/* a key at the start of a line only, not inside another line's text */
	while (p && p != status && p[-1] != '\n')
		p = strstr(p + 1, key);
	if (!p)
		return 0;
	p += strlen(key);
	while (n < PROC_NS_MAX) {
		unsigned long v;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			break;
		errno = 0;
		v = strtoul(p, &end, 10);
		if (errno || v > UINT32_MAX)
			break;
		ids[n++] = (uint32_t)v;
		p = end;
	}
	return n;
}

int proc_ns_ids(pid_t pid, pid_t tid, struct proc_ns_ids *ids)
{
	char path[64], buf[4096];
	unsigned int np, nt;
	int n;

	memset(ids, 0, sizeof(*ids));
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	n = read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	np = parse_ns_line(buf, "NStgid:", ids->pid);
	nt = parse_ns_line(buf, "NSpid:", ids->tid);
	/* both list one id per namespace the thread is in, ours first */
	if (!np || np != nt)
		return -ENOENT;
	ids->levels = np;
	return 0;
}

int proc_environ_number(pid_t pid, const char *name, char *buf, size_t len)
{
	if (proc_environ_get(pid, name, buf, len) || !buf[0] ||
	    strspn(buf, "0123456789") != strlen(buf)) {
		buf[0] = '\0';
		return -ENOENT;
	}
	return 0;
}
