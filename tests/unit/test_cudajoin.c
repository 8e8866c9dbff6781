// SPDX-License-Identifier: MIT
/* Matching CUPTI's API records to probed host calls, and resolving ids through join flows. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/cudajoin.h"
#include "test.h"

#define TOL CUDA_JOIN_TOLERANCE_NS

static long find(const struct cuda_host_call *calls, size_t n, const char *name, bool driver,
		 uint64_t start, uint64_t end)
{
	struct cuda_cupti_call c = {.name = name, .driver = driver, .start = start, .end = end};

	return cuda_join_find(calls, n, &c);
}

static void test_names(void)
{
	ASSERT_TRUE(cuda_api_same("cudaLaunchKernel", "cudaLaunchKernel_v7000"), "version");
	ASSERT_TRUE(cuda_api_same("cudaLaunchKernel_ptsz", "cudaLaunchKernel_ptsz_v7000"), "ptsz");
	ASSERT_TRUE(cuda_api_same("cuLaunchKernel_ptsz", "cuLaunchKernel"), "ptsz dropped");
	ASSERT_TRUE(cuda_api_same("cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync"), "v2 ptsz");
	ASSERT_TRUE(cuda_api_same("cudaMemcpy_ptds", "cudaMemcpy"), "ptds");
	ASSERT_TRUE(cuda_api_same("cuCtxSynchronize_v2", "cuCtxSynchronize"), "v2");
	ASSERT_TRUE(!cuda_api_same("cuLaunchKernel", "cuLaunchKernelEx"), "prefix only");
	ASSERT_TRUE(!cuda_api_same("cuLaunchKernel", "cudaLaunchKernel"), "driver vs runtime");
	ASSERT_TRUE(!cuda_api_same("cudaMemcpy", "cudaMemcpyAsync"), "async");
	ASSERT_TRUE(!cuda_api_same("cuMemcpy_v", "cuMemcpy"), "_v without digits stays");
}

static void test_tolerance(void)
{
	struct cuda_host_call h[] = {
	    {.start = 10000, .end = 20000, .id = 1, .name = "cudaLaunchKernel"},
	};

	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 11000, 19000), 0, "inside");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 10000, 20000), 0, "same interval");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 10000 - TOL, 20000 + TOL), 0,
		  "out by the tolerance at both ends");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 10000 - TOL - 1, 19000), -1,
		  "starts one ns too early");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 11000, 20000 + TOL + 1), -1,
		  "ends one ns too late");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", true, 11000, 19000), -1, "driver record");
	ASSERT_EQ(find(h, 1, "cudaMemcpyAsync", false, 11000, 19000), -1, "other API");
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 19000, 11000), -1, "end before start");
	ASSERT_EQ(find(h, 0, "cudaLaunchKernel", false, 11000, 19000), -1, "no calls");
	h[0].joined = true;
	ASSERT_EQ(find(h, 1, "cudaLaunchKernel", false, 11000, 19000), -1, "joined already");
}

/* cudaLaunchKernel -> cuLaunchKernel, twice, then a driver call of its own. */
static void test_nested(void)
{
	struct cuda_host_call h[] = {
	    {.start = 1100, .end = 1900, .id = 2, .name = "cuLaunchKernel", .driver = true},
	    {.start = 1000, .end = 2000, .id = 1, .name = "cudaLaunchKernel"},
	    {.start = 5100, .end = 5900, .id = 4, .name = "cuLaunchKernel", .driver = true},
	    {.start = 5000, .end = 6000, .id = 3, .name = "cudaLaunchKernel"},
	    {.start = 9000, .end = 9500, .id = 5, .name = "cuLaunchKernel_ptsz", .driver = true},
	};
	size_t n = sizeof(h) / sizeof(h[0]);

	ASSERT_EQ(find(h, n, "cudaLaunchKernel", false, 1050, 1950), 1, "runtime record, first");
	ASSERT_EQ(find(h, n, "cuLaunchKernel", true, 1150, 1850), 0, "driver record, first");
	ASSERT_EQ(find(h, n, "cudaLaunchKernel", false, 5050, 5950), 3, "runtime record, second");
	ASSERT_EQ(find(h, n, "cuLaunchKernel", true, 5200, 5800), 2, "driver record, second");
	ASSERT_EQ(find(h, n, "cuLaunchKernel_ptsz", true, 9100, 9400), 4, "ptsz driver call");
	ASSERT_EQ(find(h, n, "cuLaunchKernel", true, 3000, 3500), -1, "between the calls");
}

