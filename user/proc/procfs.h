/* SPDX-License-Identifier: MIT */
/* What /proc tells about a target process: mappings, memory, names. */
#ifndef PTG_PROCFS_H
#define PTG_PROCFS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct proc_map {
	uint64_t start;
	uint64_t end;
	uint64_t offset;
	uint64_t inode;
	uint64_t dev; /* the line's MAJOR:MINOR as makedev() gives it: st_dev of the file */
	char perms[5];
	char path[PATH_MAX];
};

/* Calls cb for each line of /proc/PID/maps; a non-zero return of cb stops and is returned. */
int proc_maps__for_each(pid_t pid, int (*cb)(const struct proc_map *m, void *ctx), void *ctx);
/*
 * The same over a maps text from f, read in whole lines: a line that is no
 * mapping, or whose path is PATH_MAX bytes or more, is skipped whole.
 */
int proc_maps__read(FILE *f, int (*cb)(const struct proc_map *m, void *ctx), void *ctx);
bool proc_exists(pid_t pid);
/* The process whose ptrace holds pid (a tid works too): 0 when none, or -errno. */
int proc_tracer_pid(pid_t pid);
/* The real uid of pid (/proc/PID/status), the one bpf_get_current_uid_gid() gives. */
int proc_uid(pid_t pid, uid_t *uid);
/* The effective uid of pid (what SO_PEERCRED gives), or -errno. */
int proc_euid(pid_t pid, uid_t *uid);
/*
 * A pid given as text: decimal, 1..INT_MAX. Anything else is -EINVAL, never
 * cut down to a pid_t that names another process (4294967297 is not pid 1).
 */
int parse_pid(const char *s, pid_t *pid);
/*
 * "PID[,PID...]", each as parse_pid() takes it, appended to pids[*n..max):
 * -EINVAL for a bad one or an empty item, -E2BIG past max.
 */
int parse_pid_list(const char *s, pid_t *pids, int max, int *n);
/* Field 22 of /proc/PID/stat: with the pid, what names one process (pids are reused). */
int proc_start_time(pid_t pid, uint64_t *ticks);
/* Field 3 of /proc/PID/task/TID/stat, the state letter ('R', 'S', 't', 'Z'...), or -errno. */
int proc_thread_state(pid_t pid, pid_t tid);
/* Reads len bytes of the target's memory at addr through an fd of /proc/PID/mem. */
int proc_mem_read(int memfd, uint64_t addr, void *buf, size_t len);
/* The command line with arguments separated by spaces. */
int proc_cmdline(pid_t pid, char *buf, size_t len);
/*
 * The value of the variable name in the environment the target started with
 * (/proc/PID/environ). Returns 0, -ENOENT when it has none, or -errno.
 */
int proc_environ_get(pid_t pid, const char *name, char *buf, size_t len);
/*
 * The value of name in pid's environment when it is a decimal number (a rank,
 * a world size: only digits go into a file name or a trace), else -ENOENT
 * with buf "".
 */
int proc_environ_number(pid_t pid, const char *name, char *buf, size_t len);
/* /proc/PID/task/TID/comm without the newline. */
int proc_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/*
 * The ids of thread tid of pid in the pid namespaces it is in, from the
 * NStgid and NSpid lines of /proc/PID/task/TID/status: ours first (pid,
 * tid), the target's own last. levels = how many namespaces (1: ours only;
 * a target in a container has 2 or more). Returns 0 or -errno (-ENOENT: the
 * kernel shows no NSpid, before 4.1).
 */
#define PROC_NS_MAX 32 /* the kernel's MAX_PID_NS_LEVEL */
struct proc_ns_ids {
	unsigned int levels;
	uint32_t pid[PROC_NS_MAX];
	uint32_t tid[PROC_NS_MAX];
};
int proc_ns_ids(pid_t pid, pid_t tid, struct proc_ns_ids *ids);

#endif /* PTG_PROCFS_H */
