// SPDX-License-Identifier: MIT
/*
 * Cross-rank view (ranks.h). Each trace is read in three passes, one after
 * the other: the idle analysis (two) and one here for its steps, its GPU ops
 * and the CUDA calls that launched them. A GPU op belongs to the step whose
 * span holds the start of its launching call, as HTA assigns kernels to
 * iterations through their launch; an op without one, to the step holding
 * its own start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "analysis/ranks.h"
#include "base/array.h"
#include "base/log.h"
#include "model/cudajoin.h"
#include "trace/trace_kineto.h"
#include "trace/trace_open.h"

#define NONE UINT64_MAX

#define SF_KNOWN 1
#define SF_COMM	 2 /* a communication kernel: "nccl" in its name, as HTA and idle.c say */

struct rop {
	uint64_t start, end;
	uint64_t launch; /* correlation id, then the launching call's start or NONE */
	uint64_t step;	 /* index in the rank's steps, or NONE */
	uint8_t kernel, comm;
};

struct rcall {
	uint64_t corr, ts;
};

struct scan {
	struct trace_reader *r;
	struct ranks_trace *t;
	uint8_t *symflags;
	size_t nsyms;
	struct u64map joins;
	struct rop *ops;
	size_t nops, opcap;
	struct rcall *calls;
	size_t ncalls, callcap;
	size_t stepcap;
};

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int64_t parse_u32(const char *s)
{
	char *end;
	unsigned long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	return *end || errno || v > UINT32_MAX ? -1 : (int64_t)v;
}

/*
 * The rank the trace claims: record's dist.rank (the RANK of the target's
 * environment), else the "rank" of an imported trace's distributedInfo.
 */
static int64_t meta_rank(const struct trace_reader *r)
{
	const char *s = trace_reader__meta(r, "dist.rank");
	json_object *info, *v;
	int64_t rank = -1;

	if (s)
		return parse_u32(s);
	s = trace_reader__meta(r, KINETO_META_PREFIX "distributedInfo");
	info = s ? json_tokener_parse(s) : NULL;
	if (info && json_object_is_type(info, json_type_object) &&
	    json_object_object_get_ex(info, "rank", &v) && json_object_is_type(v, json_type_int)) {
		rank = json_object_get_int64(v);
		if (rank < 0 || rank > UINT32_MAX)
			rank = -1;
	}
	json_object_put(info);
	return rank;
}

static uint8_t sym_flags(struct scan *s, uint32_t id)
{
	const struct ptg_sym *sym;

	if (!id || id > s->nsyms)
		return SF_KNOWN;
	if (!s->symflags[id]) {
		sym = trace_reader__sym(s->r, id);
		s->symflags[id] = SF_KNOWN | (sym && strcasestr(sym->name, "nccl") ? SF_COMM : 0);
	}
	return s->symflags[id];
}

/* ProfilerStep#N on the CPU side (a gpu_user_annotation copy is GPU time, not the step). */
static int add_step(struct scan *s, const struct ptg_record *rec)
{
	const struct ptg_sym *name = trace_reader__sym(s->r, rec->sym);
	const struct ptg_sym *cat = trace_reader__sym(s->r, (uint32_t)rec->aux[0]);
	struct ranks_trace *t = s->t;
	int64_t num;

	if (!name || strncmp(name->name, "ProfilerStep#", 13) ||
	    (cat && !strcmp(cat->name, "gpu_user_annotation")))
		return 0;
	num = parse_u32(name->name + 13);
	if (num < 0)
		return 0;
	if (array_grow((void **)&t->steps, &s->stepcap, t->nsteps + 1, sizeof(*t->steps)))
		return -ENOMEM;
	t->steps[t->nsteps++] =
	    (struct ranks_step){.num = (uint64_t)num, .start = rec->ts, .end = rec->ts + rec->dur};
	return 0;
}

static int add_op(struct scan *s, const struct ptg_record *rec)
{
	bool kernel = rec->kind == PTG_REC_GPU_KERNEL;

	if (array_grow((void **)&s->ops, &s->opcap, s->nops + 1, sizeof(*s->ops)))
		return -ENOMEM;
	s->ops[s->nops++] = (struct rop){
	    .start = rec->ts,
	    .end = rec->ts + rec->dur,
	    .launch = rec->corr,
	    .kernel = kernel,
	    .comm = kernel && (sym_flags(s, rec->sym) & SF_COMM),
	};
	return 0;
}

