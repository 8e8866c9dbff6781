// SPDX-License-Identifier: MIT
/*
 * The streaming span walker of model.h. Each thread (pid, tid) owns one stack
 * shared by Python frames and dispatcher ops, since ops run inside Python
 * frames and Python (custom ops, hooks) runs inside ops.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "model/model.h"

struct thread_stack {
	uint32_t pid;
	uint32_t tid;
	struct model_frame *frames;
	unsigned int depth;
	unsigned int cap;
	struct u64map open_syms;  /* sym_key() -> frames of it open */
	struct u64map open_pairs; /* pair_key() -> frames of it open */
};

/* Open-addressing map (pid, tid) -> stack; a slot with cap == 0 is free. */
struct thread_map {
	struct thread_stack *slots;
	size_t mask;
	size_t n;
	uint64_t next_id;
};

static size_t thread_hash(uint32_t pid, uint32_t tid)
{
	uint64_t k = ((uint64_t)pid << 32 | tid) * 0x9e3779b97f4a7c15ull;

	return k ^ k >> 32;
}

static bool slot_used(const struct thread_stack *t)
{
	return t->cap != 0;
}

static struct thread_stack *thread_find(const struct thread_map *m, uint32_t pid, uint32_t tid)
{
	size_t i;

	if (!m->slots)
		return NULL;
	for (i = thread_hash(pid, tid) & m->mask; slot_used(&m->slots[i]); i = (i + 1) & m->mask) {
		if (m->slots[i].pid == pid && m->slots[i].tid == tid)
			return &m->slots[i];
	}
	return NULL;
}

