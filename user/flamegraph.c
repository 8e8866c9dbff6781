// SPDX-License-Identifier: MIT
/*
 * Flame graphs: one model__walk that adds weights into a trie of frames.
 * A node is (parent node, frame) where a frame is a symbol id, so identical
 * stacks merge as they are added and memory follows the number of distinct
 * stacks. Each thread caches the node path of its current stack, found
 * again by the model's frame ids in O(log depth), so a span costs a binary
 * search and one lookup, not one lookup (or compare) per level. No node is
 * deeper than max_stack + 1: deeper frames fold into one FG_CUT node.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cudajoin.h"
#include "flamegraph.h"
#include "model.h"
#include "u64map.h"
#include "utf8.h"

#define FG_ROOT 0
#define FG_NONE UINT32_MAX
/* the frame of a node that stands for every frame past max_stack */
#define FG_CUT (UINT32_MAX - 1)
/* launches: a CUDA call of a thread that --tid leaves out */
#define FG_DROPPED UINT64_MAX

struct fg_node {
	uint32_t parent;
	uint32_t frame;	  /* symbol id; 0 = [unknown] */
	uint32_t child;	  /* first child, FG_NONE = none */
	uint32_t sibling; /* next child of parent */
	uint32_t depth;	  /* 0 for the root */
	uint64_t self;	  /* weight of this exact stack, ns */
	uint64_t total;	  /* self + children, for the SVG layout */
};

struct flamegraph {
	struct fg_node *nodes; /* nodes[FG_ROOT] is "all" */
	size_t n, cap;
	struct u64map index; /* node_key(parent, frame) -> node */
	enum flamegraph_weight weight;
	bool sorted;
	/* frame names for output, by symbol id */
	struct u64map name_idx;
	char **names;
	size_t nnames, names_cap;
	struct u64map named; /* flamegraph__add_named(): name hash -> frame */
	unsigned int max_stack;
	struct u64map cuts; /* FG_CUT node -> fewest << 32 | most frames it stands for */
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

/* the top bit is never part of a node index */
static uint64_t node_key(uint32_t parent, uint32_t frame)
{
	return u64map_key((uint64_t)parent << 32 | frame);
}

static int fg_new_node(struct flamegraph *fg, uint32_t parent, uint32_t frame, uint32_t *out)
{
	struct fg_node *n;

	if (fg->n >= INT32_MAX ||
	    array_grow((void **)&fg->nodes, &fg->cap, fg->n + 1, sizeof(*fg->nodes)))
		return -ENOMEM;
	n = &fg->nodes[fg->n];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->frame = frame;
	n->child = FG_NONE;
	n->sibling = FG_NONE;
	n->depth = fg->n == FG_ROOT ? 0 : fg->nodes[parent].depth + 1;
	if (fg->n != FG_ROOT) {
		n->sibling = fg->nodes[parent].child;
		fg->nodes[parent].child = fg->n;
	}
	*out = fg->n++;
	return 0;
}

/*
 * The child of parent for frame, created on first use. Past max_stack
 * frames it is the parent's FG_CUT child, and the FG_CUT node itself below.
 */
static int fg_child(struct flamegraph *fg, uint32_t parent, uint32_t frame, uint32_t *out)
{
	uint64_t *idx;
	int err;

	if (fg->nodes[parent].frame == FG_CUT && parent != FG_ROOT) {
		*out = parent;
		return 0;
	}
	if (fg->nodes[parent].depth >= fg->max_stack)
		frame = FG_CUT;
	idx = u64map__get(&fg->index, node_key(parent, frame));

	if (idx) {
		*out = (uint32_t)*idx;
		return 0;
	}
	err = fg_new_node(fg, parent, frame, out);
	if (!err)
		err = u64map__put(&fg->index, node_key(parent, frame), *out);
	return err;
}

void flamegraph__free(struct flamegraph *fg)
{
	if (!fg)
		return;
	for (size_t i = 0; i < fg->nnames; i++)
		free(fg->names[i]);
	free(fg->names);
	u64map__free(&fg->name_idx);
	u64map__free(&fg->named);
	u64map__free(&fg->index);
	u64map__free(&fg->cuts);
	free(fg->nodes);
	free(fg);
}

/* A stack of nframes frames ended in node: an FG_CUT node notes how many it cut. */
static int fg_note_cut(struct flamegraph *fg, uint32_t node, uint64_t nframes)
{
	uint64_t cut = nframes > fg->max_stack ? nframes - fg->max_stack : 0, *v, lo, hi;

	if (node == FG_ROOT || fg->nodes[node].frame != FG_CUT || !cut)
		return 0;
	cut = cut > UINT32_MAX ? UINT32_MAX : cut;
	v = u64map__get(&fg->cuts, u64map_key(node));
	if (!v)
		return u64map__put(&fg->cuts, u64map_key(node), cut << 32 | cut);
	lo = *v >> 32 < cut ? *v >> 32 : cut;
	hi = (*v & UINT32_MAX) > cut ? (*v & UINT32_MAX) : cut;
	*v = lo << 32 | hi;
	return 0;
}

void flamegraph__set_max_stack(struct flamegraph *fg, unsigned int max_stack)
{
	fg->max_stack = max_stack;
}

uint64_t flamegraph__total(const struct flamegraph *fg)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < fg->n; i++)
		sum += fg->nodes[i].self;
	return sum;
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
	struct fg_thread *threads;
	size_t nthreads, threads_cap;
	struct u64map thread_idx;
	struct u64map launches; /* corr -> node of the launching stack, or FG_DROPPED */
	struct u64map pending;	/* corr -> first waiting kernel, or FG_NONE */
	struct u64map joins;	/* host call id -> corr (cudajoin.h) */
	struct fg_kernel *kernels;
	size_t nkernels, kernels_cap;
	uint32_t free_kernel; /* reusable entries of kernels */
	int err;
};