/* A probed call's correlation id comes from its join flow (cudajoin.h). */
static int add_call(struct scan *s, const struct ptg_record *rec)
{
	uint64_t corr = cuda_join_corr(&s->joins, rec);

	if (!corr)
		return 0;
	if (array_grow((void **)&s->calls, &s->callcap, s->ncalls + 1, sizeof(*s->calls)))
		return -ENOMEM;
	s->calls[s->ncalls++] = (struct rcall){.corr = corr, .ts = rec->ts};
	return 0;
}

static int read_records(struct scan *s)
{
	struct ptg_record rec;
	int err;

	while ((err = trace_reader__next(s->r, &rec)) > 0) {
		switch (rec.kind) {
		case PTG_REC_SPAN:
			err = add_step(s, &rec);
			break;
		case PTG_REC_GPU_KERNEL:
		case PTG_REC_GPU_MEMCPY:
		case PTG_REC_GPU_MEMSET:
			err = add_op(s, &rec);
			break;
		case PTG_REC_CUDA_CALL:
			err = add_call(s, &rec);
			break;
		default:
			err = 0;
		}
		if (err)
			return err;
	}
	return err < 0 ? -EIO : 0;
}

static int cmp_call(const void *pa, const void *pb)
{
	const struct rcall *a = pa, *b = pb;

	return cmp_u64(a->corr, b->corr) ?: cmp_u64(a->ts, b->ts);
}

static int cmp_op_launch(const void *pa, const void *pb)
{
	const struct rop *a = pa, *b = pb;

	return cmp_u64(a->launch, b->launch);
}

/* Replaces each op's correlation id by the start of its launching call (the first of that id). */
static void join_launches(struct scan *s)
{
	size_t j = 0;

	array_sort(s->calls, s->ncalls, sizeof(*s->calls), cmp_call);
	array_sort(s->ops, s->nops, sizeof(*s->ops), cmp_op_launch);
	for (size_t i = 0; i < s->nops; i++) {
		uint64_t corr = s->ops[i].launch;

		while (j < s->ncalls && s->calls[j].corr < corr)
			j++;
		s->ops[i].launch =
		    corr && j < s->ncalls && s->calls[j].corr == corr ? s->calls[j].ts : NONE;
	}
}

static int cmp_step(const void *pa, const void *pb)
{
	const struct ranks_step *a = pa, *b = pb;

	return cmp_u64(a->num, b->num) ?: cmp_u64(a->start, b->start);
}

/* Sorts steps by number; spans of one number (several threads) become their hull. */
static void merge_steps(struct ranks_trace *t)
{
	size_t n = 0;

	array_sort(t->steps, t->nsteps, sizeof(*t->steps), cmp_step);
	for (size_t i = 0; i < t->nsteps; i++) {
		struct ranks_step *p = n ? &t->steps[n - 1] : NULL;

		if (p && p->num == t->steps[i].num) {
			if (t->steps[i].end > p->end)
				p->end = t->steps[i].end;
			continue;
		}
		t->steps[n++] = t->steps[i];
	}
	t->nsteps = n;
}

struct step_ix {
	uint64_t start;
	size_t i;
};

static int cmp_ix(const void *pa, const void *pb)
{
	const struct step_ix *a = pa, *b = pb;

	return cmp_u64(a->start, b->start) ?: cmp_u64(a->i, b->i);
}

/* The step started last at or before ts, if its span holds ts; else NONE. */
static uint64_t step_at(const struct ranks_trace *t, const struct step_ix *ix, uint64_t ts)
{
	size_t lo = 0, hi = t->nsteps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix[mid].start <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || ts >= t->steps[ix[lo - 1].i].end)
		return NONE;
	return ix[lo - 1].i;
}

static int cmp_op_group(const void *pa, const void *pb)
{
	const struct rop *a = pa, *b = pb;

	return cmp_u64(a->step, b->step) ?: cmp_u64(a->comm, b->comm) ?: cmp_u64(a->start, b->start);
}

