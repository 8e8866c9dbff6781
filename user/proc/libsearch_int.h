/* SPDX-License-Identifier: MIT */
/* Inside the search path (libsearch.c): shared with libsearch_site.c. */
#ifndef PTG_LIBSEARCH_INT_H
#define PTG_LIBSEARCH_INT_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* Far more than real programs have; a hostile one cannot make us grow past it. */
#define MAX_DIRS     256
#define MAX_VARIANTS 8

struct ldcache;

/*
 * DIR_SITE: not the loader's, but where Python packages keep the libraries
 * they load by full path (PyTorch's torch/lib): see libsearch_site.c.
 */
enum dir_kind { DIR_RPATH, DIR_ENV, DIR_RUNPATH, DIR_SITE, NKINDS };

struct libsearch {
	pid_t pid;
	char root[PATH_MAX]; /* the target's root as we see it, "/" unless chrooted */
	size_t rootlen;
	char platform[64]; /* AT_PLATFORM */
	struct ldcache *cache;
	char *dirs[MAX_DIRS];
	enum dir_kind kind[MAX_DIRS];
	int n;
	unsigned gen;
};

/* Adds dir (len bytes; the target's view) for kind, once: 0 or -ENOMEM. */
static inline int libsearch_add_dir(struct libsearch *s, const char *dir, size_t len,
				    enum dir_kind kind)
{
	/* relative entries depend on the target's working directory: not guessed */
	if (!len || dir[0] != '/' || len >= PATH_MAX)
		return 0;
	for (int i = 0; i < s->n; i++) {
		if (s->kind[i] == kind && !strncmp(s->dirs[i], dir, len) && !s->dirs[i][len])
			return 0;
	}
	if (s->n == MAX_DIRS)
		return 0;
	s->dirs[s->n] = strndup(dir, len);
	if (!s->dirs[s->n])
		return -ENOMEM;
	s->kind[s->n++] = kind;
	s->gen++;
	return 0;
}

/* A path from /proc/PID/maps (our view) as the target names it. */
static inline const char *libsearch_target_view(const struct libsearch *s, const char *path)
{
	if (s->rootlen > 1 && !strncmp(path, s->root, s->rootlen) && path[s->rootlen] == '/')
		return path + s->rootlen;
	return path;
}

/* The torch/lib folders of a Python's site folders (libsearch_site.c): 0 or -ENOMEM. */
int libsearch_add_site_dirs(struct libsearch *s, const char *exe);

#endif /* PTG_LIBSEARCH_INT_H */