static struct fg_thread *fg_thread_get(struct fg_collect *c, uint32_t pid, uint32_t tid)
{
	uint64_t key = u64map_key((uint64_t)pid << 32 | tid);
	uint64_t *idx = u64map__get(&c->thread_idx, key);

	if (idx)
		return &c->threads[*idx];
	if (array_grow((void **)&c->threads, &c->threads_cap, c->nthreads + 1,
		       sizeof(*c->threads)) ||
	    u64map__put(&c->thread_idx, key, c->nthreads))
		return NULL;
	memset(&c->threads[c->nthreads], 0, sizeof(*c->threads));
	return &c->threads[c->nthreads++];
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

/* Node of the stack (FG_ROOT for an empty one), reusing the cached prefix. */
static int fg_stack_node(struct fg_collect *c, struct fg_thread *t, const struct model_frame *stack,
			 unsigned int depth, uint32_t *out)
{
	/* levels past max_stack all map to one FG_CUT node: cache one of them */
	unsigned int n = depth <= c->fg->max_stack ? depth : c->fg->max_stack + 1;
	uint32_t node = FG_ROOT;
	unsigned int i;
	int err;

	err = fg_thread_reserve(t, depth);
	if (err)
		return err;
	i = fg_cached(t, stack, n);
	if (i)
		node = t->nodes[i - 1];
	for (; i < n; i++) {
		err = fg_child(c->fg, node, stack[i].sym, &node);
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
	int err = fg_child(c->fg, parent, frame, &node);

	if (!err)
		c->fg->nodes[node].self += w;
	return err ? err : fg_note_cut(c->fg, node, nframes);
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
		return offcpu ? fg_add(c, FG_ROOT, rec->sym, rec->dur, 1) : 0;
	t = fg_thread_get(c, rec->pid, rec->tid);
	if (!t)
		return -ENOMEM;
	if (offcpu) {
		err = fg_stack_node(c, t, stack, depth, &node);
		if (!err)
			c->fg->nodes[node].self += rec->dur;
		return err ? err : fg_note_cut(c->fg, node, depth);
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
	err = fg_child(c->fg, FG_ROOT, rec->sym, &node);
	for (unsigned int i = 0; !err && i < t->ncalls; i++) {
		const struct fg_root_call p = t->calls[i];
		uint64_t d = p.end - p.ts;

		if (p.ts < rec->ts || p.end > end) {
			t->calls[n++] = p;
			continue;
		}
		c->fg->nodes[p.node].self -= d;
		err = fg_child(c->fg, node, p.sym, &inner);
		if (!err)
			c->fg->nodes[inner].self += d;
		self -= d < self ? d : self;
	}
	if (err)
		return err;
	if (n == FG_ROOT_CALLS)
		memmove(t->calls, t->calls + 1, --n * sizeof(t->calls[0]));
	t->calls[n++] =
	    (struct fg_root_call){.ts = rec->ts, .end = end, .sym = rec->sym, .node = node};
	t->ncalls = n;
	c->fg->nodes[node].self += self;
	return fg_note_cut(c->fg, node, 1);
}

static int fg_kernel_wait(struct fg_collect *c, const struct ptg_record *rec)
{
	uint64_t *head = u64map__get(&c->pending, rec->corr);
	struct fg_kernel *k;
	uint32_t i;

	if (c->free_kernel != FG_NONE) {
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
	k->next = head ? (uint32_t)*head : FG_NONE;
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
	for (i = (uint32_t)*head; i != FG_NONE && !err; i = next) {
		next = c->kernels[i].next;
		if (node != FG_DROPPED)
			err = fg_add(c, (uint32_t)node, c->kernels[i].sym, c->kernels[i].dur, 0);
		c->kernels[i].live = false;
		c->kernels[i].next = c->free_kernel;
		c->free_kernel = i;
	}
	*head = FG_NONE;
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
		err = fg_note_cut(c->fg, node, depth);
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
	return c->o->by_tid ? 0 : fg_add(c, FG_ROOT, rec->sym, rec->dur, 1);
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
			err = fg_add(c, FG_ROOT, c->kernels[i].sym, c->kernels[i].dur, 1);
	}
	return err;
}

static void fg_collect_free(struct fg_collect *c)
{
	for (size_t i = 0; i < c->nthreads; i++) {
		free(c->threads[i].ids);
		free(c->threads[i].nodes);
		free(c->threads[i].off);
	}
	free(c->threads);
	free(c->kernels);
	u64map__free(&c->thread_idx);
	u64map__free(&c->launches);
	u64map__free(&c->joins);
	u64map__free(&c->pending);
}

int flamegraph__collect(struct trace_reader *r, const struct flamegraph_opts *o,
			struct flamegraph **out)
{
	struct model_visitor v = {.span = fg_visit_span, .record = fg_visit_record};
	struct fg_collect c = {.o = o, .free_kernel = FG_NONE};
	uint32_t root;
	int err;

	c.fg = calloc(1, sizeof(*c.fg));
	if (!c.fg) {
		fprintf(stderr, "ptrace-gpu: flamegraph: out of memory\n");
		return -ENOMEM;
	}
	c.fg->weight = o->weight;
	c.fg->max_stack = o->max_stack ? o->max_stack : FLAMEGRAPH_MAX_STACK;
	err = fg_new_node(c.fg, FG_ROOT, 0, &root);
	if (err)
		goto cleanup;
	if (o->weight == FG_WEIGHT_GPU)
		err = cuda_join_load(r, &c.joins);
	if (!err)
		err = model__walk(r, &v, &c, NULL);
	if (!err)
		err = c.err;
	if (!err)
		err = fg_kernels_orphaned(&c);
cleanup:
	if (err == -ENOMEM)
		fprintf(stderr, "ptrace-gpu: flamegraph: out of memory\n");
	fg_collect_free(&c);
	if (err) {
		flamegraph__free(c.fg);
		return err;
	}
	*out = c.fg;
	return 0;
}

int flamegraph__new(enum flamegraph_weight weight, struct flamegraph **out)
{
	struct flamegraph *fg = calloc(1, sizeof(*fg));
	uint32_t root;

	if (!fg || fg_new_node(fg, FG_ROOT, 0, &root)) {
		flamegraph__free(fg);
		return -ENOMEM;
	}
	fg->weight = weight;
	fg->max_stack = FLAMEGRAPH_MAX_STACK;
	*out = fg;
	return 0;
}

/* ';' separates frames and a newline ends a stack in the folded format: replaces them in name. */
static char *folded_name(char *name)
{
	for (char *p = name; *p; p++) {
		if (*p == ';')
			*p = ':';
		else if (*p == '\n' || *p == '\r')
			*p = ' ';
	}
	return name;
}

/* The frame id of name: ids index names[] + 1, as fg_name() looks them up. */
static int fg_named_frame(struct flamegraph *fg, const char *name, uint32_t *out)
{
	char *copy = strdup(name);
	uint64_t h, *idx;

	if (!copy)
		return -ENOMEM;
	folded_name(copy);
	h = u64map_hash(U64MAP_HASH_SEED, copy, strlen(copy));
	/* probe on: two names may share a hash */
	for (;; h++) {
		idx = u64map__get(&fg->named, u64map_key(h));
		if (!idx)
			break;
		if (!strcmp(fg->names[*idx - 1], copy)) {
			free(copy);
			*out = (uint32_t)*idx;
			return 0;
		}
	}
	if (array_grow((void **)&fg->names, &fg->names_cap, fg->nnames + 1, sizeof(*fg->names))) {
		free(copy);
		return -ENOMEM;
	}
	fg->names[fg->nnames++] = copy;
	*out = (uint32_t)fg->nnames;
	if (u64map__put(&fg->named, u64map_key(h), *out) ||
	    u64map__put(&fg->name_idx, u64map_key(*out), *out - 1))
		return -ENOMEM;
	return 0;
}

int flamegraph__add_named(struct flamegraph *fg, const char *const *frames, unsigned int depth,
			  uint64_t weight)
{
	uint32_t node = FG_ROOT, frame;
	int err;

	for (unsigned int i = 0; i < depth; i++) {
		err = fg_named_frame(fg, frames[i], &frame);
		if (!err)
			err = fg_child(fg, node, frame, &node);
		if (err)
			return err;
	}
	fg->nodes[node].self += weight;
	fg->sorted = false;
	return fg_note_cut(fg, node, depth);
}

static char *frame_format(const struct trace_reader *r, uint32_t frame)
{
	const struct ptg_sym *s = frame && r ? trace_reader__sym(r, frame) : NULL;
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
	if (n < 0)
		return NULL;
	return folded_name(name);
}

/* The printed name of frame, formatted once per symbol; NULL when out of memory. */
static const char *fg_name(struct flamegraph *fg, const struct trace_reader *r, uint32_t frame)
{
	uint64_t key = u64map_key(frame);
	uint64_t *idx = u64map__get(&fg->name_idx, key);
	char *name;

	if (idx)
		return fg->names[*idx];
	if (array_grow((void **)&fg->names, &fg->names_cap, fg->nnames + 1, sizeof(*fg->names)))
		return NULL;
	name = frame_format(r, frame);
	if (!name)
		return NULL;
	if (u64map__put(&fg->name_idx, key, fg->nnames)) {
		free(name);
		return NULL;
	}
	fg->names[fg->nnames++] = name;
	return name;
}

#define FG_CUT_NAME_LEN 48

/* The printed name of node: its frame's, or what an FG_CUT node stands for. */
static const char *fg_node_name(struct flamegraph *fg, const struct trace_reader *r, uint32_t node,
				char buf[FG_CUT_NAME_LEN])
{
	uint64_t *cut;

	if (node == FG_ROOT || fg->nodes[node].frame != FG_CUT)
		return fg_name(fg, r, fg->nodes[node].frame);
	cut = u64map__get(&fg->cuts, u64map_key(node));
	if (!cut)
		snprintf(buf, FG_CUT_NAME_LEN, "[... frames cut]");
	else if (*cut >> 32 == (*cut & UINT32_MAX))
		snprintf(buf, FG_CUT_NAME_LEN, "[... %u frames cut]", (uint32_t)*cut);
	else
		snprintf(buf, FG_CUT_NAME_LEN, "[... %u to %u frames cut]", (uint32_t)(*cut >> 32),
			 (uint32_t)*cut);
	return buf;
}

struct fg_named {
	const char *name;
	uint32_t node;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct fg_named *)a)->name, ((const struct fg_named *)b)->name);
}

