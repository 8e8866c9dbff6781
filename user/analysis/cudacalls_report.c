// SPDX-License-Identifier: MIT
/*
 * CUDA calls by class and by API: the report of the PTG_REC_CUDA_CALL
 * records that user/cuda/cuda.c writes (docs/cuda-sched.md), read back
 * through the trace reader only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "analysis/cudacalls_report.h"
#include "base/u64map.h"
#include "trace/cuda_api_class.h"

static const char *const class_names[CUDA_API_NR_CLASSES] = {
    [CUDA_API_LAUNCH] = "launch", [CUDA_API_GRAPH] = "graph", [CUDA_API_MEMCPY] = "memcpy",
    [CUDA_API_MEMSET] = "memset", [CUDA_API_SYNC] = "sync",   [CUDA_API_EVENT] = "event",
    [CUDA_API_OTHER] = "other",
};

struct api_total {
	uint32_t sym;
	uint64_t calls;
	uint64_t ns;
};

struct cuda_totals {
	struct api_total *by_sym; /* indexed by symbol id */
	size_t nsyms;
	uint64_t calls;
	uint64_t by_class[CUDA_API_NR_CLASSES];
	struct u64map tids;
};

static int cmp_total(const void *pa, const void *pb)
{
	const struct api_total *a = pa, *b = pb;

	if (a->calls != b->calls)
		return a->calls < b->calls ? 1 : -1;
	return (a->sym > b->sym) - (a->sym < b->sym);
}

static int totals_add(struct cuda_totals *c, const struct trace_reader *r,
		      const struct ptg_record *rec)
{
	const struct ptg_sym *s = trace_reader__sym(r, rec->sym);

	if (!s || rec->sym > c->nsyms)
		return 0;
	c->calls++;
	c->by_class[cuda_api_classify(s->name)]++;
	c->by_sym[rec->sym].sym = rec->sym;
	c->by_sym[rec->sym].calls++;
	c->by_sym[rec->sym].ns += rec->dur;
	return u64map__put(&c->tids, (uint64_t)rec->pid << 32 | rec->tid | 1ull << 63, 1);
}

static void totals_print(FILE *out, struct cuda_totals *c, const struct trace_reader *r)
{
	fprintf(out, "CUDA calls: %" PRIu64 " from %zu thread%s (", c->calls, c->tids.len,
		c->tids.len == 1 ? "" : "s");
	for (int k = 0; k < CUDA_API_NR_CLASSES; k++)
		fprintf(out, "%s%s %" PRIu64, k ? ", " : "", class_names[k], c->by_class[k]);
	fprintf(out, ")\n");
	qsort(c->by_sym, c->nsyms + 1, sizeof(*c->by_sym), cmp_total);
	for (size_t i = 0; i <= c->nsyms && c->by_sym[i].calls; i++)
		fprintf(out, "  %-32s %10" PRIu64 " calls %14.3f ms\n",
			trace_reader__sym(r, c->by_sym[i].sym)->name, c->by_sym[i].calls,
			c->by_sym[i].ns / 1e6);
	fprintf(out, "\n");
}

int cudacalls_report(FILE *out, struct trace_reader *r)
{
	struct cuda_totals c = {.nsyms = trace_reader__nsyms(r)};
	struct ptg_record rec;
	int err;

	c.by_sym = calloc(c.nsyms + 1, sizeof(*c.by_sym));
	if (!c.by_sym)
		return -ENOMEM;
	err = trace_reader__rewind(r);
	while (!err && (err = trace_reader__next(r, &rec)) > 0)
		err = rec.kind == PTG_REC_CUDA_CALL ? totals_add(&c, r, &rec) : 0;
	if (!err && c.calls)
		totals_print(out, &c, r);
	free(c.by_sym);
	u64map__free(&c.tids);
	return err;
}