static int map_grow(struct thread_map *m)
{
	size_t cap = m->slots ? (m->mask + 1) * 2 : 64, i, j;
	struct thread_stack *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (i = 0; m->slots && i <= m->mask; i++) {
		if (!slot_used(&m->slots[i]))
			continue;
		j = thread_hash(m->slots[i].pid, m->slots[i].tid) & (cap - 1);
		while (slot_used(&slots[j]))
			j = (j + 1) & (cap - 1);
		slots[j] = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->mask = cap - 1;
	return 0;
}

/* Finds or creates the stack of (pid, tid); NULL when out of memory. */
static struct thread_stack *thread_get(struct thread_map *m, uint32_t pid, uint32_t tid)
{
	struct thread_stack *t = thread_find(m, pid, tid);
	size_t i;

	if (t)
		return t;
	if ((m->n + 1) * 2 > m->mask + 1 && map_grow(m))
		return NULL;
	for (i = thread_hash(pid, tid) & m->mask; slot_used(&m->slots[i]); i = (i + 1) & m->mask)
		;
	t = &m->slots[i];
	t->frames = malloc(16 * sizeof(*t->frames));
	if (!t->frames)
		return NULL;
	t->cap = 16;
	t->pid = pid;
	t->tid = tid;
	m->n++;
	return t;
}

static void map_free(struct thread_map *m)
{
	size_t i;

	for (i = 0; m->slots && i <= m->mask; i++) {
		while (m->slots[i].depth)
			free(m->slots[i].frames[--m->slots[i].depth].args);
		free(m->slots[i].frames);
		u64map__free(&m->slots[i].open_syms);
		u64map__free(&m->slots[i].open_pairs);
	}
	free(m->slots);
}

static uint64_t sym_key(uint16_t kind, uint32_t sym)
{
	return u64map_key((uint64_t)kind << 32 | sym);
}

/* caller's top bit goes: symbol ids are below 2^31 in any trace that fits a disk */
static uint64_t pair_key(uint32_t caller, uint32_t sym)
{
	return u64map_key((uint64_t)caller << 32 | sym);
}

/* Adds delta to the count of key; returns the count before, or -ENOMEM. */
static int64_t open_count(struct u64map *m, uint64_t key, int delta)
{
	uint64_t *v = u64map__get(m, key), old = v ? *v : 0;

	if (v)
		*v += delta;
	else if (delta > 0 && u64map__put(m, key, delta))
		return -ENOMEM;
	return (int64_t)old;
}

/* What consumers would otherwise scan the stack for, from the frames below f. */
static int frame_link(struct thread_stack *t, struct model_frame *f)
{
	enum model_kind own = model_kind_of(f->kind);
	int64_t n;

	for (int k = 0; k < MODEL_NR_KINDS; k++)
		f->up[k] = model_innermost(t->frames, t->depth, (enum model_kind)k);
	f->caller = f->up[own] ? t->frames[f->up[own] - 1].sym : 0;
	f->active = 0;
	n = open_count(&t->open_syms, sym_key(f->kind, f->sym), 1);
	if (n < 0)
		return -ENOMEM;
	f->active |= n ? MODEL_ACTIVE_SYM : 0;
	if (!f->caller)
		return 0;
	n = open_count(&t->open_pairs, pair_key(f->caller, f->sym), 1);
	if (n < 0)
		return -ENOMEM;
	f->active |= n ? MODEL_ACTIVE_PAIR : 0;
	return 0;
}

static void frame_unlink(struct thread_stack *t, const struct model_frame *f)
{
	open_count(&t->open_syms, sym_key(f->kind, f->sym), -1);
	if (f->caller)
		open_count(&t->open_pairs, pair_key(f->caller, f->sym), -1);
}

static int frame_push(struct thread_stack *t, const struct ptg_record *rec, uint64_t id,
		      const char *args)
{
	struct model_frame *f;

	if (t->depth == t->cap) {
		f = realloc(t->frames, 2 * t->cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		t->frames = f;
		t->cap *= 2;
	}
	f = &t->frames[t->depth];
	f->sym = rec->sym;
	f->kind = rec->kind;
	f->flags = rec->flags;
	f->start = rec->ts;
	f->child_ns = 0;
	f->ext = rec->ext;
	f->aux0 = rec->aux[0];
	f->aux1 = rec->aux[1];
	f->id = id;
	/* the reader's blob lasts only until its next record */
	f->args = args ? strdup(args) : NULL;
	if ((args && !f->args) || frame_link(t, f)) {
		free(f->args);
		return -ENOMEM;
	}
	t->depth++;
	return 0;
}

/* Closes the innermost open span of t at rec and reports it. */
static void frame_pop(struct thread_stack *t, const struct ptg_record *rec,
		      const struct model_visitor *v, void *ctx)
{
	const struct model_frame *f = &t->frames[--t->depth];
	struct model_span s = {};
	uint64_t dur;

	/* events of different CPUs can disagree by a few ns: clamp, never wrap */
	dur = rec->ts > f->start ? rec->ts - f->start : 0;
	s.pid = t->pid;
	s.tid = t->tid;
	s.sym = f->sym;
	s.kind = f->kind;
	s.enter_flags = f->flags;
	s.exit_flags = rec->flags;
	s.start = f->start;
	s.end = f->start + dur;
	s.self_ns = dur > f->child_ns ? dur - f->child_ns : 0;
	s.ext = f->ext;
	s.aux0 = f->aux0;
	s.aux1 = f->aux1;
	s.args = f->args;
	memcpy(s.up, f->up, sizeof(s.up));
	s.caller = f->caller;
	s.active = f->active;
	frame_unlink(t, f);
	if (t->depth)
		t->frames[t->depth - 1].child_ns += dur;
	if (v && v->span)
		v->span(ctx, &s, t->frames, t->depth);
	free(f->args);
}

static void stats_see(struct model_stats *st, const struct ptg_record *rec)
{
	uint64_t end = rec->ts + rec->dur;

	st->records++;
	if (rec->ts < st->first_ts)
		st->first_ts = rec->ts;
	if (end < rec->ts) /* a corrupt-looking dur must not wrap last_ts */
		end = rec->ts;
	if (end > st->last_ts)
		st->last_ts = end;
}

/* Handles one record; returns 0 or -ENOMEM. */
static int walk_one(struct thread_map *m, struct trace_reader *r, const struct ptg_record *rec,
		    const struct model_visitor *v, void *ctx, struct model_stats *st)
{
	unsigned int flags = v ? v->flags : 0;
	struct thread_stack *t;

	/*
	 * an imported event nothing models (a Trace span, an instant) is no part
	 * of the timeline, unless the consumer writes every record back
	 */
	if (rec->kind == PTG_REC_EVENT && !(flags & MODEL_WALK_EVENTS))
		return 0;
	stats_see(st, rec);
	switch (rec->kind) {
	case PTG_REC_PY_ENTER:
	case PTG_REC_OP_ENTER:
		t = thread_get(m, rec->pid, rec->tid);
		if (!t || frame_push(t, rec, ++m->next_id,
				     flags & MODEL_WALK_ARGS ? trace_reader__args(r, NULL) : NULL))
			return -ENOMEM;
		break;
	case PTG_REC_PY_EXIT:
	case PTG_REC_OP_EXIT:
		t = thread_find(m, rec->pid, rec->tid);
		if (!t || !t->depth) {
			st->unmatched_exits++;
			break;
		}
		frame_pop(t, rec, v, ctx);
		st->spans++;
		break;
	default:
		t = thread_find(m, rec->pid, rec->tid);
		if (v && v->record)
			v->record(ctx, rec, t ? t->frames : NULL, t ? t->depth : 0);
		break;
	}
	return 0;
}

/*
 * MODEL_WALK_CLOSE: what is still open ends with the trace, innermost first,
 * thread by thread in the map's order (which depends only on the trace).
 */
static void close_all(struct thread_map *m, const struct model_visitor *v, void *ctx,
		      struct model_stats *st)
{
	const struct ptg_record stop = {.ts = st->last_ts, .flags = PTG_F_EXIT_STOP};
	size_t i;

	for (i = 0; m->slots && i <= m->mask; i++) {
		while (slot_used(&m->slots[i]) && m->slots[i].depth) {
			frame_pop(&m->slots[i], &stop, v, ctx);
			st->spans++;
		}
	}
}

int model__walk(struct trace_reader *r, const struct model_visitor *v, void *ctx,
		struct model_stats *stats)
{
	struct model_stats st = {.first_ts = UINT64_MAX};
	struct thread_map m = {};
	struct ptg_record rec;
	int err;

	while ((err = trace_reader__next(r, &rec)) > 0) {
		/* -ENOMEM: the callers say so, once */
		err = walk_one(&m, r, &rec, v, ctx, &st);
		if (err)
			break;
	}
	if (!err && v && (v->flags & MODEL_WALK_CLOSE))
		close_all(&m, v, ctx, &st);
	/* threads: those that entered at least one Python frame or op */
	st.threads = m.n;
	if (stats)
		*stats = st;
	map_free(&m);
	return err;
}