/* Orders every node's children by name, as flamegraph.pl draws them. */
static int fg_sort(struct flamegraph *fg, const struct trace_reader *r)
{
	struct fg_named *tmp = NULL;
	size_t cap = 0, n;
	int err = 0;

	for (size_t p = 0; p < fg->n && !fg->sorted; p++) {
		n = 0;
		for (uint32_t c = fg->nodes[p].child; c != FG_NONE; c = fg->nodes[c].sibling) {
			err = array_grow((void **)&tmp, &cap, n + 1, sizeof(*tmp));
			if (err)
				goto cleanup;
			tmp[n].node = c;
			/* a node has at most one FG_CUT child: any name sorts it */
			tmp[n++].name = fg->nodes[c].frame == FG_CUT
					    ? "[... frames cut]"
					    : fg_name(fg, r, fg->nodes[c].frame);
			if (!tmp[n - 1].name) {
				err = -ENOMEM;
				goto cleanup;
			}
		}
		array_sort(tmp, n, sizeof(*tmp), cmp_named);
		fg->nodes[p].child = n ? tmp[0].node : FG_NONE;
		for (size_t i = 0; i < n; i++)
			fg->nodes[tmp[i].node].sibling = i + 1 < n ? tmp[i + 1].node : FG_NONE;
	}
	fg->sorted = true;
cleanup:
	free(tmp);
	if (err)
		fprintf(stderr, "flamegraph: out of memory\n");
	return err;
}

