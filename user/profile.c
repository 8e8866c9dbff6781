// SPDX-License-Identifier: MIT
/*
 * cProfile semantics over model spans. Recursion is judged on the segments
 * that were open when a segment was entered: a function (or a caller ->
 * callee pair) is "already active" when one of them is it, as _lsprof's
 * recursionLevel says. The model counts them as it goes (model_span.active),
 * so that a deep stack costs nothing per segment.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "profile.h"
#include "u64map.h"

struct profile {
	uint16_t kind;
	bool grouped;
	struct profile_func *funcs;
	size_t nfuncs, funcs_cap;
	struct profile_edge *edges;
	size_t nedges, edges_cap;
	struct u64map func_idx; /* sym -> index in funcs */
	struct u64map edge_idx; /* caller << 32 | callee -> index in edges */
};

int profile__new(uint16_t kind, struct profile **out)
{
	struct profile *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->kind = kind;
	*out = p;
	return 0;
}

void profile__free(struct profile *p)
{
	if (!p)
		return;
	free(p->funcs);
	free(p->edges);
	u64map__free(&p->func_idx);
	u64map__free(&p->edge_idx);
	free(p);
}

void profile__set_grouped(struct profile *p)
{
	p->grouped = true;
}

uint16_t profile__kind(const struct profile *p)
{
	return p->kind;
}

static struct profile_func *profile_func_get(struct profile *p, uint32_t sym, uint32_t group)
{
	uint64_t *idx = u64map__get(&p->func_idx, (uint64_t)group << 32 | sym);

	if (idx)
		return &p->funcs[*idx];
	if (array_grow((void **)&p->funcs, &p->funcs_cap, p->nfuncs + 1, sizeof(*p->funcs)))
		return NULL;
	if (u64map__put(&p->func_idx, (uint64_t)group << 32 | sym, p->nfuncs))
		return NULL;
	p->funcs[p->nfuncs].sym = sym;
	p->funcs[p->nfuncs].group = group;
	return &p->funcs[p->nfuncs++];
}

static struct profile_edge *profile_edge_get(struct profile *p, uint32_t caller, uint32_t callee)
{
	uint64_t key = (uint64_t)caller << 32 | callee;
	uint64_t *idx = u64map__get(&p->edge_idx, key);
	struct profile_edge *e;

	if (idx)
		return &p->edges[*idx];
	/* the dynamo rule: a caller gets an entry even if it never closes */
	if (!profile_func_get(p, caller, 0))
		return NULL;
	if (array_grow((void **)&p->edges, &p->edges_cap, p->nedges + 1, sizeof(*p->edges)))
		return NULL;
	if (u64map__put(&p->edge_idx, key, p->nedges))
		return NULL;
	e = &p->edges[p->nedges++];
	e->caller = caller;
	e->callee = callee;
	return e;
}

int profile__add(struct profile *p, const struct model_span *s, uint64_t self_ns)
{
	return profile__add_group(p, s, 0, self_ns);
}

int profile__add_group(struct profile *p, const struct model_span *s, uint32_t group,
		       uint64_t self_ns)
{
	bool is_call = !(s->enter_flags & PTG_F_ENTER_RESUME);
	bool recursive = s->active & MODEL_ACTIVE_SYM;
	uint64_t dur = s->end > s->start ? s->end - s->start : 0;
	/* frames of other kinds are transparent: an op's caller is the
	 * nearest enclosing op, a Python function's the nearest function */
	uint32_t caller = s->caller;
	bool pair_active = caller && (s->active & MODEL_ACTIVE_PAIR);
	struct profile_func *f;
	struct profile_edge *e;

	f = profile_func_get(p, s->sym, group);
	if (!f)
		return -ENOMEM;
	f->ncalls += is_call;
	f->pcalls += is_call && !recursive;
	f->tt_ns += self_ns;
	f->ct_ns += recursive ? 0 : dur;
	if (!caller || p->grouped)
		return 0;

	e = profile_edge_get(p, caller, s->sym);
	if (!e)
		return -ENOMEM;
	e->ncalls += is_call;
	e->pcalls += is_call && !pair_active;
	e->tt_ns += self_ns;
	e->ct_ns += pair_active ? 0 : dur;
	return 0;
}

