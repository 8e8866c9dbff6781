/* SPDX-License-Identifier: MIT */
/*
 * The loader's core: one BPF ring buffer shared by every probe object
 * (Python frames, dispatcher ops, CUDA calls, scheduler), so the events of
 * one thread arrive in the order they happened; per-thread stacks of open
 * Python frames and ops; and the trace writer. Probe modules register a
 * handler for their range of event kinds and use the stack helpers to write
 * properly nested ENTER/EXIT records.
 */
#ifndef PTG_TRACER_H
#define PTG_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "ptrace_gpu/events.h"
#include "trace/trace.h"

struct tracer;

/* An open Python frame or op on a thread's stack. */
/*
 * A slot kind of the tracer's own: a frame kept on the stack for nesting
 * only, with no record written when it is pushed or popped (a CPython frame
 * that runs no code of its own, see user/python/pyframe.c).
 */
#define TRACER_SLOT_HIDDEN 0xffff

struct tracer_slot {
	uint64_t key;	      /* Python: frame address; op: stack pointer at entry */
	uint64_t code;	      /* Python: code object; op: op symbol address */
	uint32_t fingerprint; /* Python: code fingerprint */
	uint16_t kind;	      /* PTG_REC_PY_ENTER or PTG_REC_OP_ENTER */
	uint16_t pad;
	uint64_t ext; /* op: sequence id linking it to CUDA calls */
	int64_t aux0; /* aux[0] of the ENTER record; op: module path symbol (0: none) */
	uint64_t
	    local0; /* Python: first local when the call started or was snapshotted, 0 if unknown */
};

struct tracer_thread {
	uint32_t pid;
	uint32_t tid;
	struct tracer_slot *stack;
	uint32_t depth;
	uint32_t cap;
};

/* Handles one ring-buffer record of the kinds it registered for; returns 0 or -errno. */
typedef int (*tracer_handler_fn)(struct tracer *t, void *ctx, const struct ptg_event *e,
				 size_t size);
/* Called once at the end, after the last event: write loss counters. */
typedef int (*tracer_finish_fn)(struct tracer *t, void *ctx);

/*
 * A source of events outside the ring buffer (record --in-process: the
 * agent's ring, user/python/pymon.c): hands its events up to upto_ts, in
 * their order, to tracer__dispatch(). Called before each ring-buffer event
 * (with its timestamp), so that one thread's events of both stay in order;
 * at each poll, up to a little before the poll began; at the end, for all.
 * Returns a negative errno, 0, or 1 when it left events newer than upto_ts
 * waiting: the next tracer__poll() then waits 1 ms at most, so that a busy
 * source is read as it fills, not only at each timeout.
 */
typedef int (*tracer_source_fn)(struct tracer *t, void *ctx, uint64_t upto_ts);

/*
 * A second source outside the ring buffer that can tell its next event's
 * time (the CUPTI agents' CUDA calls, user/cuda/cuda.c, cuda_ring.c): peek
 * returns 1 with the time of the event it would hand next, 0 when it has
 * none; take hands that one event to tracer__dispatch(). Its events go
 * between the other source's in time order (that one is pulled up to each
 * of them first), and before a ring-buffer event as that source's do.
 */
typedef int (*tracer_peek_fn)(struct tracer *t, void *ctx, uint64_t *ts);
typedef int (*tracer_take_fn)(struct tracer *t, void *ctx);

/*
 * ringbuf_mb 0: no ring buffer and no BPF at all, for events that the caller
 * hands to the modules itself (a replay of recorded events, unit tests);
 * tracer__poll() then fails with -EINVAL.
 */
int tracer__new(struct trace_writer *w, unsigned int ringbuf_mb, uint64_t start_ts,
		struct tracer **out);
/* fd of the shared ring buffer: bpf_map__reuse_fd() it into each BPF object before load. */
int tracer__ringbuf_fd(const struct tracer *t);
/*
 * Routes event kinds [lo, hi] to fn. Ranges may overlap: each event goes to
 * every module whose range holds it, in the order they registered, so a
 * module registered after pyframe sees a frame event after the stack took it.
 * fn NULL: no events, only the finish hook.
 */
