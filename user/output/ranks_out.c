// SPDX-License-Identifier: MIT
/* The cross-rank tables and JSON (ranks_out.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/array.h"
#include "output/ranks_out.h"
#include "output/report_fmt.h"

/* What the text shows of a trace path: its last 40 bytes. */
#define PATH_SHOWN 40

struct pick {
	size_t row;
	uint64_t wait;
};

/* The longest wait of any rank in a step: how much the step cost the job. */
static uint64_t row_wait(const struct ranks_report *rep, const struct ranks_row *row)
{
	uint64_t w = 0;

	for (size_t i = 0; i < rep->nranks; i++) {
		const struct ranks_step *st = ranks_report__step(rep, i, row->num);

		if (st && st->wait_ns > w)
			w = st->wait_ns;
	}
	return w;
}

static int cmp_pick_wait(const void *pa, const void *pb)
{
	const struct pick *a = pa, *b = pb;

	if (a->wait != b->wait)
		return a->wait > b->wait ? -1 : 1;
	return a->row < b->row ? -1 : a->row > b->row;
}

static int cmp_pick_row(const void *pa, const void *pb)
{
	const struct pick *a = pa, *b = pb;

	return a->row < b->row ? -1 : a->row > b->row;
}

/* The top_n steps by longest wait (the earlier of equal ones), in step order. */
static struct pick *pick_rows(const struct ranks_report *rep, unsigned int top_n, size_t *n)
{
	struct pick *p = calloc(rep->nrows + 1, sizeof(*p));

	if (!p)
		return NULL;
	for (size_t i = 0; i < rep->nrows; i++)
		p[i] = (struct pick){.row = i, .wait = row_wait(rep, &rep->rows[i])};
	array_sort(p, rep->nrows, sizeof(*p), cmp_pick_wait);
	*n = rep->nrows < top_n ? rep->nrows : top_n;
	array_sort(p, *n, sizeof(*p), cmp_pick_row);
	return p;
}

static const char *tail(const char *path)
{
	size_t n = strlen(path);

	return n > PATH_SHOWN ? path + n - PATH_SHOWN : path;
}

static void text_ranks(FILE *f, const struct ranks_report *rep, const struct idle_opts *o)
{
	char a[32], b[32], c[32], d[32], e[32];

	fprintf(f, "%zu ranks, %s\n", rep->nranks,
		rep->file_order ? "numbered in the order of their files"
				: "numbered by the rank each trace records");
	fprintf(f,
		"\nGPU idle time per rank (HTA temporal breakdown; stream idle: HTA idle time "
		"breakdown summed over streams, kernel wait = gap under %.1f µs)\n",
		o->kernel_wait_ns / 1e3);
	fprintf(f, "  %-6s %12s %12s %7s %12s %12s %12s %7s %7s %7s  %s\n", "rank", "GPU span",
		"idle", "%", "compute", "non-compute", "stream idle", "host", "kernel", "other",
		"trace");
	for (size_t i = 0; i < rep->nranks; i++) {
		const struct ranks_trace *t = &rep->ranks[i];
		uint64_t sidle = t->host_wait_ns + t->kernel_wait_ns + t->other_wait_ns;

		if (!t->has_gpu) {
			fprintf(f, "  %-6u %12s %12s %7s %12s %12s %12s %7s %7s %7s  %s\n", t->rank,
				"no GPU", "-", "-", "-", "-", "-", "-", "-", "-", tail(t->path));
			continue;
		}
		fprintf(f, "  %-6u %12s %12s %6.2f%% %12s %12s %12s %6.2f%% %6.2f%% %6.2f%%  %s\n",
			t->rank, fmt_ns(a, sizeof(a), t->gpu_span_ns),
			fmt_ns(b, sizeof(b), t->gpu_idle_ns), pct(t->gpu_idle_ns, t->gpu_span_ns),
			fmt_ns(c, sizeof(c), t->compute_ns),
			fmt_ns(d, sizeof(d), t->non_compute_ns), fmt_ns(e, sizeof(e), sidle),
			pct(t->host_wait_ns, sidle), pct(t->kernel_wait_ns, sidle),
			pct(t->other_wait_ns, sidle), tail(t->path));
	}
}

