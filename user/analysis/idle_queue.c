// SPDX-License-Identifier: MIT
/*
 * The launch queue of the idle analysis: its depth at any time (kernels
 * launched and not yet started), its distribution and the falling phases
 * that torch.profiler's BasicEvaluation looks for events in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/idle_ctx.h"
#include "base/array.h"

/* Kernels counted in the launch queue: launched by a launch call we saw. */
static bool in_queue(const struct gop *g)
{
	return g->kind == PTG_REC_GPU_KERNEL && g->launch != NONE && (g->flags & SF_SEED_LAUNCH);
}

static int queue_arrays(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	size_t i, n = 0;

	rep->launches = malloc((c->ngops + 1) * sizeof(uint64_t));
	rep->kstarts = malloc((c->ngops + 1) * sizeof(uint64_t));
	if (!rep->launches || !rep->kstarts)
		return -ENOMEM;
	for (i = 0; i < c->ngops; i++) {
		if (!in_queue(&c->gops[i]))
			continue;
		rep->launches[n] = c->gops[i].launch;
		rep->kstarts[n++] = c->gops[i].start;
	}
	array_sort(rep->launches, n, sizeof(uint64_t), cmp_u64p);
	array_sort(rep->kstarts, n, sizeof(uint64_t), cmp_u64p);
	rep->nqd = n;
	return 0;
}

