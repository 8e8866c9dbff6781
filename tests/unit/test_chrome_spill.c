// SPDX-License-Identifier: MIT
/*
 * The Chrome export in bounded memory (chrome_sort.c): events spilled in
 * sorted runs and merged give the bytes of one sort in memory, ties included
 * (equal starts and durations across threads and between a span and its
 * child, a frame open to the end, GPU records that arrive late, metadata in
 * the middle), on a synthetic recorded trace and on the Kineto traces of
 * PTG_SHARED_DIR; and a long trace is exported within a bound of peak RSS
 * that holding every event would pass.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "import/kineto.h"
#include "chrome/chrome.h"
#include "chrome/chrome_export.h"
#include "test.h"
#include "trace/trace.h"

#define PID	 300
#define NTHREADS 3
#define NFUNCS	 50
#define GPU_LAG	 64 /* iterations whose kernels are written late, at once */
/* peak RSS of a whole export of the long trace: its events alone are well over it */
#define RSS_BOUND_KB (64 * 1024)
#define LONG_ITERS   60000

static void gpu_batch(struct trace_writer *w, uint32_t kern, uint64_t from, uint64_t to)
{
	struct ptg_record k = {.kind = PTG_REC_GPU_KERNEL, .pid = PID, .sym = kern, .device = 0};
	uint64_t i;

	for (i = from; i < to; i++) {
		k.ts = 1000000 + i * 1000 + 700;
		k.dur = 250;
		k.stream = 7;
		k.corr = i + 1;
		trace_writer__record(w, &k);
	}
}

/* n iterations of NTHREADS threads in step: every span's start is shared by all of them. */
static void write_synth(struct trace_writer *w, uint64_t n)
{
	uint32_t mod = trace_writer__sym(w, PTG_SYM_PY_FUNC, "<module>", "app.py", 1);
	uint32_t op = trace_writer__sym(w, PTG_SYM_OP, "aten::mm", "", 0);
	uint32_t api = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaLaunchKernel", "", 0);
	uint32_t kern = trace_writer__sym(w, PTG_SYM_KERNEL, "gemm", "", 0);
	uint32_t step = trace_writer__sym(w, PTG_SYM_STRING, "ProfilerStep#1", "", 0);
	uint32_t tname = trace_writer__sym(w, PTG_SYM_STRING, "worker", "", 0);
	uint32_t funcs[NFUNCS];
	uint64_t i, last_gpu = 0;
	unsigned int t, f;
	char name[32];

	trace_writer__meta(w, "source", "ptrace-gpu record");
	for (f = 0; f < NFUNCS; f++) {
		snprintf(name, sizeof(name), "f%u", f);
		funcs[f] = trace_writer__sym(w, PTG_SYM_PY_FUNC, name, "app.py", 10 + f);
	}
	for (t = 0; t < NTHREADS; t++)
		trace_writer__record(w, &(struct ptg_record){.kind = PTG_REC_PY_ENTER,
							     .pid = PID,
							     .tid = PID + t,
							     .sym = mod,
							     .ts = 1000000});
	for (i = 0; i < n; i++) {
		uint64_t ts = 1000000 + i * 1000;

		for (t = 0; t < NTHREADS; t++) {
			struct ptg_record r = {.pid = PID, .tid = PID + t, .ts = ts};

			r.kind = PTG_REC_PY_ENTER;
			r.sym = funcs[(i + t) % NFUNCS];
			trace_writer__record(w, &r);
			/* the op starts and ends with its frame: equal keys, made op first */
			r.kind = PTG_REC_OP_ENTER;
			r.sym = op;
			trace_writer__record(w, &r);
			if (t == 0) {
				r.kind = PTG_REC_CUDA_CALL;
				r.sym = api;
				r.ts = ts + 100;
				r.dur = 200;
				r.corr = i + 1;
				trace_writer__record(w, &r);
				r.dur = 0;
				r.corr = 0;
			}
			r.kind = PTG_REC_OP_EXIT;
			r.sym = 0;
			r.ts = ts + 500;
			trace_writer__record(w, &r);
			r.kind = PTG_REC_PY_EXIT;
			trace_writer__record(w, &r);
			if (i % 7 == t) {
				r.kind = PTG_REC_SCHED;
				r.ts = ts + 500;
				r.dur = 400;
				r.aux[0] = PTG_SCHED_BLOCKED;
				trace_writer__record(w, &r);
			}
		}
		if (i % 50 == 0)
			trace_writer__record(w, &(struct ptg_record){.kind = PTG_REC_SPAN,
								     .pid = PID,
								     .tid = PID,
								     .sym = step,
								     .ts = ts,
								     .dur = 50000});
		if (i % 1000 == 999)
			trace_writer__record(w, &(struct ptg_record){.kind = PTG_REC_THREAD,
								     .pid = PID,
								     .tid = PID + 1,
								     .sym = tname,
								     .ts = ts});
		if (i + 1 - last_gpu >= GPU_LAG) {
			gpu_batch(w, kern, last_gpu, i + 1);
			last_gpu = i + 1;
		}
	}
	gpu_batch(w, kern, last_gpu, n);
	/* the <module> frames never return: closed at the end, made last, written first */
}

