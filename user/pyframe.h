/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/pyframe.bpf.c: loads and attaches the frame
 * probes to one interpreter, rebuilds each thread's stack of Python frames
 * from frame addresses and writes PY_ENTER / PY_EXIT records through the
 * tracer, with function symbols resolved once per code object.
 */
#ifndef PTG_PYFRAME_H
#define PTG_PYFRAME_H

#include <stdint.h>

#include "pyinterp.h"
#include "tracer.h"

struct pyframe;

struct pyframe_stats {
	uint64_t dropped;    /* events and snapshots the BPF side could not send */
	uint64_t unresolved; /* code objects whose names could not be read */
	uint64_t unmatched;  /* returns of frames that were not on the stack */
	uint64_t redispatched; /* RESUMEs executed twice (3.12+ re-instrumentation): one call */
	uint64_t hidden;       /* frames that run no RESUME (3.13+ __init__ cleanup), kept unrecorded */
};

/* Loads the probes for py into the tracer's ring buffer. */
int pyframe__open(const struct py_interp *py, struct tracer *t, struct pyframe **out);
int pyframe__attach(struct pyframe *pf);
/*
 * Probes attached after the recording started (an interpreter that came
 * later): the frames already running then are recorded as opened at ts.
 */
void pyframe__set_start_ts(struct pyframe *pf, uint64_t ts);
/* Removes the probes; events already sent stay in the ring buffer. NULL: none. */
void pyframe__detach(struct pyframe *pf);
/* All zero for NULL (a target with no Python). */
void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st);
void pyframe__destroy(struct pyframe *pf);

#endif /* PTG_PYFRAME_H */
