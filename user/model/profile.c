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

#include "base/array.h"
#include "base/log.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "model/profile.h"

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

/* An op, CUDA call or annotation of one thread, for profile_opts.host_calls. */
struct host_ival {
	uint64_t start;
	uint64_t end;
	uint32_t sym;
	uint32_t group;
	uint16_t flags; /* enter flags */
	uint16_t rank;	/* at equal times: annotation, then op, then CUDA call outermost */
	uint32_t depth; /* the model's stack depth: orders ops of equal times */
	size_t seq;	/* order of arrival, to keep sorting stable */
};

struct host_ivals {
	struct host_ival *v;
	size_t n, cap;
};

/* What the collector keeps of a thread besides its profile_thread. */
struct coll_thread {
	size_t idx; /* in run->threads */
	struct fold_stack fold;
	struct host_ivals host; /* with o->host_calls */
};

struct collector {
	const struct profile_opts *o;
	const struct trace_reader *r;
	struct profile_run *run;
	struct threads threads; /* of struct coll_thread, entry i for run->threads[i] */
	size_t threads_cap;
	struct u64map stack_idx; /* hash of a group's frames -> group id */
	size_t stacks_cap;
	int err;
};

static struct profile_thread *collector_thread(struct collector *c, uint32_t pid, uint32_t tid,
					       struct fold_stack **fold)
{
	struct profile_run *run = c->run;
	struct coll_thread *ct = threads__find(&c->threads, pid, tid);
	struct profile_thread *t;

	if (ct) {
		*fold = &ct->fold;
		return &run->threads[ct->idx];
	}
	if (array_grow((void **)&run->threads, &c->threads_cap, run->nthreads + 1,
		       sizeof(*run->threads)) ||
	    !(ct = threads__get(&c->threads, pid, tid, NULL)))
		return NULL;
	ct->idx = run->nthreads;
	t = &run->threads[run->nthreads];
	t->pid = pid;
	t->tid = tid;
	if (c->o->per_thread && profile__new(c->o->kind, &t->prof))
		return NULL;
	if (t->prof && c->o->group)
		profile__set_grouped(t->prof);
	*fold = &ct->fold;
	run->nthreads++;
	return t;
}