const struct profile_func *profile__funcs(const struct profile *p, size_t *n)
{
	*n = p->nfuncs;
	return p->funcs;
}

const struct profile_edge *profile__edges(const struct profile *p, size_t *n)
{
	*n = p->nedges;
	return p->edges;
}

long profile__find(const struct profile *p, uint32_t sym)
{
	uint64_t *idx = u64map__get(&p->func_idx, sym);

	return idx ? (long)*idx : -ENOENT;
}

void profile__totals(const struct profile *p, uint64_t *ncalls, uint64_t *pcalls, uint64_t *tt_ns)
{
	*ncalls = *pcalls = *tt_ns = 0;
	for (size_t i = 0; i < p->nfuncs; i++) {
		*ncalls += p->funcs[i].ncalls;
		*pcalls += p->funcs[i].pcalls;
		*tt_ns += p->funcs[i].tt_ns;
	}
}

/* Self time of spans of other kinds, waiting to be folded into the frame of
 * the profiled kind at that stack index when it closes. */
struct fold_stack {
	uint64_t *pending;
	unsigned int cap;
};

struct collector {
	const struct profile_opts *o;
	struct profile_run *run;
	struct fold_stack *folds; /* parallel to run->threads */
	size_t threads_cap, folds_cap;
	struct u64map thread_idx; /* thread_key() -> index */
	struct u64map stack_idx;  /* hash of a group's frames -> group id */
	size_t stacks_cap;
	int err;
};

static uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return u64map_key((uint64_t)pid << 32 | tid);
}

static struct profile_thread *collector_thread(struct collector *c, uint32_t pid, uint32_t tid,
					       struct fold_stack **fold)
{
	struct profile_run *run = c->run;
	uint64_t key = thread_key(pid, tid);
	uint64_t *idx = u64map__get(&c->thread_idx, key);
	struct profile_thread *t;

	if (idx) {
		*fold = &c->folds[*idx];
		return &run->threads[*idx];
	}
	if (array_grow((void **)&run->threads, &c->threads_cap, run->nthreads + 1,
		       sizeof(*run->threads)) ||
	    array_grow((void **)&c->folds, &c->folds_cap, run->nthreads + 1, sizeof(*c->folds)) ||
	    u64map__put(&c->thread_idx, key, run->nthreads))
		return NULL;
	t = &run->threads[run->nthreads];
	t->pid = pid;
	t->tid = tid;
	if (c->o->per_thread && profile__new(c->o->kind, &t->prof))
		return NULL;
	if (t->prof && c->o->group)
		profile__set_grouped(t->prof);
	*fold = &c->folds[run->nthreads++];
	return t;
}

static int fold_stack_reserve(struct fold_stack *f, unsigned int depth)
{
	unsigned int cap = f->cap ? f->cap : 64;
	uint64_t *n;

	if (depth < f->cap)
		return 0;
	while (cap <= depth)
		cap *= 2;
	n = realloc(f->pending, cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + f->cap, 0, (cap - f->cap) * sizeof(*n));
	f->pending = n;
	f->cap = cap;
	return 0;
}

/* Id of the innermost stack_n Python frames of stack, the same for the same frames. */
static uint32_t stack_group(struct collector *c, const struct model_frame *stack,
			    unsigned int depth)
{
	struct profile_run *run = c->run;
	unsigned int n = run->stack_n, k = 0;
	uint32_t frames[64] = {};
	uint64_t h, *id;

	/* from Python frame to Python frame: the ops between them cost nothing */
	for (uint32_t i = model_innermost(stack, depth, MODEL_PY); i && k < n;
	     i = stack[i - 1].up[MODEL_PY])
		frames[k++] = stack[i - 1].sym;
	h = u64map_hash(U64MAP_HASH_SEED, frames, n * sizeof(*frames));
	/* open addressing on the hash: a colliding key moves on to h + 1 */
	for (h = u64map_key(h); (id = u64map__get(&c->stack_idx, h)); h = u64map_key(h + 1)) {
		if (!memcmp(&run->stacks[(*id - 1) * n], frames, n * sizeof(*frames)))
			return (uint32_t)*id;
	}
	if (array_grow((void **)&run->stacks, &c->stacks_cap, (run->nstacks + 1) * n,
		       sizeof(*run->stacks)) ||
	    u64map__put(&c->stack_idx, h, run->nstacks + 1))
		return 0;
	memcpy(&run->stacks[run->nstacks * n], frames, n * sizeof(*frames));
	return (uint32_t)++run->nstacks;
}

