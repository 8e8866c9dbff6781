// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "proc/elf_file.h"
#include "proc/ldcache.h"
#include "proc/libsearch.h"
#include "proc/libsearch_int.h"
#include "proc/procfs.h"
#include "proc/procopen.h"

/* The loader's own directories (Debian's and the FHS' x86-64 ones), searched last. */
static const char *const trusted_dirs[] = {"/lib/x86_64-linux-gnu",
					   "/usr/lib/x86_64-linux-gnu",
					   "/lib64",
					   "/usr/lib64",
					   "/lib",
					   "/usr/lib"};

/*
 * $LIB is a build-time choice of glibc: "lib/x86_64-linux-gnu" on Debian
 * and Ubuntu, "lib64" on Fedora and most others; both are tried.
 */
static const char *const lib_values[] = {"lib/x86_64-linux-gnu", "lib64"};

/*
 * Expands the first $ORIGIN, $LIB or $PLATFORM (or ${...}) of entry at or
 * after from into each of its values and recurses past the value (a value
 * is not expanded again, as in the loader); adds the results. *budget
 * bounds how many one entry makes, and so the work a hostile one costs.
 */
static int expand(struct libsearch *s, const char *entry, size_t len, size_t from,
		  const char *origin, enum dir_kind kind, int *budget)
{
	static const char *const names[] = {"ORIGIN", "LIB", "PLATFORM"};
	const char *dollar = memchr(entry + from, '$', len - from);
	char out[PATH_MAX];
	int err = 0;

	if (*budget <= 0)
		return 0;
	if (!dollar) {
		--*budget;
		return libsearch_add_dir(s, entry, len, kind);
	}
	for (int t = 0; t < 3; t++) {
		size_t nl = strlen(names[t]), pre = dollar - entry, rest = len - pre - 1, skip;
		const char *vals[3] = {};
		int nvals = 0;

		if (rest >= nl + 2 && dollar[1] == '{' && !strncmp(dollar + 2, names[t], nl) &&
		    dollar[2 + nl] == '}')
			skip = nl + 3;
		else if (rest >= nl && !strncmp(dollar + 1, names[t], nl) &&
			 (rest == nl || dollar[1 + nl] == '/'))
			skip = nl + 1;
		else
			continue;
		if (t == 0 && origin)
			vals[nvals++] = origin;
		if (t == 1)
			vals[nvals++] = lib_values[0], vals[nvals++] = lib_values[1];
		/* glibc may name the platform after the CPU instead (x86-64: haswell, xeon_phi) */
		if (t == 2 && s->platform[0])
			vals[nvals++] = s->platform, vals[nvals++] = "haswell",
			vals[nvals++] = "xeon_phi";
		for (int v = 0; !err && v < nvals; v++) {
			int n = snprintf(out, sizeof(out), "%.*s%s%.*s", (int)pre, entry, vals[v],
					 (int)(len - pre - skip), dollar + skip);

			if (n > 0 && (size_t)n < sizeof(out))
				err =
				    expand(s, out, n, pre + strlen(vals[v]), origin, kind, budget);
		}
		return err;
	}
	return 0; /* an unknown token: the loader ignores the whole entry */
}

static int add_list(struct libsearch *s, const char *list, const char *origin, enum dir_kind kind)
{
	int err = 0;

	for (const char *p = list; !err && *p;) {
		size_t len = strcspn(p, ":;");
		int budget = MAX_VARIANTS;

		err = expand(s, p, len, 0, origin, kind, &budget);
		p += len + !!p[len];
	}
	return err;
}

int libsearch__add_object(struct libsearch *s, const char *path, const char *open_path)
{
	char rpath[4096], runpath[4096], origin[PATH_MAX];
	struct elf_file *ef;
	const char *slash;
	int err = 0, has_rpath, has_runpath;

	path = libsearch_target_view(s, path);
	slash = strrchr(path, '/');
	if (!slash || elf_file__open(open_path, &ef))
		return 0;
	has_rpath = !elf_file__dyn_string(ef, DT_RPATH, rpath, sizeof(rpath));
	has_runpath = !elf_file__dyn_string(ef, DT_RUNPATH, runpath, sizeof(runpath));
	elf_file__close(ef);
	snprintf(origin, sizeof(origin), "%.*s", (int)(slash - path), path);
	/* the loader ignores DT_RPATH where DT_RUNPATH is present */
	if (has_runpath)
		err = add_list(s, runpath, origin[0] ? origin : "/", DIR_RUNPATH);
	else if (has_rpath)
		err = add_list(s, rpath, origin[0] ? origin : "/", DIR_RPATH);
	return err;
}

/* AT_PLATFORM of the target's auxiliary vector, read from its memory. */
static void read_platform(struct libsearch *s)
{
	uint64_t auxv[2 * 64], addr = 0;
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/auxv", s->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, auxv, sizeof(auxv));
	close(fd);
	for (ssize_t i = 0; i + 1 < n / 8; i += 2) {
		if (auxv[i] == AT_PLATFORM)
			addr = auxv[i + 1];
	}
	snprintf(path, sizeof(path), "/proc/%d/mem", s->pid);
	fd = addr ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return;
	if (proc_mem_read(fd, addr, s->platform, sizeof(s->platform) - 1) ||
	    strpbrk(s->platform, "/"))
		s->platform[0] = '\0';
	close(fd);
}

