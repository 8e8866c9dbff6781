// SPDX-License-Identifier: MIT
/*
 * GPU idle analysis in two passes. Pass 1 keeps one 32-byte entry per GPU
 * op and one per correlated CUDA call, joins them by correlation id and
 * derives every GPU-side timeline (busy intervals, queue depth, breakdowns).
 * Pass 2 walks CPU spans with the model and looks each one up in those
 * timelines by binary search, keeping only the events that can be ranked.
 * The launch queue is idle_queue.c's, pass 2 idle_events.c's. Nothing here
 * prints a report: idle_text.c, idle_json.c and ranks_out.c render one.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/idle.h"
#include "analysis/idle_ctx.h"
#include "base/array.h"
#include "base/log.h"
#include "model/cudajoin.h"
#include "model/model.h"

void idle_opts__defaults(struct idle_opts *o)
{
	o->top_n = 10;
	o->kernel_wait_ns = 30000;
	o->max_queue_len = 1024;
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool is_seed_launch(const char *name)
{
	/* BasicEvaluation's runtime patterns, plus their driver twins that a recorder sees */
	static const char *const pats[] = {"cudaLaunchKernel", "__cudaLaunchKernel",
					   "cudaLaunchCooperativeKernel", "cuLaunchKernel",
					   "cuLaunchCooperativeKernel"};
	size_t i;

	for (i = 0; i < sizeof(pats) / sizeof(pats[0]); i++) {
		if (starts_with(name, pats[i]))
			return true;
	}
	return false;
}

static uint8_t sym_flags(struct idle_ctx *c, uint32_t id)
{
	const struct ptg_sym *s;
	uint8_t f = SF_KNOWN;

	if (id > c->nsyms)
		return SF_KNOWN;
	if (c->symflags[id])
		return c->symflags[id];
	s = trace_reader__sym(c->r, id);
	if (s && is_seed_launch(s->name))
		f |= SF_SEED_LAUNCH;
	if (s && strcasestr(s->name, "nccl"))
		f |= SF_COMM;
	c->symflags[id] = f;
	return f;
}

static int gop_add(struct idle_ctx *c, const struct ptg_record *rec)
{
	struct gop *g;

	if (array_grow((void **)&c->gops, &c->gcap, c->ngops + 1, sizeof(*g)))
		return -ENOMEM;
	g = &c->gops[c->ngops++];
	g->start = rec->ts;
	g->end = rec->ts + rec->dur;
	g->launch = rec->corr;
	g->stream = rec->stream;
	g->device = rec->device;
	g->kind = rec->kind;
	g->flags = rec->kind == PTG_REC_GPU_KERNEL ? sym_flags(c, rec->sym) & SF_COMM : 0;
	return 0;
}

/* A probed call's correlation id comes from the join flow that CUPTI's record became. */
static int call_add(struct idle_ctx *c, const struct ptg_record *rec)
{
	uint64_t corr = cuda_join_corr(&c->joins, rec);
	struct lcall *l;

	if (!corr)
		return 0;
	if (array_grow((void **)&c->calls, &c->ccap, c->ncalls + 1, sizeof(*l)))
		return -ENOMEM;
	l = &c->calls[c->ncalls++];
	l->corr = corr;
	l->ts = rec->ts;
	l->seed = sym_flags(c, rec->sym) & SF_SEED_LAUNCH;
	return 0;
}

/* Pass 1: GPU ops and the CUDA calls that may have launched them. */
static int pass1(struct idle_ctx *c)
{
	struct ptg_record rec;
	int err;

	while ((err = trace_reader__next(c->r, &rec)) > 0) {
		switch (rec.kind) {
		case PTG_REC_GPU_KERNEL:
		case PTG_REC_GPU_MEMCPY:
		case PTG_REC_GPU_MEMSET:
			err = gop_add(c, &rec);
			break;
		case PTG_REC_CUDA_CALL:
			err = call_add(c, &rec);
			break;
		default:
			err = 0;
		}
		if (err)
			return err;
	}
	if (err < 0)
		pr_err("idle: %s", trace_reader__error(c->r));
	return err;
}

static int cmp_call(const void *pa, const void *pb)
{
	const struct lcall *a = pa, *b = pb;

	return cmp_u64(a->corr, b->corr) ?: cmp_u64(a->ts, b->ts);
}

static int cmp_gop_corr(const void *pa, const void *pb)
{
	const struct gop *a = pa, *b = pb;

	return cmp_u64(a->launch, b->launch);
}