/*
 * Two same-name calls with nothing between but the uprobes' cost, nearer
 * than the tolerance: the one that encloses the record wins; and of two that
 * enclose it (recursion through an interposer), the inner one.
 */
static void test_neighbours(void)
{
	struct cuda_host_call h[] = {
	    {.start = 1000, .end = 2000, .id = 1, .name = "cuLaunchKernel", .driver = true},
	    {.start = 2500, .end = 3500, .id = 2, .name = "cuLaunchKernel", .driver = true},
	};
	struct cuda_host_call nest[] = {
	    {.start = 1200, .end = 1800, .id = 2, .name = "cuLaunchKernel", .driver = true},
	    {.start = 1000, .end = 2000, .id = 1, .name = "cuLaunchKernel", .driver = true},
	};

	ASSERT_EQ(find(h, 2, "cuLaunchKernel", true, 1100, 1900), 0, "first");
	ASSERT_EQ(find(h, 2, "cuLaunchKernel", true, 2600, 3400), 1, "second");
	ASSERT_EQ(find(h, 2, "cuLaunchKernel", true, 3600, 3700), -1, "after both");
	ASSERT_EQ(find(h, 2, "cuLaunchKernel", true, 2400, 3400), 1, "early: the nearer one");
	ASSERT_EQ(find(nest, 2, "cuLaunchKernel", true, 1300, 1700), 0, "innermost");
	nest[0].joined = true;
	ASSERT_EQ(find(nest, 2, "cuLaunchKernel", true, 1100, 1900), 1, "then the outer");
}

/* Many calls: the binary search must not skip the one that matches. */
static void test_long_history(void)
{
	enum { N = 3000 };
	struct cuda_host_call *h = calloc(N, sizeof(*h));

	if (!ASSERT_TRUE(h != NULL, "alloc"))
		return;
	for (int i = 0; i < N; i++)
		h[i] = (struct cuda_host_call){.start = 10000ull * i,
					       .end = 10000ull * i + 5000,
					       .id = (uint64_t)i + 1,
					       .name = "cudaMemcpyAsync"};
	ASSERT_EQ(
	    find(h, N, "cudaMemcpyAsync", false, 10000ull * 1234 + 100, 10000ull * 1234 + 4900),
	    1234, "middle");
	ASSERT_EQ(find(h, N, "cudaMemcpyAsync", false, 100, 4900), 0, "first");
	ASSERT_EQ(find(h, N, "cudaMemcpyAsync", false, 10000ull * (N - 1) + 100,
		       10000ull * (N - 1) + 4900),
		  N - 1, "last");
	free(h);
}