/* Length of the union of ops[i..] that share group (step, comm) and are kernels. */
static uint64_t union_of(const struct rop *ops, size_t n, size_t *i)
{
	const struct rop *first = &ops[*i];
	uint64_t total = 0, s = 0, e = 0;
	bool open = false;

	for (; *i < n && ops[*i].step == first->step && ops[*i].comm == first->comm; (*i)++) {
		const struct rop *o = &ops[*i];

		if (!o->kernel)
			continue;
		if (open && o->start <= e) {
			e = o->end > e ? o->end : e;
			continue;
		}
		total += open ? e - s : 0;
		s = o->start;
		e = o->end;
		open = true;
	}
	return total + (open ? e - s : 0);
}

/* Per step: ops launched in it, and the union of its communication and compute kernels. */
static int step_totals(struct scan *s)
{
	struct ranks_trace *t = s->t;
	struct step_ix *ix;
	size_t i;

	ix = calloc(t->nsteps + 1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (i = 0; i < t->nsteps; i++)
		ix[i] = (struct step_ix){.start = t->steps[i].start, .i = i};
	array_sort(ix, t->nsteps, sizeof(*ix), cmp_ix);
	for (i = 0; i < s->nops; i++) {
		struct rop *o = &s->ops[i];

		o->step = step_at(t, ix, o->launch != NONE ? o->launch : o->start);
		if (o->step != NONE)
			t->steps[o->step].gpu_ops++;
	}
	free(ix);
	array_sort(s->ops, s->nops, sizeof(*s->ops), cmp_op_group);
	for (i = 0; i < s->nops && s->ops[i].step != NONE;) {
		struct ranks_step *st = &t->steps[s->ops[i].step];
		bool comm = s->ops[i].comm;
		uint64_t u = union_of(s->ops, s->nops, &i);

		*(comm ? &st->comm_ns : &st->compute_ns) = u;
	}
	return 0;
}

static int cmp_iv(const void *pa, const void *pb)
{
	const struct rop *a = pa, *b = pb;

	return cmp_u64(a->start, b->start);
}

/* Merges the kernels of one kind (comm or not) into v[] as start, end pairs. */
static size_t merge_kind(const struct rop *ops, size_t n, bool comm, uint64_t *v)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		if (!ops[i].kernel || ops[i].comm != comm)
			continue;
		if (m && ops[i].start <= v[2 * m - 1]) {
			if (ops[i].end > v[2 * m - 1])
				v[2 * m - 1] = ops[i].end;
			continue;
		}
		v[2 * m] = ops[i].start;
		v[2 * m + 1] = ops[i].end;
		m++;
	}
	return m;
}

/* HTA's communication/computation overlap: comm time during which a compute kernel ran. */
static int comm_overlap(struct scan *s)
{
	uint64_t *a, *b, total = 0, overlap = 0;
	size_t na, nb, i, j = 0;

	a = calloc(4 * s->nops + 2, sizeof(*a));
	if (!a)
		return -ENOMEM;
	b = a + 2 * s->nops + 1;
	array_sort(s->ops, s->nops, sizeof(*s->ops), cmp_iv);
	na = merge_kind(s->ops, s->nops, true, a);
	nb = merge_kind(s->ops, s->nops, false, b);
	for (i = 0; i < na; i++) {
		total += a[2 * i + 1] - a[2 * i];
		while (j < nb && b[2 * j + 1] <= a[2 * i])
			j++;
		for (size_t k = j; k < nb && b[2 * k] < a[2 * i + 1]; k++) {
			uint64_t lo = a[2 * i] > b[2 * k] ? a[2 * i] : b[2 * k];
			uint64_t hi = a[2 * i + 1] < b[2 * k + 1] ? a[2 * i + 1] : b[2 * k + 1];

			overlap += hi - lo;
		}
	}
	s->t->comm_ns = total;
	s->t->comm_overlap_ns = overlap;
	free(a);
	return 0;
}

static int scan_trace(struct trace_reader *r, struct ranks_trace *t)
{
	struct scan s = {.r = r, .t = t, .nsyms = trace_reader__nsyms(r)};
	int err;

	s.symflags = calloc(s.nsyms + 1, 1);
	if (!s.symflags)
		return -ENOMEM;
	/* cuda_join_load leaves the reader rewound */
	err = cuda_join_load(r, &s.joins) ?: read_records(&s);
	if (!err) {
		join_launches(&s);
		merge_steps(t);
		err = comm_overlap(&s);
	}
	if (!err)
		err = step_totals(&s);
	free(s.symflags);
	free(s.ops);
	free(s.calls);
	u64map__free(&s.joins);
	return err;
}