/* Replaces each op's correlation id by the start of its launching call. */
static void join_launches(struct idle_ctx *c)
{
	size_t i, j = 0;

	array_sort(c->calls, c->ncalls, sizeof(*c->calls), cmp_call);
	array_sort(c->gops, c->ngops, sizeof(*c->gops), cmp_gop_corr);
	for (i = 0; i < c->ngops; i++) {
		struct gop *g = &c->gops[i];
		uint64_t corr = g->launch;

		while (j < c->ncalls && c->calls[j].corr < corr)
			j++;
		g->launch = NONE;
		if (corr && j < c->ncalls && c->calls[j].corr == corr) {
			g->launch = c->calls[j].ts;
			if (c->calls[j].seed)
				g->flags |= SF_SEED_LAUNCH;
		}
	}
	free(c->calls);
	c->calls = NULL;
}

/* Nearest-rank percentile of sorted v. */
static uint64_t percentile(const uint64_t *v, size_t n, unsigned int pct)
{
	size_t rank = (n * pct + 99) / 100;

	return v[rank ? rank - 1 : 0];
}

static int launch_delays(struct idle_ctx *c)
{
	struct idle_delay *d = &c->rep->launch_delay;
	uint64_t *v = malloc((c->ngops + 1) * sizeof(*v));
	double sum = 0;
	size_t i, n = 0;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < c->ngops; i++) {
		const struct gop *g = &c->gops[i];

		if (g->kind != PTG_REC_GPU_KERNEL || g->launch == NONE)
			continue;
		/* clocks of host and GPU can disagree by a little: a negative delay is 0 */
		v[n] = g->start > g->launch ? g->start - g->launch : 0;
		sum += v[n++];
	}
	if (n) {
		array_sort(v, n, sizeof(*v), cmp_u64p);
		d->count = n;
		d->mean_ns = sum / n;
		d->p50_ns = percentile(v, n, 50);
		d->p95_ns = percentile(v, n, 95);
		d->max_ns = v[n - 1];
	}
	free(v);
	return 0;
}

static int cmp_gop_start(const void *pa, const void *pb)
{
	const struct gop *a = pa, *b = pb;

	return cmp_u64(a->start, b->start) ?: cmp_u64(a->end, b->end);
}

static int cmp_gop_dev(const void *pa, const void *pb)
{
	const struct gop *a = pa, *b = pb;

	return cmp_u64(a->device, b->device) ?: cmp_gop_start(pa, pb);
}

static int cmp_gop_stream(const void *pa, const void *pb)
{
	const struct gop *a = pa, *b = pb;

	return cmp_u64(a->device, b->device) ?: cmp_u64(a->stream, b->stream)
		?: cmp_gop_start(pa, pb);
}

/* Which of two kept gaps goes first: the longer, then the earlier. */
static int cmp_gap_ent(const void *pa, const void *pb)
{
	const struct gap_ent *a = pa, *b = pb;

	return cmp_u64(b->g.end - b->g.start, a->g.end - a->g.start) ?: cmp_u64(a->seq, b->seq);
}

/* The heap's order: its root is the gap that goes last. */
static bool gap_below(const struct gap_ent *a, const struct gap_ent *b)
{
	return cmp_gap_ent(a, b) > 0;
}

static void gap_sift_down(struct gap_ent *h, size_t n, size_t i)
{
	for (size_t m = i;; i = m) {
		size_t l = 2 * i + 1, r = l + 1;
		struct gap_ent t;

		if (l < n && gap_below(&h[l], &h[m]))
			m = l;
		if (r < n && gap_below(&h[r], &h[m]))
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
	}
}

/*
 * Keeps the top_n longest gaps (the earlier of equal ones) in a heap:
 * O(log top_n) a gap however large -n is. gaps_sort() orders them.
 */
