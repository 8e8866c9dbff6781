/* SPDX-License-Identifier: MIT */
/*
 * The model: a single streaming pass over a trace that rebuilds each thread's
 * stack of open Python and op spans and hands every closed span, and every
 * other record, to a visitor together with the stack it happened under.
 * Memory is bounded by threads x (depth + distinct functions and caller ->
 * callee pairs), not by the length of the trace. Each frame carries what
 * consumers would otherwise find by scanning the stack below it (the
 * nearest enclosing frame of each kind, whether it recurses), so that no
 * report costs more than O(1) per record however deep the stack.
 */
#ifndef PTG_MODEL_H
#define PTG_MODEL_H

#include "trace/trace.h"

/* Frame kinds as indexes of model_frame.up[] */
enum model_kind {
	MODEL_PY, /* PTG_REC_PY_ENTER */
	MODEL_OP, /* PTG_REC_OP_ENTER */
	MODEL_NR_KINDS,
};

/* model_frame.active: what was already open on the thread when it was entered */
#define MODEL_ACTIVE_SYM  0x1 /* a frame of the same symbol */
#define MODEL_ACTIVE_PAIR 0x2 /* a frame of the same symbol under the same caller */

/* An open span on a thread's stack. */
struct model_frame {
	uint32_t sym;
	uint16_t kind;	   /* PTG_REC_PY_ENTER or PTG_REC_OP_ENTER */
	uint16_t flags;	   /* enter flags: PTG_F_ENTER_* */
	uint64_t start;	   /* ts of this segment's ENTER */
	uint64_t child_ns; /* time spent in closed child segments so far */
	uint64_t ext;	   /* external id of an op (links ops to CUDA calls) */
	int64_t aux0;	   /* aux[0] of the ENTER record (op: module path symbol) */
	int64_t aux1;	   /* aux[1] of the ENTER record */
	char *args;	   /* its ENTER's args blob under MODEL_WALK_ARGS, else NULL */
	uint64_t id;	   /* unique in a walk: same index and id, same open frame */
	/* 1 + index of the nearest enclosing frame of each kind, 0: none */
	uint32_t up[MODEL_NR_KINDS];
	uint32_t caller; /* symbol of up[its own kind]'s frame, 0 when none */
	uint16_t active; /* MODEL_ACTIVE_* */
};

/* A closed span segment. A generator resumed N times gives N+1 segments, of
 * which only the first has enter_flags without PTG_F_ENTER_RESUME. */
struct model_span {
	uint32_t pid;
	uint32_t tid;
	uint32_t sym;
	uint16_t kind;	      /* PTG_REC_PY_ENTER or PTG_REC_OP_ENTER */
	uint16_t enter_flags; /* PTG_F_ENTER_* */
	uint16_t exit_flags;  /* PTG_F_EXIT_* */
	uint16_t pad;
	uint64_t start;
	uint64_t end;
	uint64_t self_ns; /* end - start minus the time of its child segments */
	uint64_t ext;
	int64_t aux0; /* aux[0] of the ENTER record */
	int64_t aux1; /* aux[1] of the ENTER record */
	/* under MODEL_WALK_ARGS, the args blob of its ENTER (trace.h); valid during the call */
	const char *args;
	/* as in its model_frame, about the stack handed with it */
	uint32_t up[MODEL_NR_KINDS];
	uint32_t caller;
	uint16_t active;
};

static inline enum model_kind model_kind_of(uint16_t rec_kind)
{
	return rec_kind == PTG_REC_OP_ENTER ? MODEL_OP : MODEL_PY;
}

/* 1 + index of the innermost frame of kind in stack, 0 when none: O(1). */
static inline uint32_t model_innermost(const struct model_frame *stack, unsigned int depth,
				       enum model_kind kind)
{
	if (!depth)
		return 0;
	if (model_kind_of(stack[depth - 1].kind) == kind)
		return depth;
	return stack[depth - 1].up[kind];
}

/* model_visitor.flags: what a consumer needs beyond the default walk */
#define MODEL_WALK_ARGS	  0x1 /* each span's ENTER args blob, kept while it is open */
#define MODEL_WALK_EVENTS 0x2 /* PTG_REC_EVENT records too, to record() and the stats */
/* spans still open at the end close at stats.last_ts, with exit_flags PTG_F_EXIT_STOP */
#define MODEL_WALK_CLOSE 0x4

struct model_visitor {
	/*
	 * A span closed. stack[0] is the outermost open ancestor on the same
	 * thread, stack[depth - 1] the direct parent; the span itself is not
	 * in it. May be NULL.
	 */
	void (*span)(void *ctx, const struct model_span *s, const struct model_frame *stack,
		     unsigned int depth);
	/*
	 * Any record that is not a PY/OP enter or exit, with the stack of
	 * open spans of its tid at that point of the file (depth 0 when the
	 * tid has none, e.g. GPU records). May be NULL.
	 */
	void (*record)(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		       unsigned int depth);
	unsigned int flags; /* MODEL_WALK_* */
};

/* Statistics of one pass, for reports' headers. */
struct model_stats {
	uint64_t records;
	uint64_t spans;
	uint64_t first_ts;	  /* smallest ts seen, UINT64_MAX if none */
	uint64_t last_ts;	  /* largest ts or ts + dur seen */
	uint64_t unmatched_exits; /* EXIT with no open span on its tid (ignored) */
	uint32_t threads;
};

/*
 * Reads r from its current position to the end (call trace_reader__rewind()
 * first for a second pass). Returns 0, or a negative errno when the trace is
 * corrupt (the reader's error says why). stats may be NULL.
 */
int model__walk(struct trace_reader *r, const struct model_visitor *v, void *ctx,
		struct model_stats *stats);

#endif /* PTG_MODEL_H */