static int collector_span(struct collector *c, const struct model_span *s,
			  const struct model_frame *stack, unsigned int depth)
{
	uint16_t kind = c->o->kind;
	struct profile_thread *t;
	struct fold_stack *f;
	uint32_t group = 0;
	uint64_t self_ns;
	int err;

	t = collector_thread(c, s->pid, s->tid, &f);
	if (!t || fold_stack_reserve(f, depth))
		return -ENOMEM;
	if (s->kind != kind) {
		/* time in an op under a function (or in Python under an op) is
		 * self time of the nearest enclosing span of the profiled kind */
		if (s->up[model_kind_of(kind)])
			f->pending[s->up[model_kind_of(kind)] - 1] += s->self_ns;
		return 0;
	}
	self_ns = s->self_ns + f->pending[depth];
	f->pending[depth] = 0;
	if (c->o->group == PROFILE_GROUP_MODULE)
		group = (uint32_t)s->aux0;
	else if (c->o->group == PROFILE_GROUP_STACK && !(group = stack_group(c, stack, depth)))
		return -ENOMEM;
	err = profile__add_group(c->run->all, s, group, self_ns);
	if (!err && t->prof)
		err = profile__add_group(t->prof, s, group, self_ns);
	return err;
}

static void collector_on_span(void *ctx, const struct model_span *s,
			      const struct model_frame *stack, unsigned int depth)
{
	struct collector *c = ctx;

	if (c->err || (c->o->by_tid && s->tid != c->o->tid))
		return;
	c->err = collector_span(c, s, stack, depth);
}

static void collector_on_record(void *ctx, const struct ptg_record *rec,
				const struct model_frame *stack, unsigned int depth)
{
	struct collector *c = ctx;
	struct profile_thread *t;
	struct fold_stack *f;

	if (c->err || rec->kind != PTG_REC_THREAD || (c->o->by_tid && rec->tid != c->o->tid))
		return;
	t = collector_thread(c, rec->pid, rec->tid, &f);
	if (!t) {
		c->err = -ENOMEM;
		return;
	}
	t->name_sym = rec->sym;
}

void profile_run__free(struct profile_run *run)
{
	if (!run)
		return;
	for (size_t i = 0; i < run->nthreads; i++)
		profile__free(run->threads[i].prof);
	free(run->threads);
	profile__free(run->all);
	free(run->stacks);
	free(run);
}

int profile_run__collect(struct trace_reader *r, const struct profile_opts *o,
			 struct profile_run **out)
{
	struct model_visitor v = {.span = collector_on_span, .record = collector_on_record};
	struct collector c = {.o = o};
	int err;

	c.run = calloc(1, sizeof(*c.run));
	if (!c.run) {
		fprintf(stderr, "ptrace-gpu: out of memory\n");
		return -ENOMEM;
	}
	err = profile__new(o->kind, &c.run->all);
	if (err)
		goto cleanup;
	if (o->group)
		profile__set_grouped(c.run->all);
	/* key_averages(group_by_stack_n) allows no more than we keep per group */
	c.run->stack_n = o->group == PROFILE_GROUP_STACK ? (o->stack_n < 64 ? o->stack_n : 64) : 0;
	err = model__walk(r, &v, &c, &c.run->stats);
	if (!err)
		err = c.err;
cleanup:
	if (err == -ENOMEM)
		fprintf(stderr, "ptrace-gpu: out of memory\n");
	for (size_t i = 0; c.folds && i < c.run->nthreads; i++)
		free(c.folds[i].pending);
	free(c.folds);
	u64map__free(&c.thread_idx);
	u64map__free(&c.stack_idx);
	if (err) {
		profile_run__free(c.run);
		return err;
	}
	*out = c.run;
	return 0;
}
