// SPDX-License-Identifier: MIT
/*
 * Reading a trace's CUDA links back (cudajoin.h): the join flows record wrote
 * and, for export, the cbids and External ids they carry to other records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/cudajoin.h"

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
		pr_err("%s", trace_reader__error(r));
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

	switch (rec->kind) {
	case PTG_REC_GPU_KERNEL:
	case PTG_REC_GPU_MEMCPY:
	case PTG_REC_GPU_MEMSET:
		return rec->corr ? u64map__put(&l->gpu, rec->corr, 1) : 0;
	default:
		break;
	}

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
	const char *agents = trace_reader__meta(r, "cupti.version");
	struct u64map host_ext = {};
	struct ptg_record rec;
	int err;

	/*
	 * Only probed calls know their op, and only join flows link them to
	 * CUPTI's ids; a trace with an agent's records is read for its GPU ops'
	 * ids as well. Any other is read once, not twice.
	 */
	l->gpu_known = agents && agents[0];
	if (!l->gpu_known && (!joined || !strtoull(joined, NULL, 10)))
		return trace_reader__rewind(r);
	err = trace_reader__rewind(r);
	while (!err && (err = trace_reader__next(r, &rec)) > 0)
		err = link_record(l, &host_ext, &rec);
	u64map__free(&host_ext);
	if (err < 0 && err != -ENOMEM)
		pr_err("%s", trace_reader__error(r));
	return err ?: trace_reader__rewind(r);
}

void cuda_links_free(struct cuda_links *l)
{
	u64map__free(&l->joins);
	u64map__free(&l->cbids);
	u64map__free(&l->exts);
	u64map__free(&l->gpu);
}

bool cuda_links_launched(const struct cuda_links *l, uint64_t corr)
{
	return !l->gpu_known || u64map__get(&l->gpu, corr);
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
