/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/pyframe.bpf.c: loads and attaches the frame
 * probes to one interpreter, consumes their ring buffer, rebuilds each
 * thread's stack from frame addresses and writes properly nested
 * PY_ENTER / PY_EXIT records with resolved function symbols.
 */
#ifndef PTG_PYFRAME_H
#define PTG_PYFRAME_H

#include <stdint.h>

#include "pyinterp.h"
#include "trace.h"

struct pyframe;

struct pyframe_stats {
	uint64_t events;     /* ring buffer records consumed */
	uint64_t calls;	     /* new calls written */
	uint64_t dropped;    /* events and snapshots the BPF side could not send */
	uint64_t unresolved; /* code objects whose names could not be read */
	uint64_t unmatched;  /* returns of frames that were not on the stack */
};

/* Loads the probes for py (ring buffer of ringbuf_mb MiB); records go to w. */
int pyframe__open(const struct py_interp *py, struct trace_writer *w, unsigned int ringbuf_mb,
		  uint64_t start_ts, struct pyframe **out);
int pyframe__attach(struct pyframe *pf);
/* Consumes what the probes sent, waiting up to timeout_ms. Returns records consumed or -errno. */
int pyframe__poll(struct pyframe *pf, int timeout_ms);
/* Detaches, drains, closes every open frame at stop_ts and writes loss counters. */
int pyframe__finish(struct pyframe *pf, uint64_t stop_ts);
void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st);
void pyframe__destroy(struct pyframe *pf);

#endif /* PTG_PYFRAME_H */