/* The idle analysis of one rank, reduced to its row. */
static void idle_row(struct ranks_trace *t, const struct idle_report *rep)
{
	size_t i;

	t->has_gpu = rep->gpu_last > rep->gpu_first || rep->gpu_ops;
	t->devices = (uint32_t)rep->ndevices;
	t->gpu_ops = rep->gpu_ops;
	t->gpu_span_ns = rep->gpu_last - rep->gpu_first;
	t->gpu_idle_ns = rep->gpu_idle_ns;
	for (i = 0; i < rep->ndevices; i++) {
		t->compute_ns += rep->devices[i].compute_ns;
		t->non_compute_ns += rep->devices[i].non_compute_ns;
	}
	for (i = 0; i < rep->nstreams; i++) {
		t->host_wait_ns += rep->streams[i].host_wait_ns;
		t->kernel_wait_ns += rep->streams[i].kernel_wait_ns;
		t->other_wait_ns += rep->streams[i].other_wait_ns;
	}
}

static int read_rank(const char *who, const char *path, const struct idle_opts *o,
		     struct ranks_trace *t)
{
	struct idle_opts io = *o;
	struct idle_report *rep = NULL;
	struct trace_reader *r = NULL;
	int err;

	t->path = strdup(path);
	if (!t->path)
		return -ENOMEM;
	err = trace_open(who, path, &r);
	if (err)
		return err;
	t->meta_rank = meta_rank(r);
	/* only the totals are kept: no lists to rank */
	io.top_n = 0;
	err = idle_analyze(r, &io, &rep);
	if (!err) {
		idle_row(t, rep);
		err = trace_reader__rewind(r) ?: scan_trace(r, t);
		if (err == -EIO)
			pr_err("%s: %s: %s", log_context(who), path, trace_reader__error(r));
	}
	idle_report__free(rep);
	trace_reader__close(r);
	return err;
}

static int cmp_rank(const void *pa, const void *pb)
{
	const struct ranks_trace *a = pa, *b = pb;

	return cmp_u64(a->rank, b->rank);
}

static int cmp_meta(const void *pa, const void *pb)
{
	const struct ranks_trace *const *a = pa, *const *b = pb;

	return (*a)->meta_rank < (*b)->meta_rank   ? -1
	       : (*a)->meta_rank > (*b)->meta_rank ? 1
						   : strcmp((*a)->path, (*b)->path);
}

/* Why the traces' own ranks cannot be used, in one line; false when they can. */
static int ranks_clash(const struct ranks_report *rep, char *buf, size_t len, bool *clash)
{
	const struct ranks_trace **by;
	size_t i;

	*clash = false;
	for (i = 0; i < rep->nranks && !*clash; i++) {
		if (rep->ranks[i].meta_rank < 0) {
			snprintf(buf, len, "%s has no rank (no dist.rank or distributedInfo)",
				 rep->ranks[i].path);
			*clash = true;
		}
	}
	by = calloc(rep->nranks + 1, sizeof(*by));
	if (!by)
		return -ENOMEM;
	for (i = 0; i < rep->nranks; i++)
		by[i] = &rep->ranks[i];
	array_sort(by, rep->nranks, sizeof(*by), cmp_meta);
	for (i = 1; i < rep->nranks && !*clash; i++) {
		if (by[i]->meta_rank == by[i - 1]->meta_rank) {
			snprintf(buf, len, "%s and %s both claim rank %" PRId64, by[i - 1]->path,
				 by[i]->path, by[i]->meta_rank);
			*clash = true;
		}
	}
	free(by);
	return 0;
}

/*
 * Ranks from the traces' metadata when every trace has one and no two claim
 * the same; else the file order, said in one line.
 */
static int assign_ranks(const char *who, struct ranks_report *rep)
{
	char why[1024];
	int err;

	err = ranks_clash(rep, why, sizeof(why), &rep->file_order);
	if (err)
		return err;
	for (size_t i = 0; i < rep->nranks; i++)
		rep->ranks[i].rank =
		    rep->file_order ? (uint32_t)i : (uint32_t)rep->ranks[i].meta_rank;
	if (rep->file_order)
		pr_warn("%s: %s: ranks are the file order", log_context(who), why);
	else
		array_sort(rep->ranks, rep->nranks, sizeof(*rep->ranks), cmp_rank);
	return 0;
}

