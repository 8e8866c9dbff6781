/* SPDX-License-Identifier: MIT */
/*
 * The Python stack engine: turns the frame events of bpf/pyframe.bpf.c
 * (include/ptrace_gpu/events.h: PY_START, PY_RESUME, PY_RETURN, PY_YIELD,
 * PY_UNWIND, PY_STACK snapshots, PY_CODE names) into properly nested
 * PY_ENTER / PY_EXIT records on the tracer's per-thread stacks, with one
 * symbol per code object. It has no BPF and reads no process: the names of
 * a code object the events did not carry come from a resolver, so recorded
 * or hand-built events replay through it (tests/unit/test_pystack.c).
 * user/python/pyframe.c attaches the probes and feeds it.
 */
#ifndef PTG_PYSTACK_H
#define PTG_PYSTACK_H

#include <stdbool.h>
#include <stdint.h>

#include <linux/types.h>
#include "ptrace_gpu/events.h"
#include "pyinterp/pycode.h"
#include "tracer/tracer.h"

struct pystack;

/*
 * Where the names of a code object come from when no PY_CODE event brought
 * them: for a recording, the target's memory (user/python/pyframe.c). Each process
 * gets a handle at its first event (open_proc, a negative errno: unreadable),
 * closed by close_proc when it is forgotten or the engine freed.
 */
struct pystack_resolver {
	void *ctx;
	int (*open_proc)(void *ctx, uint32_t pid);
	void (*close_proc)(void *ctx, int handle);
	/* The code object at code, read through handle: 0 or -errno. */
	int (*read_code)(void *ctx, int handle, uint64_t code, struct py_code_info *out);
};

struct pystack_stats {
	uint64_t unresolved;   /* code objects whose names could not be read */
	uint64_t unmatched;    /* returns of frames that were not on the stack */
	uint64_t redispatched; /* RESUMEs executed twice (3.12+ re-instrumentation): one call */
	uint64_t hidden; /* frames that run no RESUME (3.13+ __init__ cleanup), kept unrecorded */
};

int pystack__new(struct tracer *t, const struct pystack_resolver *res, struct pystack **out);
/* One event of the pyframe kinds (PTG_EV_PY_START..PTG_EV_PY_CODE) of size bytes. */
int pystack__handle(struct pystack *ps, const struct ptg_event *e, size_t size);
/*
 * Process pid is traced from now: its resolver handle opened at once, so
 * that a target whose memory cannot be read is an error at attach time.
 */
int pystack__add_proc(struct pystack *ps, uint32_t pid);
/*
 * The names of code object code of process pid, read early by the caller (as
 * soon as its events are seen, before they are handled in time order): a code
 * object freed, or a process gone, by the time its events are handled keeps
 * them. Known names are kept, unless replace: a code object that took the
 * address (and, by chance, the fingerprint) of a freed one, named in time
 * order (the in-process agent's CODE groups). 0 or -ENOMEM.
 */
int pystack__learn(struct pystack *ps, uint32_t pid, uint64_t code, const struct py_code_info *ci,
		   bool replace);
/* Process pid exec()'d or exited: what was read of its memory is of no more use. */
void pystack__forget(struct pystack *ps, uint32_t pid);
/*
 * Probes attached after the recording started (an interpreter that came
 * later): the frames a first snapshot finds are recorded as opened at ts.
 */
void pystack__set_start_ts(struct pystack *ps, uint64_t ts);
/* The loss counters of the replay itself (unresolved code, unmatched exits). */
int pystack__write_losses(struct pystack *ps, struct trace_writer *w);
void pystack__stats(const struct pystack *ps, struct pystack_stats *st);
/* Accepts NULL. */
void pystack__free(struct pystack *ps);

#endif /* PTG_PYSTACK_H */