struct strbuf {
	char *s;
	size_t len, cap;
};

static int strbuf_add(struct strbuf *b, const char *sep, const char *s)
{
	size_t ls = strlen(sep), l = strlen(s);

	if (array_grow((void **)&b->s, &b->cap, b->len + ls + l + 1, 1))
		return -ENOMEM;
	memcpy(b->s + b->len, sep, ls);
	memcpy(b->s + b->len + ls, s, l + 1);
	b->len += ls + l;
	return 0;
}

/* Depth-first from the root, in a loop: a trie as deep as the input must not be C recursion. */
int flamegraph__write_folded(struct flamegraph *fg, const struct trace_reader *r, FILE *out)
{
	char cut[FG_CUT_NAME_LEN];
	struct strbuf path = {};
	size_t *lens = NULL, lens_cap = 0; /* path length before each level */
	const struct fg_node *n;
	uint32_t node;
	const char *name;
	unsigned int d = 0;
	int err;

	err = fg_sort(fg, r);
	node = err ? FG_NONE : fg->nodes[FG_ROOT].child;
	while (node != FG_NONE && !err) {
		n = &fg->nodes[node];
		name = fg_node_name(fg, r, node, cut);
		err = array_grow((void **)&lens, &lens_cap, d + 1, sizeof(*lens));
		if (err)
			break;
		lens[d] = path.len;
		err = name ? strbuf_add(&path, d ? ";" : "", name) : -ENOMEM;
		if (err)
			break;
		if (n->self)
			fprintf(out, "%s %" PRIu64 "\n", path.s, n->self);
		if (n->child != FG_NONE) {
			node = n->child;
			d++;
			continue;
		}
		/* up to the nearest level with a next sibling */
		for (;;) {
			path.len = lens[d];
			path.s[path.len] = '\0';
			if (fg->nodes[node].sibling != FG_NONE) {
				node = fg->nodes[node].sibling;
				break;
			}
			node = fg->nodes[node].parent;
			if (node == FG_ROOT) {
				node = FG_NONE;
				break;
			}
			d--;
		}
	}
	free(lens);
	free(path.s);
	if (err)
		fprintf(stderr, "flamegraph: out of memory\n");
	return err;
}

