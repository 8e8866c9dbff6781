// SPDX-License-Identifier: MIT
/* The folders of a Python's packages that hold libraries loaded by full path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/libsearch_int.h"
#include "proc/procfs.h"
#include "proc/procopen.h"

/*
 * Whether dir (the target's view) is a folder of the target's: looked at
 * inside its root (procopen.h), where its absolute links resolve.
 */
static bool is_target_dir(const struct libsearch *s, const char *dir)
{
	return proc_root_is(s->pid, dir, true);
}

/* site/torch/lib, when the target has it. */
static int add_site(struct libsearch *s, const char *site)
{
	char dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s/torch/lib", site) >= (int)sizeof(dir) ||
	    !is_target_dir(s, dir))
		return 0;
	return libsearch_add_dir(s, dir, strlen(dir), DIR_SITE);
}

/* prefix/lib/python3.X/{site,dist}-packages for every python3.X there, and Debian's python3. */
static int add_prefix(struct libsearch *s, const char *prefix)
{
	static const char *const kinds[] = {"site-packages", "dist-packages"};
	char path[PATH_MAX + 32], site[PATH_MAX];
	struct dirent *de;
	int err = 0, n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/lib", prefix);
	d = proc_root_opendir(s->pid, path);
	/* a bound on the work a hostile folder costs */
	while (d && !err && n < 64 && (de = readdir(d))) {
		if (strncmp(de->d_name, "python3", 7) || strchr(de->d_name, '/'))
			continue;
		n++;
		for (int k = 0; !err && k < 2; k++) {
			if (snprintf(site, sizeof(site), "%s/lib/%s/%s", prefix, de->d_name,
				     kinds[k]) < (int)sizeof(site))
				err = add_site(s, site);
		}
	}
	if (d)
		closedir(d);
	return err;
}

/*
 * The file the target ran as argv[0] names it (a venv's bin/python3 is a
 * link to the base interpreter: /proc/PID/exe names that one): found
 * along the target's PATH when it has no slash, from its working directory
 * when relative. Empty when not found.
 */
static void argv0_path(const struct libsearch *s, char *out, size_t len)
{
	char arg0[PATH_MAX], path[PATH_MAX + 32], *env = NULL;
	ssize_t n;
	int fd;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cmdline", s->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, arg0, sizeof(arg0) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	arg0[n] = '\0';
	if (arg0[0] == '/') {
		snprintf(out, len, "%s", arg0);
		return;
	}
	if (strchr(arg0, '/')) {
		char cwd[PATH_MAX];

		snprintf(path, sizeof(path), "/proc/%d/cwd", s->pid);
		n = readlink(path, cwd, sizeof(cwd) - 1);
		if (n > 0) {
			cwd[n] = '\0';
			if (snprintf(out, len, "%s/%s", libsearch_target_view(s, cwd), arg0) >=
			    (int)len)
				out[0] = '\0';
		}
		return;
	}
	env = malloc(65536);
	if (!env || proc_environ_get(s->pid, "PATH", env, 65536)) {
		free(env);
		return;
	}
	for (char *p = env, *end; *p; p = *end ? end + 1 : end) {
		end = p + strcspn(p, ":");
		if (*p != '/')
			continue;
		if (snprintf(path, sizeof(path), "%.*s/%s", (int)(end - p), p, arg0) >=
		    (int)sizeof(path))
			continue;
		if (proc_root_is(s->pid, path, false)) {
			if (snprintf(out, len, "%.*s/%s", (int)(end - p), p, arg0) >= (int)len)
				out[0] = '\0';
			break;
		}
	}
	free(env);
}

/* The folder above the one that holds path ("/usr" for "/usr/bin/python3"), in place. */
static bool parent_of_dir(char *path)
{
	for (int i = 0; i < 2; i++) {
		char *slash = strrchr(path, '/');

		if (!slash || slash == path)
			return false;
		*slash = '\0';
	}
	return true;
}

/*
 * PyTorch's wheel loads libtorch_cpu.so by full path from site-packages,
 * a folder on no search path, and libcudart from the nvidia wheels by its
 * RUNPATH: found nowhere ahead, both would be probed only after they were
 * mapped (late-libs.md). For a Python the site folders are known ahead:
 * its prefix (the executable's), a venv's (pyvenv.cfg beside argv[0]'s
 * bin/), $VIRTUAL_ENV, the user's ($HOME/.local) and $PYTHONPATH. Each
 * torch/lib found there joins the search path, and libtorch_cpu's RUNPATH
 * (the nvidia wheels) with it once offered. A superset, as the rest.
 */
int libsearch_add_site_dirs(struct libsearch *s, const char *exe)
{
	char prefix[PATH_MAX], path[PATH_MAX + 32], *env;
	const char *base = strrchr(exe, '/');
	int err = 0;

	/* a program that is no Python (its name says) has no site folders of its own */
	if (!base || strncmp(base + 1, "python", 6))
		return 0;
	snprintf(prefix, sizeof(prefix), "%s", libsearch_target_view(s, exe));
	if (parent_of_dir(prefix)) {
		err = add_prefix(s, prefix);
		/* Debian's /usr/lib/python3/dist-packages, and /usr/local's */
		if (!err && snprintf(path, sizeof(path), "%s/lib/python3/dist-packages", prefix) <
				(int)sizeof(path))
			err = add_site(s, path);
		if (!err && !strcmp(prefix, "/usr"))
			err = add_prefix(s, "/usr/local");
	}
	argv0_path(s, prefix, sizeof(prefix));
	if (!err && parent_of_dir(prefix)) {
		snprintf(path, sizeof(path), "%s/pyvenv.cfg", prefix);
		if (proc_root_is(s->pid, path, false))
			err = add_prefix(s, prefix);
	}
	env = malloc(65536);
	if (!env)
		return -ENOMEM;
	if (!err && !proc_environ_get(s->pid, "VIRTUAL_ENV", env, 65536) && env[0] == '/')
		err = add_prefix(s, env);
	if (!err && !proc_environ_get(s->pid, "HOME", env, 65536) && env[0] == '/' &&
	    snprintf(prefix, sizeof(prefix), "%s/.local", env) < (int)sizeof(prefix))
		err = add_prefix(s, prefix);
	if (!err && !proc_environ_get(s->pid, "PYTHONPATH", env, 65536)) {
		for (char *p = env, *end; !err && *p; p = *end ? end + 1 : end) {
			end = p + strcspn(p, ":");
			if (*p == '/' && end - p < PATH_MAX) {
				snprintf(prefix, sizeof(prefix), "%.*s", (int)(end - p), p);
				err = add_site(s, prefix);
			}
		}
	}
	free(env);
	return err;
}