int tracer__on(struct tracer *t, uint16_t lo, uint16_t hi, tracer_handler_fn fn,
	       tracer_finish_fn finish, void *ctx);
/*
 * The same for a module that keeps the threads' stacks (a source of frame
 * events: pyframe, the in-process agent): it goes after the stack modules
 * registered before it and before every other module, whenever it comes,
 * so that the readers of the stacks see each event after the stack took
 * it (record -- CMD's agent comes once the recording runs).
 */
int tracer__on_stack(struct tracer *t, uint16_t lo, uint16_t hi, tracer_handler_fn fn,
		     tracer_finish_fn finish, void *ctx);
/* One source at most; fn NULL: none. */
void tracer__set_source(struct tracer *t, tracer_source_fn fn, void *ctx);
/* One timed source at most; peek NULL: none. */
void tracer__set_timed_source(struct tracer *t, tracer_peek_fn peek, tracer_take_fn take,
			      void *ctx);
/* An event of the source, to the modules of its kind as a ring-buffer event goes. */
int tracer__dispatch(struct tracer *t, const struct ptg_event *e, size_t size);
struct trace_writer *tracer__writer(struct tracer *t);
uint64_t tracer__start_ts(const struct tracer *t);
/* When probes start to attach: frames already open are recorded as opened then. */
void tracer__set_start_ts(struct tracer *t, uint64_t ts);

/* The thread's state, created (with a THREAD record naming it) on first sight. */
struct tracer_thread *tracer__thread(struct tracer *t, uint32_t pid, uint32_t tid, uint64_t ts);
/* Opens a slot and writes its ENTER record (kind from slot->kind) with sym and flags. */
int tracer__push(struct tracer *t, struct tracer_thread *th, const struct tracer_slot *slot,
		 uint32_t sym, uint16_t flags, uint64_t ts);
/* Closes slots, innermost first, until depth remain; each EXIT carries flags. */
int tracer__pop_to(struct tracer *t, struct tracer_thread *th, uint32_t depth, uint64_t ts,
		   uint16_t flags);
int tracer__record(struct tracer *t, const struct ptg_record *rec);
/*
 * Process pid began at ts, while recording (a fork): a thread's frames open
 * at its first event were opened then, not at the recording's start.
 */
int tracer__set_proc_born(struct tracer *t, uint32_t pid, uint64_t ts);
uint64_t tracer__proc_born(const struct tracer *t, uint32_t pid);
/* Closes every slot of every thread of process pid (it exec()'d or exited) at ts. */
int tracer__end_process(struct tracer *t, uint32_t pid, uint64_t ts, uint16_t flags);

/* Consumes events, waiting up to timeout_ms. Returns records consumed or -errno. */
int tracer__poll(struct tracer *t, int timeout_ms);
/*
 * Whether tracer__poll() is reading now: a handler it called that ends up
 * wanting the events after its own must not poll (the ring buffer's read
 * position moves past an event only once its handler returned).
 */
bool tracer__reading(const struct tracer *t);
/*
 * Consumes every event up to ts, the source's too (after waiting out the
 * little it lags the ring buffer: at most 2 ms). Returns records consumed
 * or -errno.
 */
int tracer__catch_up(struct tracer *t, uint64_t ts);
/*
 * sig (SIGCHLD: a process held under ptrace stopped) ends tracer__poll()'s
 * wait at once: it is blocked in the calling thread, the one that polls,
 * except during that wait, so that one sent while events are handled is
 * not lost. Its handler is the caller's.
 */
int tracer__wake_on(struct tracer *t, int sig);
/* Drains, closes every open slot at stop_ts (or the last event's time) and calls the finish hooks.
 */
int tracer__finish(struct tracer *t, uint64_t stop_ts);
uint64_t tracer__events(const struct tracer *t);
uint64_t tracer__calls(const struct tracer *t);
void tracer__free(struct tracer *t);

#endif /* PTG_TRACER_H */