struct stack_walk {
	const struct flamegraph *fg;
	int (*fn)(void *ctx, const uint32_t *frames, unsigned int depth, uint64_t weight);
	void *ctx;
	uint32_t *frames;
	size_t cap;
};

static int foreach_node(struct stack_walk *w, uint32_t node, unsigned int depth)
{
	const struct fg_node *n = &w->fg->nodes[node];
	int err;

	if (array_grow((void **)&w->frames, &w->cap, depth + 1, sizeof(*w->frames)))
		return -ENOMEM;
	w->frames[depth] = n->frame;
	if (n->self && (err = w->fn(w->ctx, w->frames, depth + 1, n->self)))
		return err;
	for (uint32_t c = n->child; c != FG_NONE; c = w->fg->nodes[c].sibling) {
		if ((err = foreach_node(w, c, depth + 1)))
			return err;
	}
	return 0;
}

int flamegraph__foreach_stack(const struct flamegraph *fg,
			      int (*fn)(void *ctx, const uint32_t *frames, unsigned int depth,
					uint64_t weight),
			      void *ctx)
{
	struct stack_walk w = {.fg = fg, .fn = fn, .ctx = ctx};
	int err = 0;

	for (uint32_t c = fg->nodes[FG_ROOT].child; c != FG_NONE && !err; c = fg->nodes[c].sibling)
		err = foreach_node(&w, c, 0);
	free(w.frames);
	return err;
}

#define SVG_W	    1200
#define SVG_XPAD    10
#define SVG_FRAME_H 16
#define SVG_TOP	    72
#define SVG_BOTTOM  34
#define SVG_FONT_W  (12 * 0.59) /* average glyph width of 12px Verdana */
#define SVG_MIN_PX  0.1		/* narrower frames are left out, as flamegraph.pl does */

/*
 * Interactions, all client-side: hover shows a frame's name, weight and share
 * of the total; click zooms into a frame (its ancestors span the width, half
 * transparent); Search (or Ctrl-F) highlights frames matching a regular
 * expression and shows what share of the total they cover, nested matches
 * counted once; Reset Zoom / Escape go back.
 */
