// SPDX-License-Identifier: MIT
/*
 * Pass 2 of the idle analysis: each CPU span, walked by the model, looked
 * up in pass 1's GPU timelines (queue depth, idle time, falling phases) by
 * binary search; the candidates ranked as torch.profiler's
 * BasicEvaluation ranks optimizable events.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/idle_ctx.h"
#include "base/array.h"
#include "base/log.h"
#include "model/model.h"

/* Busy time of all devices before t. */
static uint64_t busy_until(const struct idle_report *rep, uint64_t t)
{
	size_t lo = 0, hi = rep->nbusy, k;
	uint64_t s, e;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (rep->busy[2 * mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	k = lo - 1;
	s = rep->busy[2 * k];
	e = rep->busy[2 * k + 1];
	return rep->busy_before[k] + (t < e ? t : e) - s;
}

uint64_t idle_report__idle_overlap(const struct idle_report *rep, uint64_t start, uint64_t end)
{
	uint64_t a = start > rep->gpu_first ? start : rep->gpu_first;
	uint64_t b = end < rep->gpu_last ? end : rep->gpu_last;

	if (!rep->nbusy || a >= b)
		return 0;
	return (b - a) - (busy_until(rep, b) - busy_until(rep, a));
}

static size_t acc_hash(uint32_t pid, uint32_t tid, uint32_t level)
{
	uint64_t k =
	    ((uint64_t)pid << 32 | tid) * 0x9e3779b97f4a7c15ull + level * 0xff51afd7ed558ccdull;

	return k ^ k >> 29;
}

static struct acc_slot *acc_slot(struct acc_map *m, uint32_t pid, uint32_t tid, uint32_t level)
{
	size_t i;

	for (i = acc_hash(pid, tid, level) & m->mask; m->slots[i].used; i = (i + 1) & m->mask) {
		struct acc_slot *s = &m->slots[i];

		if (s->pid == pid && s->tid == tid && s->level == level)
			return s;
	}
	return &m->slots[i];
}

static int acc_grow(struct acc_map *m)
{
	struct acc_map nm = {.mask = m->slots ? 2 * m->mask + 1 : 255};
	size_t i;

	nm.slots = calloc(nm.mask + 1, sizeof(*nm.slots));
	if (!nm.slots)
		return -ENOMEM;
	for (i = 0; m->slots && i <= m->mask; i++) {
		const struct acc_slot *s = &m->slots[i];

		if (s->used)
			*acc_slot(&nm, s->pid, s->tid, s->level) = *s;
	}
	nm.n = m->n;
	free(m->slots);
	*m = nm;
	return 0;
}

static int acc_add(struct acc_map *m, uint32_t pid, uint32_t tid, uint32_t level, uint64_t ns)
{
	struct acc_slot *s;

	if ((m->n + 1) * 2 > m->mask + 1 && acc_grow(m))
		return -ENOMEM;
	s = acc_slot(m, pid, tid, level);
	if (!s->used) {
		*s = (struct acc_slot){pid, tid, level, 1, 0};
		m->n++;
	}
	s->ns += ns;
	return 0;
}

static uint64_t acc_take(struct acc_map *m, uint32_t pid, uint32_t tid, uint32_t level)
{
	struct acc_slot *s;
	uint64_t ns;

	if (!m->slots)
		return 0;
	s = acc_slot(m, pid, tid, level);
	ns = s->used ? s->ns : 0;
	if (s->used)
		s->ns = 0;
	return ns;
}

static uint32_t innermost_py(const struct model_frame *stack, unsigned int depth)
{
	uint32_t i = model_innermost(stack, depth, MODEL_PY);

	return i ? stack[i - 1].sym : 0;
}

static void cpu_event(struct idle_ctx *c, const struct idle_event *ev)
{
	struct idle_name *nm;
	struct cand *k;

	c->rep->cpu_events++;
	if (ev->sym && ev->sym <= c->nsyms) {
		nm = &c->names[ev->sym];
		nm->sym = ev->sym;
		nm->kind = ev->kind;
		nm->count++;
		nm->self_ns += ev->self_ns;
		if (!ev->nested) {
			nm->total_ns += ev->dur;
			nm->idle_ns += ev->idle_ns;
		}
		nm->qd_sum += ev->queue_depth;
	}
	if (!idle_in_decrease(c, ev->start, ev->start + ev->dur))
		return;
	if (array_grow((void **)&c->cands, &c->candcap, c->ncands + 1, sizeof(*k))) {
		c->err = -ENOMEM;
		return;
	}
	k = &c->cands[c->ncands++];
	*k = (struct cand){ev->start, ev->dur,	 ev->self_ns,	  ev->idle_ns,
			   ev->sym,   ev->pysym, ev->queue_depth, ev->kind};
}

static void cpu_event_at(struct idle_ctx *c, struct idle_event *ev)
{
	ev->idle_ns = idle_report__idle_overlap(c->rep, ev->start, ev->start + ev->dur);
	ev->queue_depth = idle_report__queue_depth(c->rep, ev->start);
	cpu_event(c, ev);
}

static bool on_stack(const struct model_frame *stack, unsigned int depth, uint32_t sym,
		     uint16_t kind)
{
	while (depth--) {
		if (stack[depth].sym == sym && stack[depth].kind == kind)
			return true;
	}
	return false;
}

static void p2_span(void *ctx, const struct model_span *s, const struct model_frame *stack,
		    unsigned int depth)
{
	struct idle_ctx *c = ctx;
	uint64_t calls = acc_take(&c->acc, s->pid, s->tid, depth);
	struct idle_event ev = {
	    .start = s->start,
	    .dur = s->end - s->start,
	    .self_ns = s->self_ns > calls ? s->self_ns - calls : 0,
	    .sym = s->sym,
	    .kind = s->kind,
	    .nested = on_stack(stack, depth, s->sym, s->kind),
	};

	/* BasicEvaluation's source location starts at the event itself */
	ev.pysym = s->kind == PTG_REC_PY_ENTER ? s->sym : innermost_py(stack, depth);
	cpu_event_at(c, &ev);
}

static void p2_record(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		      unsigned int depth)
{
	struct idle_ctx *c = ctx;
	struct idle_event ev = {
	    .start = rec->ts,
	    .dur = rec->dur,
	    .self_ns = rec->dur,
	    .sym = rec->sym,
	    .kind = PTG_REC_CUDA_CALL,
	};

	if (rec->kind != PTG_REC_CUDA_CALL)
		return;
	/* a CUDA call is a child of the op around it, as in the profiler's event tree */
	if (depth && acc_add(&c->acc, rec->pid, rec->tid, depth - 1, rec->dur))
		c->err = -ENOMEM;
	ev.pysym = innermost_py(stack, depth);
	cpu_event_at(c, &ev);
}

int idle_pass2(struct idle_ctx *c)
{
	const struct model_visitor v = {.span = p2_span, .record = p2_record};
	struct model_stats st;
	int err;

	c->names = calloc(c->nsyms + 1, sizeof(*c->names));
	if (!c->names)
		return -ENOMEM;
	err = trace_reader__rewind(c->r);
	if (!err)
		err = model__walk(c->r, &v, c, &st);
	if (err) {
		/* out of memory is reported once, by the caller */
		if (err != -ENOMEM)
			pr_err("idle: %s", trace_reader__error(c->r));
		return err;
	}
	c->rep->first_ts = st.first_ts == UINT64_MAX ? 0 : st.first_ts;
	c->rep->last_ts = st.last_ts;
	return c->err;
}

static void zstats(const struct cand *k, size_t n, bool self, double *mean, double *sd)
{
	double sum = 0, sq = 0, x;
	size_t i;

	for (i = 0; i < n; i++) {
		x = self ? (double)k[i].self_ns : k[i].dur ? (double)k[i].idle_ns / k[i].dur : 0;
		sum += x;
	}
	*mean = n ? sum / n : 0;
	for (i = 0; i < n; i++) {
		x = self ? (double)k[i].self_ns : k[i].dur ? (double)k[i].idle_ns / k[i].dur : 0;
		sq += (x - *mean) * (x - *mean);
	}
	/* torch.std is the sample deviation */
	*sd = n > 1 ? sqrt(sq / (n - 1)) : 0;
}

static int cmp_event(const void *pa, const void *pb)
{
	const struct idle_event *a = pa, *b = pb;

	if (a->score != b->score)
		return a->score < b->score ? 1 : -1;
	return cmp_u64(a->start, b->start);
}

/* BasicEvaluation.rank_events, step 2: z(idle fraction) + 0.6 z(self time). */
int idle_rank(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	double mi, si, ms, ss, frac;
	struct idle_event *ev;
	size_t i;

	rep->candidates = c->ncands;
	if (!c->ncands)
		return 0;
	ev = malloc(c->ncands * sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	zstats(c->cands, c->ncands, false, &mi, &si);
	zstats(c->cands, c->ncands, true, &ms, &ss);
	for (i = 0; i < c->ncands; i++) {
		const struct cand *k = &c->cands[i];

		ev[i] = (struct idle_event){k->start, k->dur, k->self_ns, k->idle_ns, k->sym,
					    k->pysym, k->qd,  k->kind,	  0};
		frac = k->dur ? (double)k->idle_ns / k->dur : 0;
		/* a constant column carries no information: its z-score is 0, not NaN */
		ev[i].score = (si > 0 ? (frac - mi) / si : 0) +
			      0.6 * (ss > 0 ? ((double)k->self_ns - ms) / ss : 0);
	}
	array_sort(ev, c->ncands, sizeof(*ev), cmp_event);
	rep->nranked = c->ncands < c->o->top_n ? c->ncands : c->o->top_n;
	rep->ranked = ev;
	return 0;
}

static int cmp_name(const void *pa, const void *pb)
{
	const struct idle_name *a = pa, *b = pb;

	return cmp_u64(b->self_ns, a->self_ns) ?: cmp_u64(a->sym, b->sym);
}

void idle_top_names(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	size_t i, n = 0;

	for (i = 1; i <= c->nsyms; i++) {
		if (c->names[i].count)
			c->names[n++] = c->names[i];
	}
	array_sort(c->names, n, sizeof(*c->names), cmp_name);
	rep->nnames_total = n;
	rep->nnames = n < c->o->top_n ? n : c->o->top_n;
	rep->names = c->names;
	c->names = NULL;
}