static int make_trace(const char *ptg, uint64_t n)
{
	struct trace_writer *w;

	if (!ASSERT_EQ(trace_writer__open(ptg, &w), 0, "writer"))
		return -1;
	write_synth(w, n);
	return ASSERT_EQ(trace_writer__close(w), 0, "close") ? 0 : -1;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (text && fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		text = NULL;
	}
	fclose(f);
	*len = text ? (size_t)n : 0;
	return text;
}

/* Exports ptg to json in memory and in runs of run_bytes: the same bytes. */
static void check_same(const char *what, const char *ptg, const char *json, size_t run_bytes)
{
	char err[256], saved[4200];
	struct trace_reader *r;
	size_t alen, blen;
	char *a, *b;

	snprintf(saved, sizeof(saved), "%s.mem", json);
	if (!ASSERT_EQ(trace_reader__open(ptg, &r, err, sizeof(err)), 0, what))
		return;
	/* the same output path both times: it is written into the output as traceName */
	ASSERT_EQ(chrome_export_runs(r, json, SIZE_MAX), 0, what);
	rename(json, saved);
	trace_reader__rewind(r);
	ASSERT_EQ(chrome_export_runs(r, json, run_bytes), 0, what);
	trace_reader__close(r);
	a = slurp(saved, &alen);
	b = slurp(json, &blen);
	if (ASSERT_TRUE(a && b, what)) {
		ASSERT_EQ(blen, alen, what);
		ASSERT_TRUE(alen == blen && !memcmp(a, b, alen), what);
		/* and it was a merge of many runs */
		ASSERT_TRUE(alen > 20 * run_bytes, what);
	}
	free(a);
	free(b);
	unlink(saved);
	unlink(json);
}

static void check_kineto(const char *dir, const char *json)
{
	static const char *const names[] = {"alexnet_1gpu", "sampled_rank0", "train_rank0"};
	char src[4096], ptg[4200];
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(src, sizeof(src), "%s/traces/kineto/%s.json.gz", dir, names[i]);
		if (stat(src, &st)) {
			printf("skip %s: not there\n", src);
			continue;
		}
		snprintf(ptg, sizeof(ptg), "%s.%s.ptg", json, names[i]);
		if (ASSERT_EQ(kineto_import(src, ptg, NULL), 0, names[i]))
			check_same(names[i], ptg, json, 4096);
		unlink(ptg);
	}
}

/* Peak RSS (KiB) of a child that exports ptg to json in runs of run_bytes; -1 when it fails. */
static long export_rss(const char *ptg, const char *json, size_t run_bytes)
{
	struct rusage ru;
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct trace_reader *r;
		char err[256];

		if (trace_reader__open(ptg, &r, err, sizeof(err)))
			_exit(2);
		_exit(chrome_export_runs(r, json, run_bytes) ? 3 : 0);
	}
	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return -1;
	return ru.ru_maxrss;
}

static void check_rss(const char *ptg, const char *json)
{
	struct stat st;
	long kb;

	if (make_trace(ptg, LONG_ITERS))
		return;
	kb = export_rss(ptg, json, CHROME_RUN_BYTES);
	ASSERT_TRUE(kb > 0, "export of the long trace");
	printf("long trace: %ld KiB peak RSS\n", kb);
	ASSERT_TRUE(kb < RSS_BOUND_KB, "peak RSS under the bound");
	if (ASSERT_EQ(stat(json, &st), 0, "output"))
		printf("long trace: %lld bytes of JSON\n", (long long)st.st_size);
	/* what the bound means: holding every event in memory (one run) passes it */
	kb = export_rss(ptg, json, SIZE_MAX);
	printf("long trace in one run: %ld KiB peak RSS\n", kb);
	ASSERT_TRUE(kb > RSS_BOUND_KB, "one run over the bound");
	unlink(json);
}

int main(void)
{
	const char *shared = getenv("PTG_SHARED_DIR");
	char ptg[] = "/tmp/test_chrome_spill_XXXXXX", json[64];
	int fd = mkstemp(ptg);

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return TEST_DONE();
	close(fd);
	snprintf(json, sizeof(json), "%s.json", ptg);
	check_rss(ptg, json);
	if (!make_trace(ptg, 6000)) {
		check_same("synthetic", ptg, json, 16 * 1024);
		/* a run per record: more runs than one merge takes, merged by groups first */
		check_same("synthetic, merged twice", ptg, json, 1);
	}
	if (shared)
		check_kineto(shared, json);
	unlink(ptg);
	return TEST_DONE();
}