static int read_target(struct libsearch *s)
{
	char link[64], exe[PATH_MAX], *env;
	ssize_t n;
	int err;

	snprintf(link, sizeof(link), "/proc/%d/root", s->pid);
	n = readlink(link, s->root, sizeof(s->root) - 1);
	s->root[n > 0 ? n : 0] = '\0';
	s->rootlen = n > 0 ? n : 0;
	read_platform(s);
	env = malloc(65536);
	if (!env)
		return -ENOMEM;
	err = proc_environ_get(s->pid, "LD_LIBRARY_PATH", env, 65536);
	err = err ? 0 : add_list(s, env, NULL, DIR_ENV);
	free(env);
	if (err)
		return err;
	/* the executable as maps names it, and readable through its root */
	snprintf(link, sizeof(link), "/proc/%d/exe", s->pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	return libsearch__add_object(s, exe, link) ?: libsearch_add_site_dirs(s, exe);
}

int libsearch__open(pid_t pid, struct libsearch **out)
{
	struct libsearch *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->pid = pid;
	err = read_target(s);
	if (err) {
		libsearch__free(s);
		return err;
	}
	err = ldcache__load_target(pid, &s->cache);
	if (err && err != -ENOENT)
		pr_warn("libwatch: ignoring the target's /etc/ld.so.cache: %s", strerror(-err));
	*out = s;
	return 0;
}

unsigned libsearch__generation(const struct libsearch *s)
{
	return s->gen;
}

struct find {
	struct libsearch *s;
	const char *pattern;
	int (*cb)(void *ctx, const char *dir, const char *file);
	void *ctx;
};

/*
 * Looked at inside the target's root (procopen.h): a container's absolute
 * links resolve in it, never on our side.
 */
static int find_in_dir(struct find *f, const char *dir)
{
	char path[PATH_MAX + 256];
	struct dirent *de;
	int ret = 0;
	DIR *d;

	if (!strpbrk(f->pattern, "*?[")) {
		snprintf(path, sizeof(path), "%s/%s", dir, f->pattern);
		if (!proc_root_is(f->s->pid, path, false))
			return 0;
		return f->cb(f->ctx, dir, f->pattern);
	}
	d = proc_root_opendir(f->s->pid, dir);
	while (d && !ret && (de = readdir(d))) {
		if (fnmatch(f->pattern, de->d_name, 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (proc_root_is(f->s->pid, path, false))
			ret = f->cb(f->ctx, dir, de->d_name);
	}
	if (d)
		closedir(d);
	return ret;
}

/*
 * glibc 2.33 and later look first in the glibc-hwcaps subfolders of each
 * folder of the search path, the best level the CPU has first; any of them
 * may be the one, so all are looked in.
 */
static const char *const hwcaps[] = {"glibc-hwcaps/x86-64-v4", "glibc-hwcaps/x86-64-v3",
				     "glibc-hwcaps/x86-64-v2"};

static int find_in_dir_hwcaps(struct find *f, const char *dir)
{
	char sub[PATH_MAX];
	int ret = 0;

	for (size_t i = 0; !ret && i < sizeof(hwcaps) / sizeof(hwcaps[0]); i++) {
		if (snprintf(sub, sizeof(sub), "%s/%s", strcmp(dir, "/") ? dir : "", hwcaps[i]) <
		    (int)sizeof(sub))
			ret = find_in_dir(f, sub);
	}
	return ret ?: find_in_dir(f, dir);
}

/* A cached path: looked at as the file of its directory, so that it too is checked to exist. */
static int find_cached_path(const char *path, void *ctx)
{
	struct find *f = ctx;
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];

	if (path[0] != '/' || !slash[1] || (size_t)(slash - path) >= sizeof(dir))
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (strpbrk(slash + 1, "*?["))
		return 0; /* a name that would be taken for a pattern: no library's */
	return find_in_dir(&(struct find){f->s, slash + 1, f->cb, f->ctx}, dir[0] ? dir : "/");
}

int libsearch__find(struct libsearch *s, const char *pattern,
		    int (*cb)(void *ctx, const char *dir, const char *file), void *ctx)
{
	struct find f = {s, pattern, cb, ctx};
	int ret = 0;

	for (enum dir_kind k = 0; !ret && k < NKINDS; k++) {
		for (int i = 0; !ret && i < s->n; i++)
			ret = s->kind[i] == k ? find_in_dir_hwcaps(&f, s->dirs[i]) : 0;
	}
	if (!ret && s->cache)
		ret = ldcache__lookup(s->cache, pattern, find_cached_path, &f);
	for (size_t i = 0; !ret && i < sizeof(trusted_dirs) / sizeof(trusted_dirs[0]); i++)
		ret = find_in_dir_hwcaps(&f, trusted_dirs[i]);
	return ret;
}

void clean_path(char *path)
{
	char *out = path, *in = path;

	if (path[0] != '/')
		return;
	while (*in) {
		size_t len;

		while (*in == '/')
			in++;
		len = strcspn(in, "/");
		if ((len == 1 && in[0] == '.') || !len) {
			/* nothing to keep */
		} else if (len == 2 && in[0] == '.' && in[1] == '.') {
			while (out > path && *--out != '/')
				;
		} else {
			*out++ = '/';
			memmove(out, in, len);
			out += len;
		}
		in += len;
	}
	if (out == path)
		*out++ = '/';
	*out = '\0';
}

void libsearch__free(struct libsearch *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		free(s->dirs[i]);
	ldcache__free(s->cache);
	free(s);
}
