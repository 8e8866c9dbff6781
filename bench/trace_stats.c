// SPDX-License-Identifier: MIT
/*
 * Counts what a trace holds, through the project's trace reader: records by
 * kind, losses, file size. The benchmark uses it to tell whether a recording
 * has op, CUDA or scheduler records and to compute bytes per record, without
 * printing millions of lines through `ptrace-gpu dump`.
 *
 *   cc -O2 -D_GNU_SOURCE -Iuser bench/trace_stats.c user/trace/trace_reader.c \
 *      -lz -lzstd -o trace_stats
 *   trace_stats TRACE.ptg
 *
 * Prints one JSON object: bytes, records, a count per kind, and the loss
 * counters by what was lost, summed over CPUs (a `*_event` counter is events
 * dropped because a ring buffer was full; others are e.g. names that could
 * not be read).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "trace/trace.h"

#define MAX_KIND 64

static const char *kind_name(unsigned int kind)
{
	static const char *const names[] = {
	    [PTG_REC_PY_ENTER] = "py_enter",
	    [PTG_REC_PY_EXIT] = "py_exit",
	    [PTG_REC_OP_ENTER] = "op_enter",
	    [PTG_REC_OP_EXIT] = "op_exit",
	    [PTG_REC_SPAN] = "span",
	    [PTG_REC_CUDA_CALL] = "cuda_call",
	    [PTG_REC_GPU_KERNEL] = "gpu_kernel",
	    [PTG_REC_GPU_MEMCPY] = "gpu_memcpy",
	    [PTG_REC_GPU_MEMSET] = "gpu_memset",
	    [PTG_REC_GPU_SYNC] = "gpu_sync",
	    [PTG_REC_SCHED] = "sched",
	    [PTG_REC_SAMPLE] = "sample",
	    [PTG_REC_THREAD] = "thread",
	    [PTG_REC_FLOW] = "flow",
	};

	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : NULL;
}

/* Loss counters by name, summed over CPUs; the reader keeps one entry per (what, cpu). */
static void print_losses(const struct trace_reader *r)
{
	const struct ptg_loss *l;
	size_t n, i, j;
	uint64_t sum;

	l = trace_reader__losses(r, &n);
	printf(", \"losses\": {");
	for (i = 0; i < n; i++) {
		for (j = 0; j < i && strcmp(l[j].what, l[i].what); j++)
			;
		if (j < i)
			continue; /* printed with its first entry */
		for (sum = 0, j = i; j < n; j++)
			sum += strcmp(l[j].what, l[i].what) ? 0 : l[j].count;
		printf("%s\"%.*s\": %" PRIu64, i ? ", " : "", (int)sizeof(l[i].what), l[i].what,
		       sum);
	}
	printf("}");
}

static void print_stats(const char *path, off_t bytes, const uint64_t *kinds, uint64_t records)
{
	const char *name;
	unsigned int k;
	bool first = true;

	printf("{\"path\": \"%s\", \"bytes\": %lld, \"records\": %" PRIu64 ", \"kinds\": {", path,
	       (long long)bytes, records);
	for (k = 0; k < MAX_KIND; k++) {
		if (!kinds[k])
			continue;
		name = kind_name(k);
		if (name)
			printf("%s\"%s\": %" PRIu64, first ? "" : ", ", name, kinds[k]);
		else
			printf("%s\"kind_%u\": %" PRIu64, first ? "" : ", ", k, kinds[k]);
		first = false;
	}
	printf("}");
}

int main(int argc, char **argv)
{
	uint64_t kinds[MAX_KIND] = {0}, records = 0;
	struct trace_reader *r;
	struct ptg_record rec;
	struct stat st;
	char err[256];
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: trace_stats TRACE.ptg\n");
		return 2;
	}
	if (stat(argv[1], &st) || trace_reader__open(argv[1], &r, err, sizeof(err))) {
		fprintf(stderr, "trace_stats: %s: cannot read the trace\n", argv[1]);
		return 1;
	}
	while ((ret = trace_reader__next(r, &rec)) > 0) {
		kinds[rec.kind < MAX_KIND ? rec.kind : 0]++;
		records++;
	}
	if (ret < 0) {
		fprintf(stderr, "trace_stats: %s: %s\n", argv[1], trace_reader__error(r));
		trace_reader__close(r);
		return 1;
	}
	print_stats(argv[1], st.st_size, kinds, records);
	print_losses(r);
	printf("}\n");
	trace_reader__close(r);
	return 0;
}
