// SPDX-License-Identifier: MIT
/*
 * Flame graphs of a trace: one model__walk that adds weights into a trie of
 * stacks (stacks.h) whose frames are symbol ids. Each thread caches the node
 * path of its current stack, found again by the model's frame ids in
 * O(log depth), so a span costs a binary search and one lookup, not one
 * lookup (or compare) per level. Writing is flamegraph_write.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/flamegraph.h"
#include "base/array.h"
#include "base/log.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "model/cudajoin.h"
#include "model/model.h"

/* launches: a CUDA call of a thread that --tid leaves out */
#define FG_DROPPED UINT64_MAX

struct flamegraph {
	struct stacks st;
	enum flamegraph_weight weight;
	struct stacks_namer namer; /* symbols of the trace being written */
};

int flamegraph_weight_parse(const char *s, enum flamegraph_weight *out)
{
	static const char *const names[] = {"wall", "cpu", "gpu", "offcpu"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum flamegraph_weight)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *flamegraph_weight_name(enum flamegraph_weight w)
{
	switch (w) {
	case FG_WEIGHT_WALL:
		return "wall time";
	case FG_WEIGHT_CPU:
		return "on-CPU time";
	case FG_WEIGHT_GPU:
		return "GPU kernel time";
	case FG_WEIGHT_OFFCPU:
		return "off-CPU time";
	}
	return "";
}

/* A CUDA call that a thread made with no frame open: a stack of its own, under the root. */
struct fg_root_call {
	uint64_t ts, end;
	uint32_t sym, node;
};

#define FG_ROOT_CALLS 4 /* calls open at once on a thread (runtime -> driver) */

/* Per thread: the node path of the stack last seen, and off-CPU time per level. */
struct fg_thread {
	uint64_t *ids; /* model_frame.id of each level */
	uint32_t *nodes;
	uint64_t *off; /* cpu weight: off-CPU ns inside the frame at each level */
	unsigned int cap;
	unsigned int valid;
	struct fg_root_call calls[FG_ROOT_CALLS]; /* the last ones, until one holds them */
	unsigned int ncalls;
};

/* A kernel whose launch (by correlation id) has not been seen yet. */
struct fg_kernel {
	uint64_t corr;
	uint64_t dur;
	uint32_t sym;
	uint32_t next; /* next kernel of the same corr, or in the free list */
	bool live;
};

struct fg_collect {
	const struct flamegraph_opts *o;
	struct flamegraph *fg;
	struct threads threads; /* of struct fg_thread */
	struct u64map launches; /* corr -> node of the launching stack, or FG_DROPPED */
	struct u64map pending;	/* corr -> first waiting kernel, or STACKS_NONE */
	struct u64map joins;	/* host call id -> corr (cudajoin.h) */
	struct fg_kernel *kernels;
	size_t nkernels, kernels_cap;
	uint32_t free_kernel; /* reusable entries of kernels */
	int err;
};

static struct fg_thread *fg_thread_get(struct fg_collect *c, uint32_t pid, uint32_t tid)
{
	return threads__get(&c->threads, pid, tid, NULL);
}

static void fg_thread_fini(void *p)
{
	struct fg_thread *t = p;

	free(t->ids);
	free(t->nodes);
	free(t->off);
}

static int fg_thread_reserve(struct fg_thread *t, unsigned int depth)
{
	unsigned int cap = t->cap ? t->cap : 64;
	uint64_t *ids, *off;
	uint32_t *nodes;

	if (depth < t->cap)
		return 0;
	while (cap <= depth)
		cap *= 2;
	ids = realloc(t->ids, cap * sizeof(*ids));
	if (ids)
		t->ids = ids;
	nodes = realloc(t->nodes, cap * sizeof(*nodes));
	if (nodes)
		t->nodes = nodes;
	off = realloc(t->off, cap * sizeof(*off));
	if (off)
		t->off = off;
	if (!ids || !nodes || !off)
		return -ENOMEM;
	memset(off + t->cap, 0, (cap - t->cap) * sizeof(*off));
	t->cap = cap;
	return 0;
}

/*
 * Levels of the cached path still on the stack. An open frame keeps its id,
 * and the frames under it stay as they were while it is open: the levels
 * that match are a prefix, found by bisection.
 */
static unsigned int fg_cached(const struct fg_thread *t, const struct model_frame *stack,
			      unsigned int n)
{
	unsigned int lo = 0, hi = n < t->valid ? n : t->valid, mid;

	while (lo < hi) {
		mid = lo + (hi - lo + 1) / 2;
		if (t->ids[mid - 1] == stack[mid - 1].id)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* Node of the stack (STACKS_ROOT for an empty one), reusing the cached prefix. */
static int fg_stack_node(struct fg_collect *c, struct fg_thread *t, const struct model_frame *stack,
			 unsigned int depth, uint32_t *out)
{
	/* levels past max_stack all map to one STACKS_CUT node: cache one of them */
	unsigned int n = depth <= c->fg->st.max_stack ? depth : c->fg->st.max_stack + 1;
	uint32_t node = STACKS_ROOT;
	unsigned int i;
	int err;

	err = fg_thread_reserve(t, depth);
	if (err)
		return err;
	i = fg_cached(t, stack, n);
	if (i)
		node = t->nodes[i - 1];
	for (; i < n; i++) {
		err = stacks__child(&c->fg->st, node, stack[i].sym, &node);
		if (err)
			return err;
		t->ids[i] = stack[i].id;
		t->nodes[i] = node;
	}
	t->valid = n;
	*out = node;
	return 0;
}

/* w to the child frame of parent, the end of a stack of nframes frames (0: not known) */
static int fg_add(struct fg_collect *c, uint32_t parent, uint32_t frame, uint64_t w,
		  uint64_t nframes)
{
	uint32_t node;
	int err = stacks__child(&c->fg->st, parent, frame, &node);

	if (!err)
		c->fg->st.nodes[node].self += w;
	return err ? err : stacks__note_cut(&c->fg->st, node, nframes);
}

static int fg_on_span(struct fg_collect *c, const struct model_span *s,
		      const struct model_frame *stack, unsigned int depth)
{
	struct fg_thread *t = fg_thread_get(c, s->pid, s->tid);
	uint64_t w = s->self_ns;
	uint32_t node;
	int err;

	if (!t)
		return -ENOMEM;
	err = fg_stack_node(c, t, stack, depth, &node);
	if (err)
		return err;
	if (c->o->weight == FG_WEIGHT_CPU) {
		w -= t->off[depth] < w ? t->off[depth] : w;
		t->off[depth] = 0;
	}
	return fg_add(c, node, s->sym, w, depth + 1);
}

/* off-CPU: the interval under the stack it interrupted; cpu: noted against
 * the innermost frame, whose self time it is cut from when it closes */
static int fg_on_sched(struct fg_collect *c, const struct ptg_record *rec,
		       const struct model_frame *stack, unsigned int depth)
{
	bool offcpu = c->o->weight == FG_WEIGHT_OFFCPU;
	uint64_t start, end = rec->ts + rec->dur;
	struct fg_thread *t;
	uint32_t node;
	int err;

	/* no frame open (no Python in the thread): under the CUDA call it blocked in, if any */
	if (!depth)
		return offcpu ? fg_add(c, STACKS_ROOT, rec->sym, rec->dur, 1) : 0;
	t = fg_thread_get(c, rec->pid, rec->tid);
	if (!t)
		return -ENOMEM;
	if (offcpu) {
		err = fg_stack_node(c, t, stack, depth, &node);
		if (!err)
			c->fg->st.nodes[node].self += rec->dur;
		return err ? err : stacks__note_cut(&c->fg->st, node, depth);
	}
	err = fg_thread_reserve(t, depth);
	if (err)
		return err;
	start = stack[depth - 1].start > rec->ts ? stack[depth - 1].start : rec->ts;
	t->off[depth - 1] += end > start ? end - start : 0;
	return 0;
}

/*
 * wall: a CUDA call of a thread with no Python frame or op open (a program
 * with no Python) is a stack of its own, under the root. A call made inside
 * it (the driver call of a runtime call) is written before it, at its own
 * exit: it moves under it when the outer one comes.
 */
static int fg_on_root_call(struct fg_collect *c, const struct ptg_record *rec)
{
	struct fg_thread *t = fg_thread_get(c, rec->pid, rec->tid);
	uint64_t end = rec->ts + rec->dur, self = rec->dur;
	uint32_t node, inner;
	unsigned int n = 0;
	int err;

	if (!t)
		return -ENOMEM;
	err = stacks__child(&c->fg->st, STACKS_ROOT, rec->sym, &node);
	for (unsigned int i = 0; !err && i < t->ncalls; i++) {
		const struct fg_root_call p = t->calls[i];
		uint64_t d = p.end - p.ts;

		if (p.ts < rec->ts || p.end > end) {
			t->calls[n++] = p;
			continue;
		}
		c->fg->st.nodes[p.node].self -= d;
		err = stacks__child(&c->fg->st, node, p.sym, &inner);
		if (!err)
			c->fg->st.nodes[inner].self += d;
		self -= d < self ? d : self;
	}
	if (err)
		return err;
	if (n == FG_ROOT_CALLS)
		memmove(t->calls, t->calls + 1, --n * sizeof(t->calls[0]));
	t->calls[n++] =
	    (struct fg_root_call){.ts = rec->ts, .end = end, .sym = rec->sym, .node = node};
	t->ncalls = n;
	c->fg->st.nodes[node].self += self;
	return stacks__note_cut(&c->fg->st, node, 1);
}

static int fg_kernel_wait(struct fg_collect *c, const struct ptg_record *rec)
{
	uint64_t *head = u64map__get(&c->pending, rec->corr);
	struct fg_kernel *k;
	uint32_t i;

	if (c->free_kernel != STACKS_NONE) {
		i = c->free_kernel;
		c->free_kernel = c->kernels[i].next;
	} else {
		if (array_grow((void **)&c->kernels, &c->kernels_cap, c->nkernels + 1,
			       sizeof(*c->kernels)))
			return -ENOMEM;
		i = c->nkernels++;
	}
	k = &c->kernels[i];
	k->corr = rec->corr;
	k->dur = rec->dur;
	k->sym = rec->sym;
	k->live = true;
	k->next = head ? (uint32_t)*head : STACKS_NONE;
	return u64map__put(&c->pending, rec->corr, i);
}

/* The launch of corr was seen: its waiting kernels go under node. */
static int fg_kernels_flush(struct fg_collect *c, uint64_t corr, uint64_t node)
{
	uint64_t *head = u64map__get(&c->pending, corr);
	uint32_t i, next;
	int err = 0;

	if (!head)
		return 0;
	for (i = (uint32_t)*head; i != STACKS_NONE && !err; i = next) {
		next = c->kernels[i].next;
		if (node != FG_DROPPED)
			err = fg_add(c, (uint32_t)node, c->kernels[i].sym, c->kernels[i].dur, 0);
		c->kernels[i].live = false;
		c->kernels[i].next = c->free_kernel;
		c->free_kernel = i;
	}
	*head = STACKS_NONE;
	return err;
}

/* A probed call has the correlation id of the CUPTI record joined to it. */
static int fg_on_cuda_call(struct fg_collect *c, const struct ptg_record *rec,
			   const struct model_frame *stack, unsigned int depth)
{
	uint64_t corr = cuda_join_corr(&c->joins, rec);
	struct fg_thread *t;
	uint32_t node;
	int err;

	if (!corr)
		return 0;
	if (c->o->by_tid && rec->tid != c->o->tid) {
		err = u64map__put(&c->launches, corr, FG_DROPPED);
		return err ? err : fg_kernels_flush(c, corr, FG_DROPPED);
	}
	t = fg_thread_get(c, rec->pid, rec->tid);
	if (!t)
		return -ENOMEM;
	err = fg_stack_node(c, t, stack, depth, &node);
	if (!err)
		err = stacks__note_cut(&c->fg->st, node, depth);
	if (!err)
		err = u64map__put(&c->launches, corr, node);
	return err ? err : fg_kernels_flush(c, corr, node);
}

static int fg_on_kernel(struct fg_collect *c, const struct ptg_record *rec)
{
	uint64_t *launch = rec->corr ? u64map__get(&c->launches, rec->corr) : NULL;

	if (launch)
		return *launch == FG_DROPPED ? 0
					     : fg_add(c, (uint32_t)*launch, rec->sym, rec->dur, 0);
	if (rec->corr)
		return fg_kernel_wait(c, rec);
	/* no correlation id: nothing to tie it to a thread */
	return c->o->by_tid ? 0 : fg_add(c, STACKS_ROOT, rec->sym, rec->dur, 1);
}

static void fg_visit_span(void *ctx, const struct model_span *s, const struct model_frame *stack,
			  unsigned int depth)
{
	struct fg_collect *c = ctx;

	if (c->err || (c->o->by_tid && s->tid != c->o->tid))
		return;
	if (c->o->weight == FG_WEIGHT_WALL || c->o->weight == FG_WEIGHT_CPU)
		c->err = fg_on_span(c, s, stack, depth);
}

static void fg_visit_record(void *ctx, const struct ptg_record *rec,
			    const struct model_frame *stack, unsigned int depth)
{
	struct fg_collect *c = ctx;
	enum flamegraph_weight w = c->o->weight;

	if (c->err)
		return;
	if (rec->kind == PTG_REC_SCHED && (w == FG_WEIGHT_CPU || w == FG_WEIGHT_OFFCPU) &&
	    !(c->o->by_tid && rec->tid != c->o->tid))
		c->err = fg_on_sched(c, rec, stack, depth);
	else if (rec->kind == PTG_REC_CUDA_CALL && w == FG_WEIGHT_GPU)
		c->err = fg_on_cuda_call(c, rec, stack, depth);
	else if (rec->kind == PTG_REC_CUDA_CALL && w == FG_WEIGHT_WALL && !depth &&
		 !(c->o->by_tid && rec->tid != c->o->tid))
		c->err = fg_on_root_call(c, rec);
	else if (rec->kind == PTG_REC_GPU_KERNEL && w == FG_WEIGHT_GPU)
		c->err = fg_on_kernel(c, rec);
}

/* Kernels whose launch never showed up: leaves of the root, unless --tid. */
static int fg_kernels_orphaned(struct fg_collect *c)
{
	int err = 0;

	for (size_t i = 0; i < c->nkernels && !err; i++) {
		if (c->kernels[i].live && !c->o->by_tid)
			err = fg_add(c, STACKS_ROOT, c->kernels[i].sym, c->kernels[i].dur, 1);
	}
	return err;
}

static void fg_collect_free(struct fg_collect *c)
{
	threads__free(&c->threads, fg_thread_fini);
	free(c->kernels);
	u64map__free(&c->launches);
	u64map__free(&c->joins);
	u64map__free(&c->pending);
}

int flamegraph__collect(struct trace_reader *r, const struct flamegraph_opts *o,
			struct flamegraph **out)
{
	struct model_visitor v = {.span = fg_visit_span, .record = fg_visit_record};
	struct fg_collect c = {
	    .o = o, .free_kernel = STACKS_NONE, .threads = THREADS_INIT(struct fg_thread)};
	int err = 0;

	c.fg = calloc(1, sizeof(*c.fg));
	if (!c.fg || stacks__init(&c.fg->st)) {
		flamegraph__free(c.fg);
		pr_err("flamegraph: out of memory");
		return -ENOMEM;
	}
	c.fg->weight = o->weight;
	if (o->max_stack)
		stacks__set_max_stack(&c.fg->st, o->max_stack);
	if (o->weight == FG_WEIGHT_GPU)
		err = cuda_join_load(r, &c.joins);
	if (!err)
		err = model__walk(r, &v, &c, NULL);
	if (!err)
		err = c.err;
	if (!err)
		err = fg_kernels_orphaned(&c);
	if (err == -ENOMEM)
		pr_err("flamegraph: out of memory");
	fg_collect_free(&c);
	if (err) {
		flamegraph__free(c.fg);
		return err;
	}
	*out = c.fg;
	return 0;
}

void flamegraph__free(struct flamegraph *fg)
{
	if (!fg)
		return;
	stacks__fini(&fg->st);
	free(fg);
}

uint64_t flamegraph__total(const struct flamegraph *fg)
{
	return stacks__total(&fg->st);
}

enum flamegraph_weight flamegraph__weight(const struct flamegraph *fg)
{
	return fg->weight;
}

/* A frame's name: Python functions as "func (file:line)", kernels as "[gpu] name". */
static char *sym_format(const void *ctx, uint32_t frame)
{
	const struct trace_reader *r = ctx;
	const struct ptg_sym *s = frame ? trace_reader__sym(r, frame) : NULL;
	char *name = NULL;
	int n;

	if (!frame)
		n = asprintf(&name, "[unknown]");
	else if (!s)
		n = asprintf(&name, "[symbol %u]", frame);
	else if (s->kind == PTG_SYM_PY_FUNC && s->file && *s->file)
		n = asprintf(&name, "%s (%s:%u)", s->name, s->file, s->line);
	else if (s->kind == PTG_SYM_KERNEL)
		n = asprintf(&name, "[gpu] %s", s->name);
	else
		n = asprintf(&name, "%s", s->name);
	return n < 0 ? NULL : name;
}

static enum stacks_kind sym_kind(const void *ctx, uint32_t frame)
{
	const struct trace_reader *r = ctx;
	const struct ptg_sym *s = frame ? trace_reader__sym(r, frame) : NULL;

	if (!s)
		return STACKS_KIND_UNRESOLVED;
	if (s->kind == PTG_SYM_PY_FUNC)
		return STACKS_KIND_PYTHON;
	if (s->kind == PTG_SYM_OP)
		return STACKS_KIND_OP;
	if (s->kind == PTG_SYM_KERNEL)
		return STACKS_KIND_KERNEL;
	return STACKS_KIND_OTHER;
}

struct stacks *flamegraph__stacks(struct flamegraph *fg, const struct trace_reader *r)
{
	fg->namer = (struct stacks_namer){.format = sym_format, .kind = sym_kind, .ctx = r};
	stacks__set_namer(&fg->st, &fg->namer);
	return &fg->st;
}
