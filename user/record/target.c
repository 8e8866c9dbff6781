// SPDX-License-Identifier: MIT
/* A Python interpreter that a recorded process starts running after recording began. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "pyinterp/launch.h"
#include "record/target.h"

struct target {
	struct target_opts o;
	bool held;
	bool has_python;
	bool gave_up; /* an interpreter we cannot record: said once, not looked for again */
	bool at_exec; /* the held child's exec stop is being handled: it says what is Python */
};

int target__new(const struct target_opts *o, struct target **out)
{
	struct target *tg = calloc(1, sizeof(*tg));

	if (!tg)
		return -ENOMEM;
	tg->o = *o;
	tg->held = o->held;
	tg->has_python = o->has_python;
	*out = tg;
	return 0;
}

bool target__held(const struct target *tg)
{
	return tg && tg->held;
}

/* An interpreter found, and one we cannot record said once: the rest of its run is not Python's. */
static int found(struct target *tg, int ret, const struct py_interp *py, const char *how,
		 const char *err)
{
	if (ret == -ENOEXEC)
		return 0;
	if (!ret) {
		ret = tg->o.fn(tg->o.ctx, py, how);
		if (!ret) {
			tg->has_python = true;
			return 0;
		}
	}
	tg->gave_up = true;
	pr_warn("pid %d runs Python now, not recorded: %s", tg->o.pid,
		err[0] ? err : strerror(-ret));
	return 0;
}

static bool may_be_python(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libpython", 9) || !strncmp(base, "python", 6);
}

/* Is path the process's executable: an interpreter it exec'd, not one it loaded? */
static bool is_exe(pid_t pid, const char *path)
{
	char link[64], exe[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	return !strcmp(exe, path);
}

/*
 * The loader mapped libpython (dlopen), or the process exec'd an
 * interpreter: look at the whole process, as at start. Not for objects
 * offered ahead (not mapped yet: start 0).
 */
int target__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias)
{
	struct target *tg = ctx;
	struct py_interp py;
	char err[512] = "";
	bool exe;
	int ret;

	if (tg->has_python || tg->gave_up || !m->start || !may_be_python(m->path))
		return 0;
	exe = is_exe(tg->o.pid, m->path);
	/*
	 * A held child's exec stops it: the interpreter it exec'd is looked
	 * for there, after its new libraries (a scan read late sees the new
	 * image first). A libpython it loads (dlopen) is looked for here.
	 */
	if ((tg->held && exe) || tg->at_exec)
		return 0;
	ret = py_interp__find(tg->o.pid, &py, err, sizeof(err));
	/* gone meanwhile: its exit ends the recording */
	if (ret == -ESRCH || ret == -ENOENT)
		return 0;
	return found(tg, ret, &py, exe ? "exec" : m->path, err);
}

static void on_sigchld(int sig)
{
	(void)sig;
}

int target__run(struct target *tg)
{
	struct sigaction sa = {.sa_handler = on_sigchld};

	if (!tg->held)
		return 0;
	/*
	 * Each stop of the held child (a signal it is sent waits for us to pass
	 * it on) sends us SIGCHLD: a handler without SA_RESTART wakes the
	 * recorder's poll at once instead of at its next timeout.
	 */
	sigaction(SIGCHLD, &sa, NULL);
	return launch__resume(tg->o.pid);
}

/* The held child stopped at an exec: into Python (ret 1) or not. */
static void on_exec(struct target *tg, int ret, const struct py_interp *py, const char *err)
{
	int rc;

	/*
	 * Its new loader, root and libraries before it runs a single
	 * instruction, and before its Python, as with a Python command.
	 */
	tg->at_exec = true;
	rc = libwatch__exec(tg->o.libs);
	tg->at_exec = false;
	if (rc)
		pr_warn("pid %d exec'd: its new libraries are not watched: %s", tg->o.pid,
			strerror(-rc));
	if (ret == LAUNCH_EXEC_PYTHON && !tg->has_python)
		found(tg, 0, py, "exec", err);
	else if (ret < 0 && !tg->has_python)
		found(tg, ret, py, "exec", err);
	/* once Python runs, it runs untouched as with a Python command (launch.h) */
	if (tg->has_python || tg->gave_up) {
		launch__release(tg->o.pid);
		tg->held = false;
	} else {
		launch__resume(tg->o.pid);
	}
}

int target__poll(struct target *tg, int *wstatus)
{
	struct py_interp py;
	char err[512];
	int ret;

	while (tg && tg->held) {
		ret = launch__poll(tg->o.pid, &py, wstatus, err, sizeof(err));
		if (ret == LAUNCH_NOTHING)
			return 0;
		if (ret == -ECHILD) {
			tg->held = false;
			return 1;
		}
		if (ret < 0 && !err[0]) {
			/* lost it: it runs on untraced once we exit */
			pr_warn("pid %d: %s", tg->o.pid, strerror(-ret));
			tg->held = false;
			return 0;
		}
		on_exec(tg, ret, &py, err);
	}
	return 0;
}

int target__let_go(struct target *tg, int *wstatus)
{
	int ret;

	if (!tg || !tg->held)
		return 0;
	tg->held = false;
	ret = launch__let_go(tg->o.pid, wstatus);
	return ret == -ECHILD ? 1 : 0;
}

void target__free(struct target *tg)
{
	free(tg);
}