static const char svg_script[] =
    "\"use strict\";\n"
    "var W = 1200, XPAD = 10, FONTW = 12 * 0.59, GPU = \"[gpu] \", frames = [], total = 0;\n"
    "var details, matched, resetbtn, searchbtn, searching = false;\n"
    "function init(evt) {\n"
    "\tvar gs = document.getElementById(\"frames\").getElementsByTagName(\"g\");\n"
    "\ttotal = +document.documentElement.getAttribute(\"data-total\");\n"
    "\tdetails = document.getElementById(\"details\").firstChild;\n"
    "\tmatched = document.getElementById(\"matched\").firstChild;\n"
    "\tresetbtn = document.getElementById(\"reset\");\n"
    "\tsearchbtn = document.getElementById(\"search\");\n"
    "\tfor (var i = 0; i < gs.length; i++)\n"
    "\t\tframes.push(frame_of(gs[i]));\n"
    "\tresetbtn.addEventListener(\"click\", unzoom);\n"
    "\tsearchbtn.addEventListener(\"click\", search_prompt);\n"
    "\twindow.addEventListener(\"keydown\", function (e) {\n"
    "\t\tif (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) {\n"
    "\t\t\te.preventDefault();\n"
    "\t\t\tsearch_prompt();\n"
    "\t\t} else if (e.keyCode === 27) {\n"
    "\t\t\tunzoom();\n"
    "\t\t\treset_search();\n"
    "\t\t}\n"
    "\t});\n"
    "\tdraw(frames[0]);\n"
    "}\n"
    "function frame_of(g) {\n"
    "\tvar info = g.getElementsByTagName(\"title\")[0].textContent;\n"
    "\tvar f = { g: g, info: info, name: info.substring(0, info.lastIndexOf(\" (\")),\n"
    "\t\trect: g.getElementsByTagName(\"rect\")[0], text: g.getElementsByTagName(\"text\")[0],\n"
    "\t\tx: +g.getAttribute(\"data-x\"), n: +g.getAttribute(\"data-n\"),\n"
    "\t\td: +g.getAttribute(\"data-d\") };\n"
    "\tf.fill = f.rect.getAttribute(\"fill\");\n"
    "\tg.addEventListener(\"click\", function () { zoom(f); });\n"
    "\tg.addEventListener(\"mouseover\", function () { details.nodeValue = f.info; });\n"
    "\tg.addEventListener(\"mouseout\", function () { details.nodeValue = \" \"; });\n"
    "\treturn f;\n"
    "}\n"
    "function label(f, w) {\n"
    "\tvar max = Math.floor((w - 6) / FONTW), name = f.name;\n"
    "\tif (max < 3)\n"
    "\t\treturn \"\";\n"
    "\tif (name.length > max && name.indexOf(GPU) === 0)\n"
    "\t\tname = name.substring(GPU.length);\n"
    "\treturn name.length <= max ? name : name.substring(0, max - 2) + \"..\";\n"
    "}\n"
    "function draw(z) {\n"
    "\tvar scale = z.n ? (W - 2 * XPAD) / z.n : 0;\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tvar above = f.d >= z.d, x = XPAD, w = W - 2 * XPAD, show;\n"
    "\t\tif (above) {\n"
    "\t\t\tshow = f.x >= z.x && f.x + f.n <= z.x + z.n;\n"
    "\t\t\tx = XPAD + (f.x - z.x) * scale;\n"
    "\t\t\tw = z.n ? f.n * scale : W - 2 * XPAD;\n"
    "\t\t} else {\n"
    "\t\t\tshow = f.x <= z.x && f.x + f.n >= z.x + z.n;\n"
    "\t\t}\n"
    "\t\tf.g.style.display = show ? \"\" : \"none\";\n"
    "\t\tif (!show)\n"
    "\t\t\treturn;\n"
    "\t\tf.g.style.opacity = above ? 1 : 0.5;\n"
    "\t\tf.rect.setAttribute(\"x\", x.toFixed(2));\n"
    "\t\tf.rect.setAttribute(\"width\", w.toFixed(2));\n"
    "\t\tf.text.setAttribute(\"x\", (x + 3).toFixed(2));\n"
    "\t\tf.text.textContent = label(f, w);\n"
    "\t});\n"
    "}\n"
    "function zoom(f) {\n"
    "\tif (f === frames[0])\n"
    "\t\treturn unzoom();\n"
    "\tresetbtn.style.display = \"\";\n"
    "\tdraw(f);\n"
    "}\n"
    "function unzoom() {\n"
    "\tresetbtn.style.display = \"none\";\n"
    "\tdraw(frames[0]);\n"
    "}\n"
    "function search_prompt() {\n"
    "\tif (searching)\n"
    "\t\treturn reset_search();\n"
    "\tvar term = prompt(\"Search frames (regular expression):\", \"\");\n"
    "\tif (term)\n"
    "\t\tsearch(term);\n"
    "}\n"
    "function search(term) {\n"
    "\tvar re, hits = [], sum = 0, end = -1;\n"
    "\ttry {\n"
    "\t\tre = new RegExp(term);\n"
    "\t} catch (e) {\n"
    "\t\talert(\"not a regular expression: \" + e.message);\n"
    "\t\treturn;\n"
    "\t}\n"
    "\tframes.forEach(function (f) {\n"
    "\t\tvar hit = f.d > 0 && re.test(f.name);\n"
    "\t\tf.rect.setAttribute(\"fill\", hit ? \"rgb(230,0,230)\" : f.fill);\n"
    "\t\tif (hit)\n"
    "\t\t\thits.push(f);\n"
    "\t});\n"
    "\t/* frames nest or are disjoint: count a hit inside a counted one once */\n"
    "\thits.sort(function (a, b) { return a.x - b.x || b.n - a.n; });\n"
    "\thits.forEach(function (f) {\n"
    "\t\tif (f.x >= end) {\n"
    "\t\t\tsum += f.n;\n"
    "\t\t\tend = f.x + f.n;\n"
    "\t\t}\n"
    "\t});\n"
    "\tsearching = true;\n"
    "\tsearchbtn.firstChild.nodeValue = \"Reset Search\";\n"
    "\tmatched.nodeValue = \"Matched: \" + (total ? 100 * sum / total : 0).toFixed(2) + \"%\";\n"
    "}\n"
    "function reset_search() {\n"
    "\tsearching = false;\n"
    "\tframes.forEach(function (f) { f.rect.setAttribute(\"fill\", f.fill); });\n"
    "\tsearchbtn.firstChild.nodeValue = \"Search\";\n"
    "\tmatched.nodeValue = \" \";\n"
    "}\n";

struct svg_ctx {
	struct flamegraph *fg;
	const struct trace_reader *r;
	FILE *out;
	double px_per_ns;
	unsigned int max_depth;
	int height;
};

