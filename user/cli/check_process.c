// SPDX-License-Identifier: MIT
/*
 * check -p PID: the process's Python as record finds it (user/pyinterp/),
 * the PyTorch and CUDA libraries it maps, and how record -p would record it,
 * by record's own choices (record_op_callback(), pyframe__can_share(),
 * pymon__check()).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/trusted.h"
#include "cli/check.h"
#include "proc/procfs.h"
#include "pyinterp/pyinterp.h"
#include "python/pyframe.h"
#include "python/pymon.h"
#include "record/record.h"

/* the libraries looked for in the maps, by the start of their file name */
enum { LIB_TORCH, LIB_TORCH_CUDA, LIB_CUDART, LIB_CUDA, NLIBS };

static const char *const lib_prefixes[NLIBS] = {
    [LIB_TORCH] = "libtorch_cpu.so",
    [LIB_TORCH_CUDA] = "libtorch_cuda.so",
    [LIB_CUDART] = "libcudart.so",
    [LIB_CUDA] = "libcuda.so",
};

struct libs_seen {
	char path[NLIBS][4096];
};

static int note_lib(const struct proc_map *m, void *arg)
{
	struct libs_seen *ls = arg;
	const char *base = strrchr(m->path, '/');

	for (int i = 0; base && i < NLIBS; i++) {
		if (!ls->path[i][0] && !strncmp(base + 1, lib_prefixes[i], strlen(lib_prefixes[i])))
			snprintf(ls->path[i], sizeof(ls->path[i]), "%s", m->path);
	}
	return 0;
}

static void check_libs(struct check *c, pid_t pid, struct libs_seen *ls)
{
	static const char *const what[NLIBS] = {
	    [LIB_TORCH] = "PyTorch",
	    [LIB_TORCH_CUDA] = "PyTorch's CUDA part",
	    [LIB_CUDART] = "CUDA runtime",
	    [LIB_CUDA] = "CUDA driver",
	};

	if (proc_maps__for_each(pid, note_lib, ls) < 0) {
		check_line(c, CHECK_UNKNOWN, true, "libraries of pid %d: cannot read its maps",
			   pid);
		return;
	}
	for (int i = 0; i < NLIBS; i++) {
		if (ls->path[i][0])
			check_line(c, CHECK_OK, false, "%s: %s", what[i], ls->path[i]);
		else
			check_line(c, CHECK_MISSING, false,
				   "%s (%s*): not mapped (yet): costs nothing: probed when pid %d "
				   "loads it",
				   what[i], lib_prefixes[i], pid);
	}
}

/* Where the interpreter's struct layouts come from. */
static void check_python(struct check *c, const struct py_interp *py)
{
	check_line(c, CHECK_OK, true,
		   "Python %s in pid %d: %s (layouts: ptrace-gpu's table for %s%s; opcodes "
		   "from %s)",
		   py->version, py->pid, py->path, py->info->name,
		   py->info->debug.size ? ", agreeing with the interpreter's _Py_DebugOffsets"
					: ", the interpreter has no _Py_DebugOffsets before 3.13",
		   py->stdlib);
	if (py->warning[0])
		check_line(c, CHECK_DEGRADED, true, "%s", py->warning);
}

static bool agent_ok(const char *env, const char *name)
{
	char path[4096], why[4096 + 128];
	int fd = trusted_open_own(env, name, path, sizeof(path), why, sizeof(why));

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* The choices record -p makes (user/record/session.c's start()), said one a line. */
static void check_path(struct check *c, const struct py_interp *py, const struct libs_seen *ls)
{
	struct record_opts o = {.pid = py->pid, .pids = {py->pid}, .npids = 1};
	bool gpu_agent = false;
	char err[512];

	if (!py->info) {
		check_line(
		    c, CHECK_OK, true,
		    "record -p %d: no Python: its CUDA calls, GPU activity and off-CPU time; "
		    "an exec of Python or a load of libpython is followed",
		    py->pid);
	} else if (pyframe__can_share()) {
		check_line(c, CHECK_OK, true,
			   "record -p %d --uprobes: Python calls by uprobes on the eval loop of %s",
			   py->pid, py->path);
	} else {
		check_line(c, CHECK_DEGRADED, true,
			   "record -p %d --uprobes: Python calls by uprobes, pyframe's legacy "
			   "program (no bpf_loop): stack snapshots cut at 64 frames",
			   py->pid);
	}
	if (record_op_callback(&o, py) && agent_ok("PTG_PYMON_AGENT", "libptg_pymon.so"))
		check_line(
		    c, CHECK_OK, true,
		    "record -p %d: PyTorch ops by its RecordFunction callback (libptg_pymon.so "
		    "brought in)",
		    py->pid);
	else if (ls->path[LIB_TORCH][0])
		check_line(c, CHECK_OK, true,
			   "record -p %d: PyTorch ops by uprobes on its dispatcher (at::_ops)",
			   py->pid);
	else
		check_line(c, CHECK_OK, true,
			   "record -p %d: PyTorch ops by uprobes, once it loads libtorch", py->pid);
#ifdef PTG_HAVE_CUPTI
	gpu_agent = agent_ok("PTG_CUPTI_AGENT", "libptg_cupti.so");
#endif
	check_line(c, gpu_agent ? CHECK_OK : CHECK_DEGRADED, false, "record -p %d: %s", py->pid,
		   gpu_agent ? "GPU activity by the CUPTI agent, brought in once it maps libcuda"
			     : "no GPU activity (no CUPTI agent, above)");
	if (!py->info)
		return;
	/* record_choose_python()'s choice for -p PID with no --in-process or --uprobes */
	if (pymon__check(py, err, sizeof(err)))
		check_line(c, CHECK_DEGRADED, false,
			   "record -p %d: Python calls by uprobes, not in-process: %s", py->pid,
			   err);
	else
		check_line(c, CHECK_OK, false,
			   "record -p %d: Python calls in-process (libptg_pymon.so in the target: "
			   "sys.monitoring C callbacks, a C profile function on 3.11), unless its "
			   "tool ids are taken or a profiler is in (then by uprobes); --uprobes "
			   "takes them by uprobes",
			   py->pid);
}

void check_process(struct check *c, pid_t pid)
{
	struct libs_seen ls = {};
	struct py_interp py;
	char err[1024];
	int ret;

	ret = py_interp__find(pid, &py, err, sizeof(err));
	if (!ret)
		check_python(c, &py);
	else if (ret == -ENOEXEC)
		check_line(c, CHECK_MISSING, false,
			   "Python: %s: costs nothing: record takes what it "
			   "does without",
			   err);
	else
		check_line(c, CHECK_MISSING, true, "Python: %s", err);
	check_libs(c, pid, &ls);
	if (ret == -ENOEXEC) {
		memset(&py, 0, sizeof(py));
		py.pid = pid;
		ret = 0;
	}
	if (c->tracing)
		check_line(c, CHECK_MISSING, true, "record -p %d: refused: %s", pid,
			   c->tracing_err);
	else if (ret)
		check_line(c, CHECK_MISSING, true, "record -p %d: refused: its Python, above", pid);
	else
		check_path(c, &py, &ls);
}
