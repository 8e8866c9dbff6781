// SPDX-License-Identifier: MIT
/* Which files are the ranks of a job: the arguments, directories expanded (ranks.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/ranks.h"
#include "base/array.h"
#include "base/log.h"

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

bool ranks_wanted(char *const *paths, size_t n)
{
	return n > 1 || (n == 1 && is_dir(paths[0]));
}

void ranks_paths_free(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

static int add_path(char ***paths, size_t *n, size_t *cap, const char *dir, const char *name)
{
	char *p;

	if (*n >= RANKS_MAX)
		return -E2BIG;
	if (array_grow((void **)paths, cap, *n + 1, sizeof(**paths)))
		return -ENOMEM;
	if (dir ? asprintf(&p, "%s/%s", dir, name) < 0 : !(p = strdup(name)))
		return -ENOMEM;
	(*paths)[(*n)++] = p;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.ptg regular files of dir, in name order. */
static int add_dir(const char *who, const char *dir, char ***paths, size_t *n, size_t *cap)
{
	size_t first = *n;
	struct dirent *de;
	struct stat st;
	int err = 0;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		err = -errno;
		pr_err("%s: %s: %s", log_context(who), dir, strerror(-err));
		return err;
	}
	while (!err && (de = readdir(d))) {
		if (!has_suffix(de->d_name, ".ptg") || fstatat(dirfd(d), de->d_name, &st, 0) ||
		    !S_ISREG(st.st_mode))
			continue;
		err = add_path(paths, n, cap, dir, de->d_name);
	}
	closedir(d);
	if (!err && *n == first)
		err = -ENOENT;
	if (err)
		pr_err("%s: %s: %s", log_context(who), dir,
		       err == -ENOENT  ? "no .ptg traces in this directory"
		       : err == -E2BIG ? "more traces than ranks can be shown"
				       : strerror(-err));
	else
		array_sort(*paths + first, *n - first, sizeof(**paths), cmp_str);
	return err;
}

int ranks_paths(const char *who, char *const *args, size_t nargs, char ***out, size_t *nout)
{
	size_t n = 0, cap = 0;
	char **paths = NULL;
	int err = 0;

	for (size_t i = 0; i < nargs && !err; i++) {
		if (is_dir(args[i]))
			err = add_dir(who, args[i], &paths, &n, &cap);
		else if ((err = add_path(&paths, &n, &cap, NULL, args[i])))
			pr_err("%s: %s", log_context(who),
			       err == -E2BIG ? "more traces than ranks can be shown"
					     : strerror(-err));
	}
	if (err) {
		ranks_paths_free(paths, n);
		return err;
	}
	*out = paths;
	*nout = n;
	return 0;
}
