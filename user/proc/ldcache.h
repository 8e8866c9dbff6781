/* SPDX-License-Identifier: MIT */
/*
 * The dynamic loader's cache (/etc/ld.so.cache, written by ldconfig): which
 * file a bare soname such as "libcuda.so.1" resolves to when no search path
 * has it. Both layouts glibc reads: the old "ld.so-1.7.0" one (alone, or
 * followed by a new table, the "compat" layout) and "glibc-ld.so.cache1.1".
 * The file is untrusted input: every count and offset is checked against
 * its size before use.
 */
#ifndef PTG_LDCACHE_H
#define PTG_LDCACHE_H

#include <stddef.h>
#include <sys/types.h>

/* Larger than any real cache (tens of KiB for thousands of libraries). */
#define LDCACHE_MAX_SIZE (16u << 20)

struct ldcache;

/* Copies and checks the image buf[0..len). -EINVAL for anything malformed, or -ENOMEM. */
int ldcache__parse(const void *buf, size_t len, struct ldcache **out);
/*
 * Reads the cache of pid's root (/proc/PID/root/etc/ld.so.cache), a
 * regular file of at most LDCACHE_MAX_SIZE. -ENOENT when there is none.
 */
int ldcache__load_target(pid_t pid, struct ldcache **out);
size_t ldcache__count(const struct ldcache *c);
/* Entry i: its soname and the path it maps to, both NUL-terminated. */
void ldcache__entry(const struct ldcache *c, size_t i, const char **name, const char **path);
/*
 * Calls cb for each x86-64 glibc entry whose name matches name (a plain
 * name or an fnmatch pattern), in the cache's order
 * (the loader takes the first that fits the CPU; glibc-hwcaps variants come
 * first). A non-zero return of cb stops and is returned.
 */
int ldcache__lookup(const struct ldcache *c, const char *name,
		    int (*cb)(const char *path, void *ctx), void *ctx);
void ldcache__free(struct ldcache *c);

#endif /* PTG_LDCACHE_H */