static void text_comm(FILE *f, const struct ranks_report *rep)
{
	char a[32], b[32];

	fprintf(f, "\nCommunication per rank (kernels named nccl*; overlap = of it, the time a "
		   "compute kernel ran too)\n");
	fprintf(f, "  %-6s %12s %9s %7s %11s %12s\n", "rank", "comm", "overlap", "steps",
		"slowest in", "waited");
	for (size_t i = 0; i < rep->nranks; i++) {
		const struct ranks_trace *t = &rep->ranks[i];

		fprintf(f, "  %-6u %12s %8.2f%% %7zu %11u %12s\n", t->rank,
			fmt_ns(a, sizeof(a), t->comm_ns), pct(t->comm_overlap_ns, t->comm_ns),
			t->nsteps, t->slowest, fmt_ns(b, sizeof(b), t->waited_ns));
	}
}

static void text_steps(FILE *f, const struct ranks_report *rep, const struct pick *p, size_t n)
{
	char a[32], b[32], c[32], d[32];

	fprintf(f,
		"\nSteps across ranks (%zu of %zu ProfilerStep#N, those with the longest wait; "
		"slowest = the rank the others waited for)\n",
		n, rep->nrows);
	fprintf(f, "  %-10s %6s %12s %12s %12s %8s %-8s %12s\n", "step", "ranks", "min step",
		"max step", "spread", "slowest", "by", "max wait");
	for (size_t i = 0; i < n; i++) {
		const struct ranks_row *row = &rep->rows[p[i].row];

		fprintf(f, "  %-10" PRIu64 " %6u %12s %12s %12s %8u %-8s %12s\n", row->num,
			row->nranks, fmt_ns(a, sizeof(a), row->min_dur),
			fmt_ns(b, sizeof(b), row->max_dur),
			fmt_ns(c, sizeof(c), row->max_dur - row->min_dur),
			rep->ranks[row->slowest].rank, row->by_comm ? "nccl" : "duration",
			fmt_ns(d, sizeof(d), p[i].wait));
	}
}

static void text_per_rank(FILE *f, const struct ranks_report *rep, const struct pick *p, size_t n)
{
	char a[32], b[32], c[32], d[32];

	fprintf(f, "\nTime per rank per step (wait: nccl time beyond the slowest rank's, or, in "
		   "a step without nccl kernels, step time short of the slowest's)\n");
	fprintf(f, "  %-10s %-6s %12s %12s %12s %8s %12s\n", "step", "rank", "step time", "nccl",
		"compute", "gpu ops", "wait");
	for (size_t i = 0; i < n; i++) {
		const struct ranks_row *row = &rep->rows[p[i].row];
		bool first = true;

		for (size_t r = 0; r < rep->nranks; r++) {
			const struct ranks_step *st = ranks_report__step(rep, r, row->num);
			char num[24] = "";

			if (!st)
				continue;
			if (first)
				snprintf(num, sizeof(num), "%" PRIu64, row->num);
			first = false;
			fprintf(f, "  %-10s %-6u %12s %12s %12s %8" PRIu64 " %12s%s\n", num,
				rep->ranks[r].rank, fmt_ns(a, sizeof(a), st->end - st->start),
				fmt_ns(b, sizeof(b), st->comm_ns),
				fmt_ns(c, sizeof(c), st->compute_ns), st->gpu_ops,
				fmt_ns(d, sizeof(d), st->wait_ns),
				r == row->slowest ? "  <- slowest" : "");
		}
	}
}

void ranks_print_text(FILE *f, const struct ranks_report *rep, const struct idle_opts *o)
{
	struct pick *p;
	size_t n = 0;

	text_ranks(f, rep, o);
	text_comm(f, rep);
	if (!rep->nrows) {
		fprintf(f, "\nno ProfilerStep#N spans in these traces: no steps to compare\n");
		return;
	}
	p = pick_rows(rep, o->top_n, &n);
	if (!p) {
		fprintf(f, "\n(steps left out: %s)\n", strerror(ENOMEM));
		return;
	}
	text_steps(f, rep, p, n);
	if (n)
		text_per_rank(f, rep, p, n);
	free(p);
}