/* Characters of s, counting an invalid byte as one (it prints as U+FFFD). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0, len;

	for (const unsigned char *p = (const unsigned char *)s; *p; p += len ? len : 1, n++)
		len = utf8_seq_len(p);
	return n;
}

/*
 * s as XML character data, at most max characters ("..": cut). Control
 * characters and invalid UTF-8 would make the whole file unreadable to an
 * XML parser: they become ' ' and U+FFFD.
 */
static void svg_text(FILE *out, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = utf8_chars(s), len;

	if (n > max && max < 3)
		return; /* not one character and the ".." */
	if (n > max)
		max -= 2;
	for (size_t i = 0; *p && i < max; i++, p += len ? len : 1) {
		len = utf8_seq_len(p);
		if (!len)
			fputs(UTF8_REPLACEMENT, out);
		else if (*p == '&')
			fputs("&amp;", out);
		else if (*p == '<')
			fputs("&lt;", out);
		else if (*p == '>')
			fputs("&gt;", out);
		else if (*p < 0x20)
			fputc(' ', out);
		else
			fwrite(p, 1, len, out);
	}
	if (n > max && *p)
		fputs("..", out);
}

/* A stable color per name; the palette tells the kind of frame. */
static void svg_color(FILE *out, const struct trace_reader *r, uint32_t frame, const char *name)
{
	const struct ptg_sym *s = frame && r ? trace_reader__sym(r, frame) : NULL;
	uint32_t h = 2166136261u;
	double v1, v2, v3;

	for (const char *p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	v1 = (h & 0xff) / 255.0;
	v2 = (h >> 8 & 0xff) / 255.0;
	v3 = (h >> 16 & 0xff) / 255.0;
	if (!s && r)
		fprintf(out, "rgb(%d,%d,%d)", 180 + (int)(40 * v1), 180 + (int)(40 * v1),
			180 + (int)(40 * v1));
	else if (!s || s->kind == PTG_SYM_PY_FUNC)
		fprintf(out, "rgb(%d,%d,%d)", 205 + (int)(50 * v3), (int)(230 * v1),
			(int)(55 * v2));
	else if (s->kind == PTG_SYM_OP)
		fprintf(out, "rgb(%d,%d,%d)", 50 + (int)(60 * v1), 165 + (int)(55 * v2),
			165 + (int)(55 * v2));
	else if (s->kind == PTG_SYM_KERNEL)
		fprintf(out, "rgb(%d,%d,%d)", 40 + (int)(50 * v1), 170 + (int)(70 * v2),
			40 + (int)(50 * v3));
	else
		fprintf(out, "rgb(%d,%d,%d)", 200 + (int)(55 * v1), 200 + (int)(55 * v1),
			(int)(90 * v2));
}

/* A weight in the unit that reads best: ns, µs, ms or s with three decimals. */
static void svg_time(FILE *out, uint64_t ns)
{
	if (ns < 1000)
		fprintf(out, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		fprintf(out, "%.3f \xc2\xb5s", ns / 1e3);
	else if (ns < 1000000000)
		fprintf(out, "%.3f ms", ns / 1e6);
	else
		fprintf(out, "%.3f s", ns / 1e9);
}

/*
 * The label in a frame's box: a GPU frame that does not fit loses its
 * "[gpu] " prefix first (its color says it is one), so that the kernel's
 * name shows rather than "[gpu]..". The hover title keeps the whole name.
 */
static const char *svg_label(const char *name, double fits)
{
	static const char gpu[] = "[gpu] ";

	if (!strncmp(name, gpu, sizeof(gpu) - 1) && utf8_chars(name) > fits)
		return name + sizeof(gpu) - 1;
	return name;
}

static void svg_frame(struct svg_ctx *c, uint32_t node, unsigned int depth, uint64_t x_ns)
{
	const struct fg_node *n = &c->fg->nodes[node];
	char cut[FG_CUT_NAME_LEN];
	const char *name = node == FG_ROOT ? "all" : fg_node_name(c->fg, c->r, node, cut);
	uint64_t total = c->fg->nodes[FG_ROOT].total;
	int y = c->height - SVG_BOTTOM - (int)(depth + 1) * SVG_FRAME_H;
	double x = SVG_XPAD + x_ns * c->px_per_ns, w = n->total * c->px_per_ns, fits;

	/* "all" spans the width even when there is nothing to weigh */
	if (node == FG_ROOT)
		w = SVG_W - 2 * SVG_XPAD;
	fits = (w - 6) / SVG_FONT_W;

	fprintf(c->out,
		"<g class=\"f\" data-x=\"%" PRIu64 "\" data-n=\"%" PRIu64 "\" data-d=\"%u\">", x_ns,
		n->total, depth);
	fputs("<title>", c->out);
	svg_text(c->out, name, SIZE_MAX);
	fputs(" (", c->out);
	svg_time(c->out, n->total);
	fprintf(c->out, ", %.2f%%)</title>", total ? n->total * 100.0 / total : 100.0);
	fprintf(c->out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"", x, y, w,
		SVG_FRAME_H - 1);
	svg_color(c->out, c->r, node == FG_ROOT ? 0 : n->frame, name);
	fprintf(c->out, "\" rx=\"2\" ry=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", x + 3, y + 10.5);
	svg_text(c->out, svg_label(name, fits), fits >= 3 ? (size_t)fits : 0);
	fputs("</text></g>\n", c->out);
}

/*
 * Depth-first, children left to right by name, in a loop (no C recursion as
 * deep as the trie); emit = false only measures.
 */
static int svg_walk(struct svg_ctx *c, bool emit)
{
	const struct fg_node *nodes = c->fg->nodes;
	uint64_t *xs = NULL, x = 0; /* xs[d]: x of the open node at level d */
	size_t xs_cap = 0;
	uint32_t node = FG_ROOT;
	unsigned int d = 0;

	for (;;) {
		if (node == FG_ROOT || nodes[node].total * c->px_per_ns >= SVG_MIN_PX) {
			if (d > c->max_depth)
				c->max_depth = d;
			if (emit)
				svg_frame(c, node, d, x);
			if (nodes[node].child != FG_NONE) {
				if (array_grow((void **)&xs, &xs_cap, d + 1, sizeof(*xs))) {
					free(xs);
					return -ENOMEM;
				}
				xs[d++] = x;
				node = nodes[node].child;
				continue;
			}
		}
		/* on to the next sibling, of this node or of the nearest ancestor */
		for (;;) {
			if (node == FG_ROOT) {
				free(xs);
				return 0;
			}
			x += nodes[node].total;
			if (nodes[node].sibling != FG_NONE) {
				node = nodes[node].sibling;
				break;
			}
			node = nodes[node].parent;
			x = xs[--d];
		}
	}
}

static void fg_totals(struct flamegraph *fg)
{
	for (size_t i = 0; i < fg->n; i++)
		fg->nodes[i].total = fg->nodes[i].self;
	/* a child always comes after its parent in nodes[] */
	for (size_t i = fg->n; i-- > 1;)
		fg->nodes[fg->nodes[i].parent].total += fg->nodes[i].total;
}

static void svg_head(struct svg_ctx *c, const char *title)
{
	FILE *out = c->out;

	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"onload=\"init(evt)\" data-total=\"%" PRIu64 "\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style type=\"text/css\">\n"
		"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
		"#title { text-anchor: middle; font-size: 17px; }\n"
		"#subtitle { text-anchor: middle; fill: rgb(80,80,80); }\n"
		"#search, #matched { text-anchor: end; }\n"
		"#search, #reset { cursor: pointer; }\n"
		"#search:hover, #reset:hover { opacity: 0.7; }\n"
		".f:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; }\n"
		"</style>\n"
		"<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n",
		SVG_W, c->height, SVG_W, c->height, c->fg->nodes[FG_ROOT].total, svg_script);
	fprintf(out,
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"rgb(245,245,235)\"/>\n",
		SVG_W, c->height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\">Flame Graph: %s</text>\n", SVG_W / 2,
		flamegraph_weight_name(c->fg->weight));
	fprintf(out, "<text id=\"subtitle\" x=\"%d\" y=\"44\">", SVG_W / 2);
	svg_text(out, title, SIZE_MAX);
	fprintf(out, "</text>\n");
	fprintf(out,
		"<text id=\"reset\" x=\"%d\" y=\"24\" style=\"display:none\">Reset Zoom</text>\n",
		SVG_XPAD);
	fprintf(out, "<text id=\"search\" x=\"%d\" y=\"24\">Search</text>\n", SVG_W - SVG_XPAD);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", SVG_XPAD, c->height - 12);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\"> </text>\n", SVG_W - SVG_XPAD,
		c->height - 12);
}

int flamegraph__write_svg(struct flamegraph *fg, const struct trace_reader *r, FILE *out,
			  const char *title)
{
	struct svg_ctx c = {.fg = fg, .r = r, .out = out};
	int err;

	err = fg_sort(fg, r);
	if (err)
		return err;
	fg_totals(fg);
	if (fg->nodes[FG_ROOT].total)
		c.px_per_ns = (double)(SVG_W - 2 * SVG_XPAD) / fg->nodes[FG_ROOT].total;
	err = svg_walk(&c, false);
	if (err)
		return err;
	c.height = SVG_TOP + (int)(c.max_depth + 1) * SVG_FRAME_H + SVG_BOTTOM;
	if (!fg->nodes[FG_ROOT].total)
		c.px_per_ns = 0;
	svg_head(&c, title);
	fputs("<g id=\"frames\">\n", out);
	err = svg_walk(&c, true);
	fputs("</g>\n</svg>\n", out);
	return err;
}
