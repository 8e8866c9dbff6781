// SPDX-License-Identifier: MIT
/* A Python interpreter that a recorded process starts running after recording began. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "proc/libsearch.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "pyinterp/launch.h"
#include "record/target.h"

/* A file offered ahead: the same file under another name (a symbolic link) is not offered again. */
struct ahead_file {
	dev_t dev;
	ino_t ino;
};

struct target {
	struct target_opts o;
	bool held;
	bool has_python;
	bool gave_up;	/* an interpreter we cannot record: said once, not looked for again */
	bool at_exec;	/* the held child's exec stop is being handled: it says what is Python */
	bool seized;	/* a -p target taken under ptrace while it runs (launch__seize) */
	bool exec_stop; /* o.fn is called at the exec stop: nothing of the new program ran */
	bool in_stop;	/* a stop of ours at a loader notice is being handled ... */
	bool let_go;	/* ... and the hold is to end there */
	struct ahead_file *ahead; /* libpython files offered ahead */
	size_t nahead;
	struct libsearch *search; /* while target__probe_ahead runs */
	uint64_t exec_ms;	  /* an exec after Python, not looked at yet: when read */
	uint64_t python_ns;	  /* when Python was found in it (CLOCK_MONOTONIC) */
	dev_t exec_dev;		  /* ... the file it exec'd */
	ino_t exec_ino;
};

/*
 * -p with no Python yet: under ptrace from now on, so that an exec of an
 * interpreter stops it before its first instruction while the probes go
 * in, as the -- CMD child. Seizing stops nothing; where it cannot be done
 * the exec is found through libwatch, once the interpreter runs.
 */
static void hold(struct target *tg)
{
	int ret = launch__seize(tg->o.pid);

	if (!ret) {
		tg->held = tg->seized = true;
		return;
	}
	if (ret != -ESRCH)
		pr_warn("pid %d cannot be held at its exec (%s): a Python it execs is recorded "
			"from when it is found, its first calls missed",
			tg->o.pid, ret == -EPERM ? "another tracer holds it" : strerror(-ret));
}

/*
 * The held process stopped at a loader notice where it mapped a library
 * not probed yet (libwatch__held_stop()): probed now, then resumed; or let
 * go there, when what was mapped ends the hold (the CUDA driver).
 */
/* The hold is over (let go): what the loader probe kept for the held process goes too. */
static void hold_ended(struct target *tg)
{
	tg->held = tg->seized = false;
	libwatch__held_gone(tg->o.libs, tg->o.pid);
	libwatch__watch_python(tg->o.libs, tg->o.pid, false);
}

static enum launch_urg on_urg(void *ctx, pid_t pid, pid_t tid)
{
	struct target *tg = ctx;
	bool ours;

	if (!tg->held || pid != tg->o.pid)
		return LAUNCH_URG_NOT_OURS;
	tg->in_stop = true;
	ours = libwatch__held_stop(tg->o.libs, pid, tid);
	tg->in_stop = false;
	if (!ours)
		return LAUNCH_URG_NOT_OURS;
	if (!tg->let_go)
		return LAUNCH_URG_RESUME;
	tg->let_go = false;
	hold_ended(tg);
	return LAUNCH_URG_RELEASE;
}

int target__new(const struct target_opts *o, struct target **out)
{
	struct target *tg = calloc(1, sizeof(*tg));

	if (!tg)
		return -ENOMEM;
	tg->o = *o;
	tg->held = o->held;
	tg->has_python = o->has_python;
	if (o->libs && launch__on_urg(on_urg, tg)) {
		free(tg);
		return -E2BIG;
	}
	*out = tg;
	if (o->seize && !o->has_python)
		hold(tg);
	/* a libpython it maps from off its search path: waits at the loader's notice */
	if (tg->held && !tg->has_python && libwatch__watch_python(o->libs, o->pid, true))
		pr_warn("pid %d: a libpython it loads from off its search path will not wait to "
			"be probed",
			o->pid);
	return 0;
}