const struct ranks_step *ranks_report__step(const struct ranks_report *rep, size_t rank,
					    uint64_t num)
{
	const struct ranks_trace *t = &rep->ranks[rank];
	size_t lo = 0, hi = t->nsteps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->steps[mid].num < num)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nsteps && t->steps[lo].num == num ? &t->steps[lo] : NULL;
}

static int cmp_u64p(const void *a, const void *b)
{
	return cmp_u64(*(const uint64_t *)a, *(const uint64_t *)b);
}

/* Every step number of any rank, once, in order. */
static int step_numbers(struct ranks_report *rep)
{
	size_t n = 0, m = 0;
	uint64_t *nums;

	for (size_t i = 0; i < rep->nranks; i++)
		n += rep->ranks[i].nsteps;
	nums = calloc(n + 1, sizeof(*nums));
	rep->rows = calloc(n + 1, sizeof(*rep->rows));
	if (!nums || !rep->rows) {
		free(nums);
		return -ENOMEM;
	}
	for (size_t i = 0; i < rep->nranks; i++)
		for (size_t j = 0; j < rep->ranks[i].nsteps; j++)
			nums[m++] = rep->ranks[i].steps[j].num;
	array_sort(nums, m, sizeof(*nums), cmp_u64p);
	for (size_t i = 0; i < m; i++) {
		if (!rep->nrows || rep->rows[rep->nrows - 1].num != nums[i])
			rep->rows[rep->nrows++].num = nums[i];
	}
	free(nums);
	return 0;
}

/*
 * The rank the others waited for in one step. In a collective every rank
 * waits in the communication kernel until the last one arrives, so the rank
 * that spent least time there is the one they waited for, and what each other
 * rank spent beyond it is its wait. A step without communication kernels on
 * any rank has no collective to wait in: there the longest step is the
 * slowest and each rank's wait is how much sooner its step ended.
 */
static void row_slowest(struct ranks_report *rep, struct ranks_row *row)
{
	const struct ranks_step *st, *slow = NULL;

	for (size_t i = 0; i < rep->nranks; i++) {
		uint64_t dur;

		if (!(st = ranks_report__step(rep, i, row->num)))
			continue;
		dur = st->end - st->start;
		row->by_comm |= st->comm_ns > 0;
		if (!row->nranks++ || dur < row->min_dur)
			row->min_dur = dur;
		if (dur > row->max_dur)
			row->max_dur = dur;
	}
	for (size_t i = 0; i < rep->nranks; i++) {
		if (!(st = ranks_report__step(rep, i, row->num)))
			continue;
		if (!slow || (row->by_comm ? st->comm_ns < slow->comm_ns
					   : st->end - st->start > slow->end - slow->start)) {
			slow = st;
			row->slowest = (uint32_t)i;
		}
	}
	for (size_t i = 0; i < rep->nranks; i++) {
		struct ranks_step *w = (struct ranks_step *)ranks_report__step(rep, i, row->num);

		if (!w)
			continue;
		w->wait_ns = row->by_comm ? w->comm_ns - slow->comm_ns
					  : (slow->end - slow->start) - (w->end - w->start);
		rep->ranks[i].waited_ns += w->wait_ns;
	}
	rep->ranks[row->slowest].slowest++;
}

int ranks_analyze(const char *who, char *const *paths, size_t n, const struct idle_opts *o,
		  struct ranks_report **out)
{
	struct ranks_report *rep;
	int err = 0;

	rep = calloc(1, sizeof(*rep));
	if (!rep || !(rep->ranks = calloc(n + 1, sizeof(*rep->ranks)))) {
		free(rep);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !err; i++) {
		rep->nranks++;
		err = read_rank(who, paths[i], o, &rep->ranks[i]);
	}
	if (!err) {
		err = assign_ranks(who, rep) ?: step_numbers(rep);
	}
	for (size_t i = 0; !err && i < rep->nrows; i++)
		row_slowest(rep, &rep->rows[i]);
	if (err) {
		if (err == -ENOMEM)
			pr_err("%s: %s", log_context(who), strerror(ENOMEM));
		ranks_report__free(rep);
		return err;
	}
	*out = rep;
	return 0;
}

void ranks_report__free(struct ranks_report *rep)
{
	if (!rep)
		return;
	for (size_t i = 0; i < rep->nranks; i++) {
		free(rep->ranks[i].path);
		free(rep->ranks[i].steps);
	}
	free(rep->ranks);
	free(rep->rows);
	free(rep);
}