static json_object *json_rank(const struct ranks_trace *t)
{
	json_object *o = json_object_new_object();

	jset_u64(o, "rank", t->rank);
	jset(o, "trace", json_object_new_string(t->path));
	jset(o, "claimed_rank", t->meta_rank >= 0 ? json_object_new_int64(t->meta_rank) : NULL);
	jset_u64(o, "devices", t->devices);
	jset_u64(o, "gpu_ops", t->gpu_ops);
	jset_u64(o, "gpu_span_ns", t->gpu_span_ns);
	jset_u64(o, "gpu_idle_ns", t->gpu_idle_ns);
	jset(o, "gpu_idle_pct", jdouble(pct(t->gpu_idle_ns, t->gpu_span_ns)));
	jset_u64(o, "compute_ns", t->compute_ns);
	jset_u64(o, "non_compute_ns", t->non_compute_ns);
	jset_u64(o, "host_wait_ns", t->host_wait_ns);
	jset_u64(o, "kernel_wait_ns", t->kernel_wait_ns);
	jset_u64(o, "other_wait_ns", t->other_wait_ns);
	jset_u64(o, "comm_ns", t->comm_ns);
	jset_u64(o, "comm_overlap_ns", t->comm_overlap_ns);
	jset(o, "comm_overlap_pct", jdouble(pct(t->comm_overlap_ns, t->comm_ns)));
	jset_u64(o, "steps", t->nsteps);
	jset_u64(o, "slowest_in_steps", t->slowest);
	jset_u64(o, "waited_ns", t->waited_ns);
	return o;
}

static json_object *json_row(const struct ranks_report *rep, const struct pick *p)
{
	const struct ranks_row *row = &rep->rows[p->row];
	json_object *o = json_object_new_object(), *a = json_object_new_array();

	jset_u64(o, "step", row->num);
	jset_u64(o, "ranks", row->nranks);
	jset_u64(o, "min_ns", row->min_dur);
	jset_u64(o, "max_ns", row->max_dur);
	jset_u64(o, "spread_ns", row->max_dur - row->min_dur);
	jset_u64(o, "slowest_rank", rep->ranks[row->slowest].rank);
	jset(o, "slowest_by", json_object_new_string(row->by_comm ? "nccl" : "duration"));
	jset_u64(o, "max_wait_ns", p->wait);
	for (size_t r = 0; r < rep->nranks; r++) {
		const struct ranks_step *st = ranks_report__step(rep, r, row->num);
		json_object *s;

		if (!st)
			continue;
		s = json_object_new_object();
		jset_u64(s, "rank", rep->ranks[r].rank);
		jset_u64(s, "start_ns", st->start);
		jset_u64(s, "dur_ns", st->end - st->start);
		jset_u64(s, "comm_ns", st->comm_ns);
		jset_u64(s, "compute_ns", st->compute_ns);
		jset_u64(s, "gpu_ops", st->gpu_ops);
		jset_u64(s, "wait_ns", st->wait_ns);
		json_object_array_add(a, s);
	}
	jset(o, "per_rank", a);
	return o;
}

int ranks_print_json(FILE *f, const struct ranks_report *rep, const struct idle_opts *o)
{
	json_object *root = json_object_new_object(), *ranks = json_object_new_array();
	json_object *steps = json_object_new_array();
	struct pick *p;
	size_t n = 0;

	p = pick_rows(rep, o->top_n, &n);
	if (!p) {
		json_object_put(root);
		json_object_put(ranks);
		json_object_put(steps);
		return -ENOMEM;
	}
	jset(root, "rank_source", json_object_new_string(rep->file_order ? "file_order" : "trace"));
	jset_u64(root, "kernel_wait_ns", o->kernel_wait_ns);
	for (size_t i = 0; i < rep->nranks; i++)
		json_object_array_add(ranks, json_rank(&rep->ranks[i]));
	jset(root, "ranks", ranks);
	jset_u64(root, "steps_total", rep->nrows);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(steps, json_row(rep, &p[i]));
	jset(root, "steps", steps);
	fprintf(f, "%s\n",
		json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
	free(p);
	return 0;
}
