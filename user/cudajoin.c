// SPDX-License-Identifier: MIT
/* Matching CUPTI's API records to the uprobes' host calls, and reading the links back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudajoin.h"

/* Length of name without its trailing _vN, _ptsz and _ptds suffixes, in any order. */
static size_t base_len(const char *name)
{
	size_t len = strlen(name), i;

	for (;;) {
		if (len > 5 && (!strncmp(name + len - 5, "_ptsz", 5) ||
				!strncmp(name + len - 5, "_ptds", 5))) {
			len -= 5;
			continue;
		}
		for (i = len; i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9'; i--)
			;
		if (i < len && i > 2 && name[i - 1] == 'v' && name[i - 2] == '_') {
			len = i - 2;
			continue;
		}
		return len;
	}
}

bool cuda_api_same(const char *a, const char *b)
{
	size_t la = base_len(a), lb = base_len(b);

	return la == lb && !strncmp(a, b, la);
}

/* How far c sticks out of h: 0 when h encloses it. */
static uint64_t overhang(const struct cuda_host_call *h, const struct cuda_cupti_call *c)
{
	return (h->start > c->start ? h->start - c->start : 0) +
	       (c->end > h->end ? c->end - h->end : 0);
}

long cuda_join_find(const struct cuda_host_call *calls, size_t n, const struct cuda_cupti_call *c)
{
	uint64_t tol = CUDA_JOIN_TOLERANCE_NS, best_out = UINT64_MAX, best_dur = UINT64_MAX;
	size_t lo = 0, hi = n, i;
	long best = -1;

	if (c->end < c->start)
		return -1;
	/* the first call that ends late enough to enclose c */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (calls[mid].end + tol < c->end)
			lo = mid + 1;
		else
			hi = mid;
	}
	/*
	 * Calls nest, so one returning later that starts after c ended cannot
	 * hold c except around that later call, and the one that holds c
	 * returned before it.
	 */
	for (i = lo; i < n && calls[i].start <= c->end + tol; i++) {
		const struct cuda_host_call *h = &calls[i];
		uint64_t out, dur;

		/* CUPTI's start, taken inside the function, is inside the call */
		if (h->joined || h->driver != c->driver || h->start > c->start + tol ||
		    c->start > h->end || !cuda_api_same(h->name, c->name))
			continue;
		out = overhang(h, c);
		dur = h->end - h->start;
		if (out > best_out || (out == best_out && dur >= best_dur))
			continue;
		best = (long)i;
		best_out = out;
		best_dur = dur;
	}
	return best;
}

#define JOIN_META "cupti.api_joined"

int cuda_join_load(struct trace_reader *r, struct u64map *m)
{
	const char *joined = trace_reader__meta(r, JOIN_META);
	struct ptg_record rec;
	int err;

	/*
	 * A trace without join flows is read once, not twice. The count is
	 * written at the end: a trace cut before it may have flows all the same.
	 */
	if (joined ? !strtoull(joined, NULL, 10) : !trace_reader__cut(r, NULL, NULL))
		return trace_reader__rewind(r);
	err = trace_reader__rewind(r);
	while (!err && (err = trace_reader__next(r, &rec)) > 0)
		err = cuda_join_is_flow(&rec) ? u64map__put(m, (uint64_t)rec.aux[3], rec.corr) : 0;
	if (err < 0 && err != -ENOMEM)
		fprintf(stderr, "ptrace-gpu: %s\n", trace_reader__error(r));
	return err ?: trace_reader__rewind(r);
}

uint64_t cuda_join_corr(const struct u64map *m, const struct ptg_record *rec)
{
	uint64_t *corr;

	if (rec->corr || rec->kind != PTG_REC_CUDA_CALL || rec->aux[3] <= 0)
		return rec->corr;
	corr = u64map__get(m, (uint64_t)rec->aux[3]);
	return corr ? *corr : 0;
}

static int link_record(struct cuda_links *l, struct u64map *host_ext, const struct ptg_record *rec)
{
	uint64_t *ext;

	if (cuda_join_is_flow(rec)) {
		if (u64map__put(&l->joins, (uint64_t)rec->aux[3], rec->corr) ||
		    (rec->aux[2] > 0 &&
		     u64map__put(&l->cbids, (uint64_t)rec->aux[3], (uint64_t)rec->aux[2])))
			return -ENOMEM;
		/* record writes a join flow after its call, whose op is known by then */
		ext = u64map__get(host_ext, (uint64_t)rec->aux[3]);
		return ext ? u64map__put(&l->exts, rec->corr, *ext) : 0;
	}
	if (rec->kind != PTG_REC_CUDA_CALL || !rec->ext)
		return 0;
	if (rec->corr)
		return u64map__put(&l->exts, rec->corr, rec->ext);
	return rec->aux[3] > 0 ? u64map__put(host_ext, (uint64_t)rec->aux[3], rec->ext) : 0;
}

int cuda_links_load(struct trace_reader *r, struct cuda_links *l)
{
	const char *joined = trace_reader__meta(r, JOIN_META);
	struct u64map host_ext = {};
	struct ptg_record rec;
	int err;

	/* only probed calls know their op, and only join flows link them to CUPTI's ids */
	if (!joined || !strtoull(joined, NULL, 10))
		return trace_reader__rewind(r);
	err = trace_reader__rewind(r);
	while (!err && (err = trace_reader__next(r, &rec)) > 0)
		err = link_record(l, &host_ext, &rec);
	u64map__free(&host_ext);
	if (err < 0 && err != -ENOMEM)
		fprintf(stderr, "ptrace-gpu: %s\n", trace_reader__error(r));
	return err ?: trace_reader__rewind(r);
}

void cuda_links_free(struct cuda_links *l)
{
	u64map__free(&l->joins);
	u64map__free(&l->cbids);
	u64map__free(&l->exts);
}

uint64_t cuda_links_ext(const struct cuda_links *l, uint64_t corr)
{
	uint64_t *ext = corr ? u64map__get(&l->exts, corr) : NULL;

	return ext ? *ext : 0;
}

uint64_t cuda_links_cbid(const struct cuda_links *l, const struct ptg_record *rec)
{
	uint64_t *cbid;

	if (rec->aux[0] > 0 || rec->kind != PTG_REC_CUDA_CALL || rec->aux[3] <= 0)
		return rec->aux[0] > 0 ? (uint64_t)rec->aux[0] : 0;
	cbid = u64map__get(&l->cbids, (uint64_t)rec->aux[3]);
	return cbid ? *cbid : 0;
}