bool target__held(const struct target *tg)
{
	return tg && tg->held;
}

bool target__at_exec_stop(const struct target *tg)
{
	return tg && tg->exec_stop;
}

/* An interpreter found, and one we cannot record said once: the rest of its run is not Python's. */
static int found(struct target *tg, int ret, const struct py_interp *py, const char *how,
		 const char *err)
{
	if (ret == -ENOEXEC)
		return 0;
	libwatch__watch_python(tg->o.libs, tg->o.pid, false);
	if (!ret) {
		ret = tg->o.fn(tg->o.ctx, py, how);
		if (!ret) {
			tg->has_python = true;
			tg->python_ns = now_ns(CLOCK_MONOTONIC);
			return 0;
		}
		err = ""; /* what the finder tried on the way is not why recording failed */
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

static bool is_libcuda(const char *path)
{
	const char *base = strrchr(path, '/');

	return !strncmp(base ? base + 1 : path, "libcuda.so", 10);
}

/* A -p target seized and running is let go: it runs untraced from now on. */
static void end_hold(struct target *tg)
{
	int status;

	if (!tg->seized || !tg->held)
		return;
	/* stopped at a notice of ours: let go there, once that stop is handled */
	if (tg->in_stop) {
		tg->let_go = true;
		return;
	}
	target__let_go(tg, &status);
	hold_ended(tg);
}

/*
 * A -p target that maps the CUDA driver gets the CUPTI agent, which borrows
 * its main thread under ptrace (user/inject/inject.c): a thread has one
 * tracer, so the hold ends, and an exec after it is found as when another
 * tracer holds it. It ends at the next target__poll(), once the scan that
 * found the driver has put its probes in: the process may be stopped at
 * the loader's notice until then.
 */
static void let_go_for_cuda(struct target *tg)
{
	tg->let_go = true;
	pr_debug("pid %d maps the CUDA driver: its exec is no longer held", tg->o.pid);
}

/* Found while it runs (a libpython it loaded, a hold lost): nothing left to hold it for. */
static int found_running(struct target *tg, int ret, const struct py_interp *py, const char *how,
			 const char *err)
{
	ret = found(tg, ret, py, how, err);
	if (tg->has_python || tg->gave_up)
		end_hold(tg);
	return ret;
}

/*
 * Whether pid is still under our ptrace: an exec by a thread that could not
 * be seized (-p) makes that thread the process's, untraced.
 */
static bool traced_by_us(pid_t pid)
{
	return proc_tracer_pid(pid) == getpid();
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

	if (tg->seized && tg->held && m->end && is_libcuda(m->path))
		let_go_for_cuda(tg);
	if (tg->has_python || tg->gave_up || !m->start || !may_be_python(m->path))
		return 0;
	exe = is_exe(tg->o.pid, m->path);
	/*
	 * A held child's exec stops it: the interpreter it exec'd is looked
	 * for there, after its new libraries (a scan read late sees the new
	 * image first). A libpython it loads (dlopen) is looked for here.
	 */
	if ((tg->held && exe && (!tg->seized || traced_by_us(tg->o.pid))) || tg->at_exec)
		return 0;
	ret = py_interp__find(tg->o.pid, &py, err, sizeof(err));
	/* gone meanwhile: its exit ends the recording */
	if (ret == -ESRCH || ret == -ENOENT)
		return 0;
	return found_running(tg, ret, &py, exe ? "exec" : m->path, err);
}

/* What each mapped object's RPATH/RUNPATH adds to the search path. */
static int add_mapped(const struct proc_map *m, void *arg)
{
	struct target *tg = arg;
	char path[64];
	int fd, err;

	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->inode)
		return 0;
	/* read as mapped (procopen.h); one refused or gone adds nothing */
	fd = proc_map_open(tg->o.pid, m);
	if (fd < 0)
		return fd == -ENOMEM ? fd : 0;
	proc_fd_path(fd, path, sizeof(path));
	err = libsearch__add_object(tg->search, m->path, path);
	close(fd);
	return err;
}

/* One libpython file of the search path: analyzed from the file, then probed through o.ahead. */
static int offer_ahead(void *ctx, const char *dir, const char *name)
{
	struct target *tg = ctx;
	char path[PATH_MAX], open_path[PATH_MAX + 32], err[512] = "";
	struct ahead_file *n;
	struct py_interp py;
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "%s/%s", strcmp(dir, "/") ? dir : "", name);
	/*
	 * Inside the target's root, whose links lead nowhere outside it, and
	 * kept open: the probes go on the very file read here.
	 */
	if (proc_root_path(tg->o.pid, path, true, open_path, sizeof(open_path)) ||
	    stat(open_path, &st))
		return 0;
	for (size_t i = 0; i < tg->nahead; i++) {
		if (tg->ahead[i].dev == st.st_dev && tg->ahead[i].ino == st.st_ino)
			return 0;
	}
	n = realloc(tg->ahead, (tg->nahead + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	tg->ahead = n;
	tg->ahead[tg->nahead++] = (struct ahead_file){.dev = st.st_dev, .ino = st.st_ino};
	clean_path(path); /* named as maps will name it; opened as the loader will open it */
	ret = py_interp__from_target_file(tg->o.pid, path, open_path, &py, err, sizeof(err));
	/*
	 * One we cannot record (a build without symbols, a version not
	 * known) is not probed: if it is ever mapped, the detection there
	 * says why it is not recorded.
	 */
	if (ret) {
		pr_debug("not probing %s ahead: %s", path, err[0] ? err : strerror(-ret));
		return ret == -ENOMEM ? ret : 0;
	}
	ret = tg->o.ahead(tg->o.ctx, &py);
	/* probed: mapped, it needs no stop at the loader's notice */
	if (!ret)
		ret = libwatch__probed_ahead(tg->o.libs, st.st_ino, path);
	/* a file that cannot be probed now is left to the detection when it is mapped */
	if (ret == -ENOMEM)
		return ret;
	if (ret)
		pr_warn("cannot probe %s ahead: %s; if loaded, its first calls may be missing",
			path, strerror(-ret));
	return 0;
}

int target__probe_ahead(struct target *tg)
{
	char name[64];
	const char *v;
	int ret;

	if (!tg->o.ahead || tg->has_python || tg->gave_up)
		return 0;
	ret = libsearch__open(tg->o.pid, &tg->search);
	if (ret)
		return ret == -ENOENT || ret == -ESRCH ? 0 : ret;
	ret = proc_maps__for_each(tg->o.pid, add_mapped, tg);
	if (ret == -ENOENT || ret == -ESRCH)
		ret = 0; /* gone: its exit ends the recording */
	/* the names an embedding program dlopen()s, or links: the soname and the linker's name */
	for (size_t i = 0; !ret && (v = py_version_name(i)); i++) {
		snprintf(name, sizeof(name), "libpython%s.so.1.0", v);
		ret = libsearch__find(tg->search, name, offer_ahead, tg);
		snprintf(name, sizeof(name), "libpython%s.so", v);
		ret = ret ?: libsearch__find(tg->search, name, offer_ahead, tg);
	}
	libsearch__free(tg->search);
	tg->search = NULL;
	return ret;
}

void target__exec_seen(void *ctx, dev_t dev, ino_t ino, uint64_t ts)
{
	struct target *tg = ctx;

	if (!tg->has_python || !tg->o.exec)
		return;
	/*
	 * The exec that started the image Python was then found in, its event
	 * read late (a busy host): not an exec away from that Python
	 */
	if (ts < tg->python_ns)
		return;
	/* exec'd again before the last was looked at: the last one counts */
	tg->exec_ms = now_ms(CLOCK_MONOTONIC);
	tg->exec_dev = dev;
	tg->exec_ino = ino;
}

/*
 * The exec event is read once the new image runs: its loader may not have
 * mapped a shared libpython yet, so the image is looked at until it runs
 * Python or EXEC_LOOK_MS passed (a program that is no Python).
 */
#define EXEC_LOOK_MS 2000

void target__poll_exec(struct target *tg)
{
	struct py_interp py;
	char err[512];
	int ret;

	if (!tg || !tg->exec_ms)
		return;
	ret = py_interp__find(tg->o.pid, &py, err, sizeof(err));
	if (!ret) {
		tg->exec_ms = 0;
		tg->o.exec(tg->o.ctx, &py, tg->exec_dev, tg->exec_ino);
	} else if (ret == -ESRCH || ret == -ENOENT) {
		/* it ran its new image to the end between two polls */
		tg->exec_ms = 0;
		tg->o.exec(tg->o.ctx, NULL, tg->exec_dev, tg->exec_ino);
	} else if (now_ms(CLOCK_MONOTONIC) - tg->exec_ms > EXEC_LOOK_MS) {
		tg->exec_ms = 0;
	}
}

int target__look(struct target *tg, const struct py_interp *gone)
{
	struct py_interp py;
	char err[512] = "";
	int ret;

	if (!tg || tg->has_python || tg->gave_up || tg->at_exec)
		return 0;
	ret = py_interp__find(tg->o.pid, &py, err, sizeof(err));
	if ((ret == -ESRCH || ret == -ENOENT) && gone)
		return found_running(tg, 0, gone, gone->path, "");
	if (ret == -ESRCH || ret == -ENOENT)
		return 0;
	return found_running(tg, ret, &py, py.path, err);
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
	/*
	 * It mapped the CUDA driver before the attach: its hold ends now, before
	 * record says it records, not at the first poll, where stopping it to
	 * let it go would cut into what it runs (a sleep in two)
	 */
	if (tg->seized && tg->let_go) {
		tg->let_go = false;
		end_hold(tg);
		return 0;
	}
	return tg->seized ? 0 : launch__resume(tg->o.pid);
}

/* The held child stopped at an exec: into Python (ret 1) or not. */
static void on_exec(struct target *tg, int ret, const struct py_interp *py, const char *err)
{
	int rc;

	/*
	 * Its new loader, root and libraries before it runs a single
	 * instruction, and before its Python, as with a Python command.
	 */
	if (tg->o.exec_stop)
		tg->o.exec_stop(tg->o.ctx, tg->o.pid);
	tg->at_exec = true;
	rc = libwatch__exec(tg->o.libs);
	tg->at_exec = false;
	if (rc)
		pr_warn("pid %d exec'd: its new libraries are not watched: %s", tg->o.pid,
			strerror(-rc));
	/* a program that is not Python may load libpython: its new search path, ahead */
	if (ret == LAUNCH_EXEC_OTHER && (rc = target__probe_ahead(tg)))
		pr_warn("pid %d exec'd: libpython is not looked for ahead: %s", tg->o.pid,
			strerror(-rc));
	tg->exec_stop = true;
	if (ret == LAUNCH_EXEC_PYTHON && !tg->has_python)
		found(tg, 0, py, "exec", err);
	else if (ret < 0 && !tg->has_python)
		found(tg, ret, py, "exec", err);
	tg->exec_stop = false;
	/* once Python runs, it runs untouched as with a Python command (launch.h) */
	if ((tg->has_python && !tg->o.keep_held) || tg->gave_up) {
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
		if (ret == LAUNCH_NOTHING && tg->let_go && tg->held) {
			tg->let_go = false;
			end_hold(tg);
		}
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
	if (tg) {
		launch__off_urg(on_urg, tg);
		free(tg->ahead);
	}
	free(tg);
}