/* Number of elements of sorted v that are <= t. */
static size_t count_le(const uint64_t *v, size_t n, uint64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint32_t idle_report__queue_depth(const struct idle_report *rep, uint64_t t)
{
	size_t l = count_le(rep->launches, rep->nqd, t), k = count_le(rep->kstarts, rep->nqd, t);

	return l > k ? l - k : 0;
}

/*
 * The queue-depth data points of BasicEvaluation: every launch and every
 * kernel start, launches first at equal times, each with the depth after it.
 */
static int queue_points(struct idle_ctx *c)
{
	const struct idle_report *rep = c->rep;
	size_t n = rep->nqd, il = 0, ik = 0, k = 0, i;

	c->points = malloc((2 * n + 1) * sizeof(*c->points));
	if (!c->points)
		return -ENOMEM;
	for (i = 0; i < 2 * n; i++) {
		bool launch = il < n && (ik >= n || rep->launches[il] <= rep->kstarts[ik]);
		uint64_t t = launch ? rep->launches[il++] : rep->kstarts[ik++];

		while (k < n && rep->kstarts[k] <= t)
			k++;
		c->points[i].t = t;
		c->points[i].depth = il > k ? il - k : 0;
	}
	c->npoints = 2 * n;
	return 0;
}

static unsigned int qd_bucket(uint32_t d)
{
	unsigned int b = 0;

	while (d && b < IDLE_QD_BUCKETS - 1) {
		b++;
		d >>= 1;
	}
	return b;
}

/* Adds depth d over [a, b) to the histogram and the timeline buckets. */
static void qd_segment(struct idle_report *rep, uint64_t a, uint64_t b, uint32_t d)
{
	uint64_t span = rep->qd_last - rep->qd_first, lo, hi;
	size_t i;

	rep->qd_hist_ns[qd_bucket(d)] += b - a;
	if (!span)
		return;
	i = (a - rep->qd_first) * IDLE_TIMELINE_BUCKETS / span;
	for (; i < IDLE_TIMELINE_BUCKETS; i++) {
		lo = rep->qd_first + span * i / IDLE_TIMELINE_BUCKETS;
		hi = rep->qd_first + span * (i + 1) / IDLE_TIMELINE_BUCKETS;
		if (lo >= b && a != b)
			break;
		/* an instant still counts for its bucket's maximum */
		if (d > rep->qd_timeline_max[i])
			rep->qd_timeline_max[i] = d;
		if (a == b)
			break;
		rep->qd_timeline_mean[i] += (double)d * ((b < hi ? b : hi) - (a > lo ? a : lo));
	}
}

static void queue_stats(struct idle_ctx *c)
{
	struct idle_report *rep = c->rep;
	double integral = 0;
	uint64_t span, lo, hi;
	size_t i;

	if (!c->npoints)
		return;
	rep->qd_first = c->points[0].t;
	rep->qd_last = c->points[c->npoints - 1].t;
	for (i = 0; i < c->npoints; i++) {
		const struct qd_point *p = &c->points[i];
		uint64_t next = i + 1 < c->npoints ? p[1].t : p->t;

		if (p->depth > rep->qd_max)
			rep->qd_max = p->depth;
		integral += (double)p->depth * (next - p->t);
		qd_segment(rep, p->t, next, p->depth);
	}
	span = rep->qd_last - rep->qd_first;
	rep->qd_mean = span ? integral / span : 0;
	for (i = 0; i < IDLE_TIMELINE_BUCKETS && span; i++) {
		lo = rep->qd_first + span * i / IDLE_TIMELINE_BUCKETS;
		hi = rep->qd_first + span * (i + 1) / IDLE_TIMELINE_BUCKETS;
		rep->qd_timeline_mean[i] = hi > lo ? rep->qd_timeline_mean[i] / (hi - lo) : 0;
	}
}

static int decr_add(struct idle_ctx *c, size_t *cap, uint64_t a, uint64_t b)
{
	c->rep->decreases++;
	/* an empty phase overlaps nothing, and dropping it keeps the list disjoint */
	if (a >= b)
		return 0;
	if (array_grow((void **)&c->decr, cap, c->ndecr + 1, sizeof(*c->decr)))
		return -ENOMEM;
	c->decr[c->ndecr].start = a;
	c->decr[c->ndecr++].end = b;
	return 0;
}

/*
 * BasicEvaluation.rank_events, step 1, kept exactly: walking the depth
 * points backwards from the end, each zero opens a search up to the next
 * zero; when the peak in between reaches QD_PEAK_MIN the span from the peak
 * to the zero is a falling phase, and the walk resumes after the next zero
 * (so that zero never closes a phase of its own).
 */
static int find_decreases(struct idle_ctx *c)
{
	size_t n = c->npoints, i = 0, j, k, end, peak, cap = 0, lo, hi;
	const struct qd_point *p = c->points;
#define QD(r) (p[n - 1 - (r)].depth)
#define T(r)  (p[n - 1 - (r)].t)

	while (i < n) {
		if (QD(i) > 0 || i + 1 >= n) {
			i++;
			continue;
		}
		j = i + 1;
		for (end = j; end < n && QD(end) > 0; end++)
			;
		for (peak = j, k = j; k < end; k++) {
			if (QD(k) > QD(peak))
				peak = k;
		}
		if (end > j && QD(peak) >= QD_PEAK_MIN) {
			if (decr_add(c, &cap, T(peak), T(i)))
				return -ENOMEM;
			if (end < n)
				i = end;
		}
		i++;
	}
#undef QD
#undef T
	/* found from the end backwards: put them in time order */
	for (lo = 0, hi = c->ndecr; hi > lo + 1; lo++, hi--) {
		struct span_iv t = c->decr[lo];

		c->decr[lo] = c->decr[hi - 1];
		c->decr[hi - 1] = t;
	}
	return 0;
}

bool idle_in_decrease(const struct idle_ctx *c, uint64_t s, uint64_t e)
{
	size_t lo = 0, hi = c->ndecr;

	if (s >= e)
		return false;
	/* the last phase that starts before e is the only one that can overlap */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->decr[mid].start < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && c->decr[lo - 1].end > s;
}

int idle_queue(struct idle_ctx *c)
{
	int err;

	if ((err = queue_arrays(c)) || (err = queue_points(c)))
		return err;
	queue_stats(c);
	if ((err = find_decreases(c)))
		return err;
	free(c->points);
	c->points = NULL;
	return 0;
}