static void gap_keep(struct idle_ctx *c, uint64_t a, uint64_t b, uint32_t device)
{
	struct gap_ent e = {.g = {.start = a, .end = b, .device = device}, .seq = c->ngap_seen++};
	struct gap_ent *h = c->gheap;
	size_t i;

	c->rep->gap_count++;
	if (!c->o->top_n)
		return;
	if (c->ngheap == c->o->top_n) {
		if (!gap_below(&h[0], &e))
			return;
		h[0] = e;
		gap_sift_down(h, c->ngheap, 0);
		return;
	}
	for (i = c->ngheap++; i > 0 && gap_below(&e, &h[(i - 1) / 2]); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = e;
}

/* The kept gaps into the report, longest first. */
static void gaps_sort(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;

	array_sort(c->gheap, c->ngheap, sizeof(*c->gheap), cmp_gap_ent);
	for (size_t i = 0; i < c->ngheap; i++)
		rep->gaps[i] = c->gheap[i].g;
	rep->ngaps = c->ngheap;
}

/* Merged length of the ops of g[0..n) that match; gaps are reported when dev is given. */
static uint64_t merged_busy(struct idle_ctx *c, const struct gop *g, size_t n, bool compute_only,
			    struct idle_device *dev)
{
	uint64_t busy = 0, s = 0, e = 0;
	bool open = false;
	size_t i;

	for (i = 0; i < n; i++) {
		if (compute_only && (g[i].kind != PTG_REC_GPU_KERNEL || (g[i].flags & SF_COMM)))
			continue;
		if (open && g[i].start <= e) {
			if (g[i].end > e)
				e = g[i].end;
			continue;
		}
		if (open) {
			busy += e - s;
			if (dev) {
				gap_keep(c, e, g[i].start, dev->device);
				dev->gaps++;
			}
		}
		s = g[i].start;
		e = g[i].end;
		open = true;
	}
	return open ? busy + (e - s) : busy;
}

static void device_breakdown(struct idle_ctx *c, const struct gop *g, size_t n,
			     struct idle_device *d)
{
	uint64_t busy;
	size_t i;

	d->device = g[0].device;
	d->first = g[0].start;
	for (i = 0; i < n; i++) {
		if (g[i].end > d->last)
			d->last = g[i].end;
		d->kernels += g[i].kind == PTG_REC_GPU_KERNEL;
		d->memcpys += g[i].kind == PTG_REC_GPU_MEMCPY;
		d->memsets += g[i].kind == PTG_REC_GPU_MEMSET;
		if (g[i].kind == PTG_REC_GPU_KERNEL)
			d->kernel_ns += g[i].end - g[i].start;
	}
	busy = merged_busy(c, g, n, false, d);
	d->idle_ns = d->last - d->first - busy;
	d->compute_ns = merged_busy(c, g, n, true, NULL);
	d->non_compute_ns = busy - d->compute_ns;
}

static int devices(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	size_t i, lo, cap = 0;

	array_sort(c->gops, c->ngops, sizeof(*c->gops), cmp_gop_dev);
	rep->gaps = calloc(c->o->top_n + 1, sizeof(*rep->gaps));
	c->gheap = calloc(c->o->top_n + 1, sizeof(*c->gheap));
	if (!rep->gaps || !c->gheap)
		return -ENOMEM;
	for (lo = 0; lo < c->ngops; lo = i) {
		struct idle_device *d;

		for (i = lo; i < c->ngops && c->gops[i].device == c->gops[lo].device; i++)
			;
		if (array_grow((void **)&rep->devices, &cap, rep->ndevices + 1, sizeof(*d)))
			return -ENOMEM;
		d = &rep->devices[rep->ndevices++];
		memset(d, 0, sizeof(*d));
		device_breakdown(c, &c->gops[lo], i - lo, d);
	}
	gaps_sort(c);
	return 0;
}

/* Busy intervals of all devices merged, with the busy time before each. */
static int global_busy(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	uint64_t total = 0;
	size_t i, n = 0;

	array_sort(c->gops, c->ngops, sizeof(*c->gops), cmp_gop_start);
	rep->busy = malloc((2 * c->ngops + 2) * sizeof(uint64_t));
	rep->busy_before = malloc((c->ngops + 1) * sizeof(uint64_t));
	if (!rep->busy || !rep->busy_before)
		return -ENOMEM;
	for (i = 0; i < c->ngops; i++) {
		const struct gop *g = &c->gops[i];

		if (n && g->start <= rep->busy[2 * n - 1]) {
			if (g->end > rep->busy[2 * n - 1])
				rep->busy[2 * n - 1] = g->end;
			continue;
		}
		if (n)
			total += rep->busy[2 * n - 1] - rep->busy[2 * n - 2];
		rep->busy_before[n] = total;
		rep->busy[2 * n] = g->start;
		rep->busy[2 * n + 1] = g->end;
		n++;
	}
	rep->nbusy = n;
	if (n) {
		total += rep->busy[2 * n - 1] - rep->busy[2 * n - 2];
		rep->gpu_first = rep->busy[0];
		rep->gpu_last = rep->busy[2 * n - 1];
		rep->gpu_idle_ns = rep->gpu_last - rep->gpu_first - total;
	}
	return 0;
}

/* HTA's idle time breakdown of one stream: each gap is charged to the op after it. */
static void stream_idle(const struct idle_opts *o, const struct gop *g, size_t n,
			struct idle_stream *s)
{
	size_t i;

	for (i = 1; i < n; i++) {
		uint64_t prev_end = g[i - 1].end;
		uint64_t gap = g[i].start > prev_end ? g[i].start - prev_end : 0;

		if (g[i].launch != NONE && g[i].launch > prev_end)
			s->host_wait_ns += gap;
		else if (gap < o->kernel_wait_ns)
			s->kernel_wait_ns += gap;
		else
			s->other_wait_ns += gap;
	}
}

struct qchange {
	uint64_t t;
	int64_t delta;
};

static int cmp_qchange(const void *pa, const void *pb)
{
	const struct qchange *a = pa, *b = pb;

	return cmp_u64(a->t, b->t) ?: (a->delta > b->delta) - (a->delta < b->delta);
}

/* HTA's queue length of one stream: +1 at each launching call, -1 at each op start. */
static void stream_queue(const struct idle_opts *o, const struct gop *g, size_t n,
			 struct qchange *q, struct idle_stream *s)
{
	size_t i, m = 0;
	int64_t len = 0;
	double integral = 0;

	for (i = 0; i < n; i++) {
		if (g[i].launch == NONE)
			continue;
		q[m++] = (struct qchange){g[i].launch, 1};
		q[m++] = (struct qchange){g[i].start, -1};
	}
	array_sort(q, m, sizeof(*q), cmp_qchange);
	for (i = 0; i < m; i++) {
		uint64_t dur = i + 1 < m ? q[i + 1].t - q[i].t : 0;

		len += q[i].delta;
		if (len > (int64_t)s->max_queue)
			s->max_queue = len;
		if (len > 0)
			integral += (double)len * dur;
		if (len >= (int64_t)o->max_queue_len)
			s->full_queue_ns += dur;
	}
	if (m && q[m - 1].t > q[0].t)
		s->mean_queue = integral / (q[m - 1].t - q[0].t);
}

static int streams(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	struct qchange *q = malloc((2 * c->ngops + 1) * sizeof(*q));
	size_t i, lo, cap = 0;

	if (!q)
		return -ENOMEM;
	array_sort(c->gops, c->ngops, sizeof(*c->gops), cmp_gop_stream);
	for (lo = 0; lo < c->ngops; lo = i) {
		const struct gop *g = &c->gops[lo];
		struct idle_stream *s;

		for (i = lo; i < c->ngops && c->gops[i].device == g->device &&
			     c->gops[i].stream == g->stream;
		     i++)
			;
		if (array_grow((void **)&rep->streams, &cap, rep->nstreams + 1, sizeof(*s))) {
			free(q);
			return -ENOMEM;
		}
		s = &rep->streams[rep->nstreams++];
		memset(s, 0, sizeof(*s));
		s->device = g->device;
		s->stream = g->stream;
		s->ops = i - lo;
		stream_idle(c->o, g, i - lo, s);
		stream_queue(c->o, g, i - lo, q, s);
	}
	free(q);
	return 0;
}

static int gpu_side(struct idle_ctx *c)
{
	int err;

	c->rep->gpu_ops = c->ngops;
	join_launches(c);
	if ((err = launch_delays(c)) || (err = idle_queue(c)))
		return err;
	if ((err = devices(c)) || (err = global_busy(c)) || (err = streams(c)))
		return err;
	free(c->gops);
	c->gops = NULL;
	return 0;
}

static void ctx_free(struct idle_ctx *c)
{
	free(c->symflags);
	free(c->gops);
	free(c->calls);
	u64map__free(&c->joins);
	free(c->points);
	free(c->decr);
	free(c->acc.slots);
	free(c->names);
	free(c->cands);
	free(c->gheap);
}

int idle_analyze(struct trace_reader *r, const struct idle_opts *o, struct idle_report **out)
{
	struct idle_ctx c = {.r = r, .o = o};
	int err;

	c.nsyms = trace_reader__nsyms(r);
	c.symflags = calloc(c.nsyms + 1, 1);
	c.rep = calloc(1, sizeof(*c.rep));
	if (!c.symflags || !c.rep) {
		err = -ENOMEM;
		goto cleanup;
	}
	if ((err = cuda_join_load(r, &c.joins)) || (err = pass1(&c)) || (err = gpu_side(&c)) ||
	    (err = idle_pass2(&c)) || (err = idle_rank(&c)))
		goto cleanup;
	idle_top_names(&c);
	*out = c.rep;
	c.rep = NULL;
cleanup:
	if (err == -ENOMEM)
		pr_err("idle: out of memory");
	idle_report__free(c.rep);
	ctx_free(&c);
	return err;
}

void idle_report__free(struct idle_report *rep)
{
	if (!rep)
		return;
	free(rep->devices);
	free(rep->streams);
	free(rep->gaps);
	free(rep->ranked);
	free(rep->names);
	free(rep->busy);
	free(rep->busy_before);
	free(rep->launches);
	free(rep->kstarts);
	free(rep);
}
