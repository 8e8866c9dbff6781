/* SPDX-License-Identifier: MIT */
/*
 * What the sampler hands out (user/sample/sample.h): its options, and one
 * interval's rows over shared tables of functions, frames and processes.
 * Apart from sample.h so that the sampler's lower files (sample_int.h and
 * what includes it) see the types without the sampler's functions.
 */
#ifndef PTG_SAMPLE_TYPES_H
#define PTG_SAMPLE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/types.h>
#include "ptrace_gpu/sample.h"

struct sample_opts {
	const pid_t *pids; /* -p */
	size_t npids;
	bool all;	   /* -a: every Python process, rescanned each second */
	unsigned int freq; /* Hz per CPU */
	bool native;	   /* also the native user stack */
	bool offcpu;	   /* blocked time from sched_switch instead of timer samples */
	bool verbose;	   /* say when a process is found or ends */
};

enum sample_func_kind {
	SAMPLE_FUNC_PYTHON = 0,
	SAMPLE_FUNC_NATIVE = 1,
	SAMPLE_FUNC_SPECIAL = 2, /* "[unknown]", "[no Python stack]", ... */
};

/* A function; strings live as long as the sampler. */
struct sample_func {
	const char *name; /* qualname, symbol, or "[object]" when none covers the address */
	const char *file; /* Python: co_filename; native: the object's path */
	uint32_t start_line;
	uint32_t kind;
};

/* One frame: a function, and where in it. */
struct sample_frame {
	uint32_t func;
	uint32_t line; /* Python: the line executing (see docs/sample.md) */
	uint64_t addr; /* native: link-time address in the object */
	uint64_t obj_start, obj_limit, obj_offset;
};

struct sample_proc {
	uint32_t pid;
	const char *comm;
	const char *interp; /* "CPython 3.11.2" */
	uint32_t ns_pid;    /* its pid in its container, 0 when it is in ours */
};

struct sample_row {
	uint32_t proc; /* index in procs */
	uint32_t tid;
	const char *thread;
	uint64_t count;
	uint64_t ns;
	uint32_t depth;
	const uint32_t *frames; /* indices in frames, outermost first */
};

struct sample_set {
	enum ptg_sample_kind kind;
	uint64_t period_ns;	    /* between timer samples; 0 for off-CPU */
	uint64_t start_realtime_ns; /* of the interval */
	uint64_t duration_ns;
	const struct sample_row *rows;
	size_t nrows;
	const struct sample_func *funcs;
	size_t nfuncs;
	const struct sample_frame *frames;
	size_t nframes;
	const struct sample_proc *procs;
	size_t nprocs;
};

#endif /* PTG_SAMPLE_TYPES_H */