static void coll_thread_fini(void *p)
{
	struct coll_thread *ct = p;

	free(ct->fold.pending);
	free(ct->host.v);
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

static uint32_t collector_group(struct collector *c, int64_t aux0, const struct model_frame *stack,
				unsigned int depth, int *err)
{
	uint32_t group = 0;

	if (c->o->group == PROFILE_GROUP_MODULE)
		group = (uint32_t)aux0;
	else if (c->o->group == PROFILE_GROUP_STACK && !(group = stack_group(c, stack, depth)))
		*err = -ENOMEM;
	return group;
}

static int host_add(struct collector *c, size_t thread, const struct host_ival *in)
{
	struct host_ivals *h = &((struct coll_thread *)threads__at(&c->threads, thread))->host;
	struct host_ival *iv;

	if (array_grow((void **)&h->v, &h->cap, h->n + 1, sizeof(*h->v)))
		return -ENOMEM;
	iv = &h->v[h->n];
	*iv = *in;
	if (iv->end < iv->start)
		iv->end = iv->start;
	iv->seq = h->n++;
	return 0;
}

/*
 * Start, then longer first (parents before the children that start with
 * them); of equal intervals an annotation holds an op, an op a CUDA call, and
 * of two ops the model's own nesting decides.
 */
static int cmp_host_ival(const void *pa, const void *pb)
{
	const struct host_ival *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end > b->end ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

struct host_replay {
	struct model_frame *frames;
	uint64_t *ends;
	uint32_t *groups;
	unsigned int depth;
};

/*
 * What the model sets on a span of the trace's own nesting, for an interval
 * of a host replay: its caller (the nearest enclosing interval of the
 * profile's kind) and whether its symbol, or the pair of caller and symbol,
 * is already active below it. A scan of the replay's stack: host calls nest
 * a few levels deep, not the depth of a Python recursion.
 */
static void host_relations(const struct model_frame *stack, unsigned int depth, uint16_t kind,
			   struct model_span *s)
{
	uint32_t prev = 0;
	unsigned int i;

	s->caller = 0;
	s->active = 0;
	for (i = depth; i-- > 0;) {
		if (stack[i].kind == kind) {
			s->caller = stack[i].sym;
			break;
		}
	}
	for (i = 0; i < depth; i++) {
		if (stack[i].kind != kind)
			continue;
		if (stack[i].sym == s->sym) {
			s->active |= MODEL_ACTIVE_SYM;
			if (s->caller && prev == s->caller)
				s->active |= MODEL_ACTIVE_PAIR;
		}
		prev = stack[i].sym;
	}
}

/* Closes the innermost interval of the replay into the thread's profiles. */
static int host_pop(struct collector *c, struct profile_thread *t, struct host_replay *h)
{
	const struct model_frame *f = &h->frames[--h->depth];
	uint64_t dur = h->ends[h->depth] - f->start;
	struct model_span s = {
	    .pid = t->pid,
	    .tid = t->tid,
	    .sym = f->sym,
	    .kind = f->kind,
	    .enter_flags = f->flags,
	    .start = f->start,
	    .end = h->ends[h->depth],
	    .self_ns = dur > f->child_ns ? dur - f->child_ns : 0,
	};
	int err;

	if (h->depth)
		h->frames[h->depth - 1].child_ns += dur;
	host_relations(h->frames, h->depth, c->run->all->kind, &s);
	err = profile__add_group(c->run->all, &s, h->groups[h->depth], s.self_ns);
	if (!err && t->prof)
		err = profile__add_group(t->prof, &s, h->groups[h->depth], s.self_ns);
	return err;
}

/*
 * Nests one thread's intervals by time and adds each to the profiles. An
 * interval that overhangs its parent is cut at the parent's end, as import
 * cuts Kineto events.
 */
static int host_replay_thread(struct collector *c, struct profile_thread *t, struct host_ivals *hv)
{
	struct host_replay h = {};
	int err = 0;

	array_sort(hv->v, hv->n, sizeof(*hv->v), cmp_host_ival);
	h.frames = calloc(hv->n + 1, sizeof(*h.frames));
	h.ends = calloc(hv->n + 1, sizeof(*h.ends));
	h.groups = calloc(hv->n + 1, sizeof(*h.groups));
	if (!h.frames || !h.ends || !h.groups)
		err = -ENOMEM;
	for (size_t i = 0; !err && i <= hv->n; i++) {
		const struct host_ival *iv = i < hv->n ? &hv->v[i] : NULL;

		while (!err && h.depth && (!iv || h.ends[h.depth - 1] <= iv->start))
			err = host_pop(c, t, &h);
		if (!iv || err)
			break;
		h.frames[h.depth] = (struct model_frame){
		    .sym = iv->sym,
		    .kind = PTG_REC_OP_ENTER,
		    .flags = iv->flags,
		    .start = iv->start,
		};
		h.ends[h.depth] =
		    h.depth && iv->end > h.ends[h.depth - 1] ? h.ends[h.depth - 1] : iv->end;
		h.groups[h.depth++] = iv->group;
	}
	free(h.frames);
	free(h.ends);
	free(h.groups);
	return err;
}

static int host_replay(struct collector *c)
{
	int err = 0;

	for (size_t i = 0; !err && i < c->run->nthreads; i++) {
		struct coll_thread *ct = threads__at(&c->threads, i);

		err = host_replay_thread(c, &c->run->threads[i], &ct->host);
	}
	return err;
}

/* CPU-side annotations; gpu_user_annotation spans are GPU time, not calls. */
static bool host_span(const struct collector *c, const struct ptg_record *rec)
{
	const struct ptg_sym *cat = trace_reader__sym(c->r, (uint32_t)rec->aux[0]);

	return !cat || strcmp(cat->name, "gpu_user_annotation");
}

static void collector_host_record(struct collector *c, const struct ptg_record *rec,
				  const struct model_frame *stack, unsigned int depth)
{
	struct host_ival iv = {
	    .start = rec->ts,
	    .end = rec->ts + rec->dur,
	    .sym = rec->sym,
	    .rank = rec->kind == PTG_REC_SPAN ? 0 : 2,
	    .depth = depth,
	};
	struct profile_thread *t;
	struct fold_stack *f;
	int err = 0;

	if (rec->kind != PTG_REC_CUDA_CALL && (rec->kind != PTG_REC_SPAN || !host_span(c, rec)))
		return;
	t = collector_thread(c, rec->pid, rec->tid, &f);
	if (!t) {
		c->err = -ENOMEM;
		return;
	}
	iv.group = collector_group(c, 0, stack, depth, &err);
	if (!err)
		err = host_add(c, (size_t)(t - c->run->threads), &iv);
	c->err = err;
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
	if (c->o->host_calls) {
		struct host_ival iv = {
		    .start = s->start,
		    .end = s->end,
		    .sym = s->sym,
		    .flags = s->enter_flags,
		    .rank = 1,
		    .depth = depth,
		};

		if (s->kind != PTG_REC_OP_ENTER)
			return 0;
		err = 0;
		iv.group = collector_group(c, s->aux0, stack, depth, &err);
		return err ?: host_add(c, (size_t)(t - c->run->threads), &iv);
	}
	if (s->kind != kind) {
		/* time in an op under a function (or in Python under an op) is
		 * self time of the nearest enclosing span of the profiled kind */
		if (s->up[model_kind_of(kind)])
			f->pending[s->up[model_kind_of(kind)] - 1] += s->self_ns;
		return 0;
	}
	self_ns = s->self_ns + f->pending[depth];
	f->pending[depth] = 0;
	err = 0;
	group = collector_group(c, s->aux0, stack, depth, &err);
	if (err)
		return err;
	err = profile__add_group(c->run->all, s, group, self_ns);
	if (!err && t->prof)
		err = profile__add_group(t->prof, s, group, self_ns);
	return err;
}

static void collector_on_span(void *ctx, const struct model_span *s,
			      const struct model_frame *stack, unsigned int depth)
{
	struct collector *c = ctx;

	if (c->err || (c->o->by_tid && s->tid != c->o->tid) ||
	    (c->o->by_pid && s->pid != c->o->pid))
		return;
	c->err = collector_span(c, s, stack, depth);
}

static void collector_on_record(void *ctx, const struct ptg_record *rec,
				const struct model_frame *stack, unsigned int depth)
{
	struct collector *c = ctx;
	struct profile_thread *t;
	struct fold_stack *f;

	if (c->err || (c->o->by_tid && rec->tid != c->o->tid) ||
	    (c->o->by_pid && rec->pid != c->o->pid))
		return;
	if (c->o->host_calls && rec->kind != PTG_REC_THREAD) {
		collector_host_record(c, rec, stack, depth);
		return;
	}
	if (rec->kind != PTG_REC_THREAD)
		return;
	t = collector_thread(c, rec->pid, rec->tid, &f);
	if (!t) {
		c->err = -ENOMEM;
		return;
	}
	t->name_sym = rec->sym;
	t->ns_pid = (uint32_t)rec->aux[2];
	t->ns_tid = (uint32_t)rec->aux[3];
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
	struct collector c = {.o = o, .r = r, .threads = THREADS_INIT(struct coll_thread)};
	int err;

	c.run = calloc(1, sizeof(*c.run));
	if (!c.run) {
		pr_err("out of memory");
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
	if (!err && o->host_calls)
		err = host_replay(&c);
cleanup:
	if (err == -ENOMEM)
		pr_err("out of memory");
	threads__free(&c.threads, coll_thread_fini);
	u64map__free(&c.stack_idx);
	if (err) {
		profile_run__free(c.run);
		return err;
	}
	*out = c.run;
	return 0;
}