/* A probed call, its kernel, then the join flow: the call resolves to the kernel's id. */
static void test_load(void)
{
	char path[] = "/tmp/test_cudajoin.XXXXXX";
	struct ptg_record call = {.kind = PTG_REC_CUDA_CALL,
				  .pid = 7,
				  .tid = 8,
				  .ts = 100,
				  .dur = 50,
				  .aux = {0, 0, 0, 42}};
	struct ptg_record kernel = {
	    .kind = PTG_REC_GPU_KERNEL, .pid = 7, .ts = 200, .dur = 10, .corr = 9};
	struct ptg_record flow = {
	    .kind = PTG_REC_FLOW, .pid = 7, .tid = 8, .ts = 100, .corr = 9, .aux = {0, 0, 211, 42}};
	struct ptg_record kineto_flow = {
	    .kind = PTG_REC_FLOW, .ts = 100, .corr = 5, .aux = {'s', 0, 0, 43}};
	struct ptg_record other = call, rec;
	struct trace_writer *w;
	struct trace_reader *r;
	struct u64map m = {};
	int fd = mkstemp(path), err;

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return;
	close(fd);
	other.aux[3] = 43;
	err = trace_writer__open(path, &w);
	err = err ?: trace_writer__meta(w, "cupti.api_joined", "1");
	err = err ?: trace_writer__record(w, &call);
	err = err ?: trace_writer__record(w, &other);
	err = err ?: trace_writer__record(w, &kernel);
	err = err ?: trace_writer__record(w, &flow);
	err = err ?: trace_writer__record(w, &kineto_flow);
	err = err ?: trace_writer__close(w);
	ASSERT_EQ(err, 0, "write");
	err = trace_reader__open(path, &r, NULL, 0);
	if (!ASSERT_EQ(err, 0, "open"))
		goto cleanup;
	ASSERT_EQ(cuda_join_load(r, &m), 0, "load");
	ASSERT_EQ(m.len, 1, "one join flow");
	ASSERT_EQ(cuda_join_corr(&m, &call), 9, "host call -> corr");
	ASSERT_EQ(cuda_join_corr(&m, &other), 0, "not joined");
	ASSERT_EQ(cuda_join_corr(&m, &kernel), 9, "kernel keeps its own");
	ASSERT_EQ(trace_reader__next(r, &rec), 1, "rewound");
	ASSERT_EQ(rec.kind, PTG_REC_CUDA_CALL, "first record again");
	trace_reader__close(r);
cleanup:
	u64map__free(&m);
	unlink(path);
}

/*
 * cupti.api_joined is written at the end: without it a complete trace has no
 * join flows, a truncated one may have them and is read for them.
 */
static void test_load_truncated(void)
{
	char path[] = "/tmp/test_cudajoin.XXXXXX";
	struct ptg_record call = {.kind = PTG_REC_CUDA_CALL,
				  .pid = 7,
				  .tid = 8,
				  .ts = 100,
				  .dur = 50,
				  .aux = {0, 0, 0, 42}};
	struct ptg_record flow = {
	    .kind = PTG_REC_FLOW, .pid = 7, .tid = 8, .ts = 100, .corr = 9, .aux = {0, 0, 211, 42}};
	struct trace_writer *w;
	struct trace_reader *r;
	struct u64map m = {};
	int fd = mkstemp(path), err;
	struct stat st;

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return;
	close(fd);
	err = trace_writer__open(path, &w);
	err = err ?: trace_writer__record(w, &call);
	err = err ?: trace_writer__record(w, &flow);
	err = err ?: trace_writer__close(w);
	ASSERT_EQ(err, 0, "write");
	if (!ASSERT_EQ(trace_reader__open(path, &r, NULL, 0), 0, "open whole"))
		goto cleanup;
	ASSERT_EQ(cuda_join_load(r, &m), 0, "load whole");
	ASSERT_EQ(m.len, 0, "no count, no flows read");
	trace_reader__close(r);
	/* one byte less: the end marker is cut, the records are whole */
	if (!ASSERT_EQ(stat(path, &st) ?: truncate(path, st.st_size - 1), 0, "truncate") ||
	    !ASSERT_EQ(trace_reader__open(path, &r, NULL, 0), 0, "open cut"))
		goto cleanup;
	ASSERT_TRUE(trace_reader__cut(r, NULL, NULL), "cut");
	ASSERT_EQ(cuda_join_load(r, &m), 0, "load cut");
	ASSERT_EQ(m.len, 1, "the flow of a cut trace read");
	ASSERT_EQ(cuda_join_corr(&m, &call), 9, "host call -> corr");
	trace_reader__close(r);
cleanup:
	u64map__free(&m);
	unlink(path);
}

int main(void)
{
	test_names();
	test_tolerance();
	test_nested();
	test_neighbours();
	test_long_history();
	test_load();
	test_load_truncated();
	return TEST_DONE();
}
