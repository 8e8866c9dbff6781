// SPDX-License-Identifier: MIT
/*
 * The report's off-CPU and CUDA-call sections, from a trace written here:
 * exact text for known records, nothing for a trace without them, and the
 * class of each CUDA API name. Both sections read the trace reader alone
 * (user/analysis/offcpu_report.c, cudacalls_report.c): no probe is loaded here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/cudacalls_report.h"
#include "analysis/offcpu_report.h"
#include "test.h"
#include "trace/cuda_api_class.h"
#include "trace/trace.h"

static void tmp_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/ptg-%s-%d.ptg", dir ? dir : "/tmp", name, getpid());
}

static int put(struct trace_writer *w, uint32_t kind, uint32_t tid, uint32_t sym, uint64_t dur,
	       int64_t aux0, int64_t aux1, int64_t aux3)
{
	struct ptg_record r = {.kind = kind, .pid = 100, .tid = tid, .sym = sym, .dur = dur};

	r.ts = 1000000000ull + tid;
	r.aux[0] = aux0;
	r.aux[1] = aux1;
	r.aux[3] = aux3;
	return trace_writer__record(w, &r);
}

/* Threads 101 and 102 with off-CPU intervals and CUDA calls; 104 named, never off-CPU. */
static int write_trace(const char *path, bool with_events)
{
	struct trace_writer *w;
	uint32_t main_s, worker_s, idle_s, launch, memcpy_s, sync;
	int err;

	err = trace_writer__open(path, &w);
	if (err)
		return err;
	main_s = trace_writer__sym(w, PTG_SYM_STRING, "main", NULL, 0);
	worker_s = trace_writer__sym(w, PTG_SYM_STRING, "worker", NULL, 0);
	idle_s = trace_writer__sym(w, PTG_SYM_STRING, "idle", NULL, 0);
	launch = trace_writer__sym(w, PTG_SYM_CUDA_API, "cuLaunchKernel", NULL, 0);
	memcpy_s = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaMemcpyAsync", NULL, 0);
	sync = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaStreamSynchronize", NULL, 0);
	err = put(w, PTG_REC_THREAD, 101, main_s, 0, 0, 0, 0);
	err = err ?: put(w, PTG_REC_THREAD, 102, worker_s, 0, 0, 0, 7);
	err = err ?: put(w, PTG_REC_THREAD, 104, idle_s, 0, 0, 0, 0);
	if (with_events) {
		err = err ?: put(w, PTG_REC_SCHED, 101, 0, 1500000000, PTG_SCHED_BLOCKED, 0, 0);
		err = err
			  ?: put(w, PTG_REC_SCHED, 101, 0, 500000000, PTG_SCHED_PREEMPTED,
				 250000000, 0);
		err = err ?: put(w, PTG_REC_SCHED, 102, 0, 2000000000, 0, 0, 0);
		for (int i = 0; i < 3; i++)
			err = err ?: put(w, PTG_REC_CUDA_CALL, 101, launch, 1000000, 0, 0, 0);
		err = err ?: put(w, PTG_REC_CUDA_CALL, 102, memcpy_s, 2500000, 0, 0, 0);
		err = err ?: put(w, PTG_REC_CUDA_CALL, 101, sync, 4000000, 0, 0, 0);
	}
	if (err) {
		trace_writer__abort(w);
		return err;
	}
	return trace_writer__close(w);
}

/* What report(r) prints, in a malloc'd string; NULL when it failed. */
static char *run(int (*report)(FILE *, struct trace_reader *), struct trace_reader *r)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	if (!f)
		return NULL;
	err = report(f, r);
	fclose(f);
	ASSERT_EQ(err, 0, "report returns 0");
	return buf;
}

static void test_reports(bool with_events)
{
	static const char offcpu[] =
	    "off-CPU time by thread:\n"
	    "  tid 101 \"main\": 2.000 s off-CPU in 2 intervals (blocked 1.500 s, preempted "
	    "0.500 s; run-queue wait 0.250 s)\n"
	    "  tid 102 (container tid 7) \"worker\": 2.000 s off-CPU in 1 intervals (blocked "
	    "0.000 s, preempted 0.000 s; run-queue wait 0.000 s)\n"
	    "\n";
	static const char cuda[] =
	    "CUDA calls: 5 from 2 threads (launch 3, graph 0, memcpy 1, memset 0, sync 1, "
	    "event 0, other 0)\n"
	    "  cuLaunchKernel                            3 calls          3.000 ms\n"
	    "  cudaMemcpyAsync                           1 calls          2.500 ms\n"
	    "  cudaStreamSynchronize                     1 calls          4.000 ms\n"
	    "\n";
	struct trace_reader *r;
	char path[256], err[256];
	char *out;

	tmp_path(path, sizeof(path), with_events ? "reports" : "reports-empty");
	if (!ASSERT_EQ(write_trace(path, with_events), 0, "write trace"))
		return;
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open trace")) {
		unlink(path);
		return;
	}
	/* twice each: every section rewinds the reader before reading */
	for (int pass = 0; pass < 2; pass++) {
		out = run(offcpu_report, r);
		ASSERT_STREQ(out, with_events ? offcpu : "", "off-CPU section");
		free(out);
		out = run(cudacalls_report, r);
		ASSERT_STREQ(out, with_events ? cuda : "", "CUDA-call section");
		free(out);
	}
	trace_reader__close(r);
	unlink(path);
}

static void test_classify(void)
{
	static const struct {
		const char *name;
		enum cuda_api_class cls;
	} cases[] = {
	    {"cuLaunchKernel", CUDA_API_LAUNCH},
	    {"cudaLaunchKernel", CUDA_API_LAUNCH},
	    {"cuGraphLaunch", CUDA_API_GRAPH},
	    {"cudaGraphLaunch", CUDA_API_GRAPH},
	    {"cuLaunchHostFunc", CUDA_API_OTHER},
	    {"cudaMemcpyAsync", CUDA_API_MEMCPY},
	    {"cuMemcpyHtoDAsync_v2", CUDA_API_MEMCPY},
	    {"cuMemsetD32Async", CUDA_API_MEMSET},
	    {"cudaStreamSynchronize", CUDA_API_SYNC},
	    {"cudaDeviceSynchronize", CUDA_API_SYNC},
	    {"cudaStreamWaitEvent", CUDA_API_SYNC},
	    {"cudaEventRecord", CUDA_API_EVENT},
	    {"cudaMalloc", CUDA_API_OTHER},
	    {"", CUDA_API_OTHER},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ASSERT_EQ(cuda_api_classify(cases[i].name), cases[i].cls, cases[i].name);
}

int main(void)
{
	test_reports(true);
	test_reports(false);
	test_classify();
	return TEST_DONE();
}
