// SPDX-License-Identifier: MIT
/*
 * idle on hand-built traces whose answers were worked out by hand. Times are
 * written in µs (US()) and the trace holds ns.
 *
 * thread 1:  step (Python, 0-400) > aten::a (10-80) > 5 cudaLaunchKernel at
 *            20, 30, 40, 50, 60 (10 each, corr 1-5); aten::b (100-300) >
 *            cudaMemcpyAsync 275-278 (corr 6)
 * stream 7:  K1 100-150, K2 150-170, K3 180-200, K4 250-260, K5 265-270,
 *            memcpy 280-290
 * stream 8:  K6 205-215, launched before the trace (no call)
 */
#include <stdlib.h>
#include <unistd.h>

#include "analysis/idle.h"
#include "test.h"
#include "trace/trace.h"

#define US(x) ((uint64_t)(x)*1000)

static struct trace_writer *w;

static void rec(uint16_t kind, uint32_t sym, uint64_t ts, uint64_t dur, uint64_t corr,
		uint64_t stream)
{
	struct ptg_record r = {
	    .kind = kind,
	    .pid = 1,
	    .tid = 1,
	    .sym = sym,
	    .ts = US(ts),
	    .dur = US(dur),
	    .corr = corr,
	    .stream = stream,
	};

	if (kind >= PTG_REC_GPU_KERNEL && kind <= PTG_REC_GPU_SYNC) {
		r.pid = 0;
		r.tid = stream;
	}
	trace_writer__record(w, &r);
}

static int write_gpu_trace(const char *path)
{
	uint32_t step, a, b, launch, memcpy_call, kernel, copy;
	int i;

	if (trace_writer__open(path, &w))
		return -1;
	step = trace_writer__sym(w, PTG_SYM_PY_FUNC, "step", "train.py", 10);
	a = trace_writer__sym(w, PTG_SYM_OP, "aten::a", "", 0);
	b = trace_writer__sym(w, PTG_SYM_OP, "aten::b", "", 0);
	launch = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaLaunchKernel", "", 0);
	memcpy_call = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaMemcpyAsync", "", 0);
	kernel = trace_writer__sym(w, PTG_SYM_KERNEL, "gemm", "", 0);
	copy = trace_writer__sym(w, PTG_SYM_STRING, "Memcpy HtoD", "", 0);
	rec(PTG_REC_PY_ENTER, step, 0, 0, 0, 0);
	rec(PTG_REC_OP_ENTER, a, 10, 0, 0, 0);
	for (i = 0; i < 5; i++)
		rec(PTG_REC_CUDA_CALL, launch, 20 + 10 * i, 10, i + 1, 7);
	rec(PTG_REC_OP_EXIT, 0, 80, 0, 0, 0);
	rec(PTG_REC_OP_ENTER, b, 100, 0, 0, 0);
	rec(PTG_REC_GPU_KERNEL, kernel, 100, 50, 1, 7);
	rec(PTG_REC_GPU_KERNEL, kernel, 150, 20, 2, 7);
	rec(PTG_REC_GPU_KERNEL, kernel, 180, 20, 3, 7);
	rec(PTG_REC_GPU_KERNEL, kernel, 205, 10, 0, 8);
	rec(PTG_REC_GPU_KERNEL, kernel, 250, 10, 4, 7);
	rec(PTG_REC_GPU_KERNEL, kernel, 265, 5, 5, 7);
	rec(PTG_REC_CUDA_CALL, memcpy_call, 275, 3, 6, 7);
	rec(PTG_REC_GPU_MEMCPY, copy, 280, 10, 6, 7);
	rec(PTG_REC_OP_EXIT, 0, 300, 0, 0, 0);
	rec(PTG_REC_PY_EXIT, 0, 400, 0, 0, 0);
	return trace_writer__close(w);
}

static void check_queue(const struct idle_report *rep)
{
	static const uint64_t t[] = {19, 20, 25, 60, 99, 100, 149, 150, 180, 250, 264, 265, 300};
	static const uint32_t depth[] = {0, 1, 1, 5, 5, 4, 4, 3, 2, 1, 1, 0, 0};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ASSERT_EQ(idle_report__queue_depth(rep, US(t[i])), depth[i], "queue depth at t");
	ASSERT_EQ(rep->qd_max, 5, "max queue depth");
	/* sum of depth x duration = 745 µs over 20..265 */
	ASSERT_NEAR(rep->qd_mean, 745.0 / 245, 1e-9, "time-weighted mean depth");
	ASSERT_EQ(rep->qd_hist_ns[0], 0, "time at depth 0");
	ASSERT_EQ(rep->qd_hist_ns[1], US(25), "time at depth 1");
	ASSERT_EQ(rep->qd_hist_ns[2], US(120), "time at depth 2-3");
	ASSERT_EQ(rep->qd_hist_ns[3], US(100), "time at depth 4-7");
	ASSERT_EQ(rep->decreases, 1, "one falling phase, 60-265");
}

static void check_idle(const struct idle_report *rep)
{
	const struct idle_device *d = &rep->devices[0];

	ASSERT_EQ(rep->gpu_first, US(100), "first GPU op");
	ASSERT_EQ(rep->gpu_last, US(290), "last GPU op end");
	/* gaps 170-180, 200-205, 215-250, 260-265, 270-280 */
	ASSERT_EQ(rep->gpu_idle_ns, US(65), "GPU idle");
	ASSERT_EQ(rep->gap_count, 5, "idle intervals");
	ASSERT_EQ(rep->ngaps, 3, "-n 3 longest gaps");
	ASSERT_EQ(rep->gaps[0].start, US(215), "longest gap start");
	ASSERT_EQ(rep->gaps[0].end, US(250), "longest gap end");
	ASSERT_EQ(rep->gaps[1].end - rep->gaps[1].start, US(10), "second gap");
	ASSERT_EQ(idle_report__idle_overlap(rep, US(0), US(400)), US(65), "overlap of all");
	ASSERT_EQ(idle_report__idle_overlap(rep, US(175), US(210)), US(10), "two partial gaps");
	ASSERT_EQ(idle_report__idle_overlap(rep, US(10), US(80)), 0, "before the GPU starts");
	ASSERT_EQ(idle_report__idle_overlap(rep, US(275), US(278)), US(3), "inside a gap");
	if (!ASSERT_EQ(rep->ndevices, 1, "devices"))
		return;
	ASSERT_EQ(d->last - d->first, US(190), "device span");
	ASSERT_EQ(d->idle_ns, US(65), "device idle");
	ASSERT_EQ(d->compute_ns, US(115), "compute: merged kernels");
	ASSERT_EQ(d->non_compute_ns, US(10), "non-compute: the memcpy");
	ASSERT_EQ(d->kernels, 6, "kernels");
	ASSERT_EQ(d->memcpys, 1, "memcpys");
}

static void check_streams(const struct idle_report *rep)
{
	const struct idle_stream *s7 = &rep->streams[0], *s8 = &rep->streams[1];

	if (!ASSERT_EQ(rep->nstreams, 2, "streams"))
		return;
	ASSERT_EQ(s7->stream, 7, "stream 7 first");
	ASSERT_EQ(s7->ops, 6, "ops on stream 7");
	/* memcpy: launched at 275, after K5 ended at 270 */
	ASSERT_EQ(s7->host_wait_ns, US(10), "host wait");
	/* K2 (0), K3 (10), K5 (5) */
	ASSERT_EQ(s7->kernel_wait_ns, US(15), "kernel wait");
	/* K4: 50 µs after K3, launched long before */
	ASSERT_EQ(s7->other_wait_ns, US(50), "other wait");
	ASSERT_EQ(s7->max_queue, 5, "HTA queue length max");
	ASSERT_EQ(s7->full_queue_ns, US(100), "time at queue length >= 4");
	ASSERT_NEAR(s7->mean_queue, 750.0 / 260, 1e-9, "HTA mean queue length");
	ASSERT_EQ(s8->ops, 1, "stream 8");
	ASSERT_EQ(s8->host_wait_ns + s8->kernel_wait_ns + s8->other_wait_ns, 0, "no gap on 8");
	ASSERT_EQ(s8->max_queue, 0, "no launch seen on 8");
}

static void check_delay(const struct idle_report *rep)
{
	const struct idle_delay *d = &rep->launch_delay;

	/* 80, 120, 140, 200, 205 µs; K6 has no launching call */
	ASSERT_EQ(d->count, 5, "delays");
	ASSERT_NEAR(d->mean_ns, US(149), 1e-6, "mean delay");
	ASSERT_EQ(d->p50_ns, US(140), "p50");
	ASSERT_EQ(d->p95_ns, US(205), "p95");
	ASSERT_EQ(d->max_ns, US(205), "max");
}

static const char *sym_of(struct trace_reader *r, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(r, id);

	return s ? s->name : "";
}

static void check_ranking(const struct idle_report *rep, struct trace_reader *r)
{
	static const char *const names[] = {"aten::b", "step", "aten::a", "cudaLaunchKernel"};
	static const double scores[] = {2.0232257590657, 0.5325222016177, -1.2445726652884,
					-1.3111752953950};
	size_t i;

	/* in the phase 60-265: step, aten::a, aten::b and the launch at 60 */
	ASSERT_EQ(rep->candidates, 4, "events in falling phases");
	if (!ASSERT_EQ(rep->nranked, 3, "-n 3"))
		return;
	/* all candidates stay sorted in ranked[]; nranked is how many to show */
	for (i = 0; i < rep->candidates; i++) {
		ASSERT_STREQ(sym_of(r, rep->ranked[i].sym), names[i], "rank order");
		ASSERT_NEAR(rep->ranked[i].score, scores[i], 1e-9, "score");
	}
	ASSERT_EQ(rep->ranked[0].self_ns, US(197), "aten::b self: 200 - 3 of memcpy call");
	ASSERT_EQ(rep->ranked[0].idle_ns, US(65), "aten::b idle overlap");
	ASSERT_EQ(rep->ranked[0].queue_depth, 4, "depth at aten::b start");
	ASSERT_STREQ(sym_of(r, rep->ranked[0].pysym), "step", "innermost Python frame");
	ASSERT_EQ(rep->ranked[1].self_ns, US(130), "step self: 400 - 70 - 200");
	ASSERT_EQ(rep->ranked[2].self_ns, US(20), "aten::a self: 70 - 5 launches");
	ASSERT_EQ(rep->ranked[3].start, US(60), "launch at 60 is ranked last");
}

static void check_names(const struct idle_report *rep, struct trace_reader *r)
{
	ASSERT_EQ(rep->cpu_events, 9, "CPU events: 3 spans + 6 CUDA calls");
	ASSERT_EQ(rep->nnames_total, 5, "names");
	ASSERT_STREQ(sym_of(r, rep->names[0].sym), "aten::b", "most self time");
	ASSERT_EQ(rep->names[0].self_ns, US(197), "its self time");
	ASSERT_STREQ(sym_of(r, rep->names[2].sym), "cudaLaunchKernel", "third");
	ASSERT_EQ(rep->names[2].count, 5, "launch count");
	ASSERT_EQ(rep->names[2].qd_sum, 1 + 2 + 3 + 4 + 5, "depth at each launch");
}

static void test_gpu_trace(const char *path)
{
	struct idle_opts o = {.top_n = 3, .kernel_wait_ns = US(30), .max_queue_len = 4};
	struct idle_report *rep = NULL;
	struct trace_reader *r;
	char err[256];

	if (!ASSERT_EQ(write_gpu_trace(path), 0, "write trace") ||
	    !ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open"))
		return;
	if (ASSERT_EQ(idle_analyze(r, &o, &rep), 0, "analyze")) {
		check_queue(rep);
		check_idle(rep);
		check_streams(rep);
		check_delay(rep);
		check_names(rep, r);
		check_ranking(rep, r);
	}
	idle_report__free(rep);
	trace_reader__close(r);
}

static void test_cpu_only(const char *path)
{
	struct idle_report *rep = NULL;
	struct trace_reader *r;
	struct idle_opts o;
	uint32_t op;
	char err[256];

	idle_opts__defaults(&o);
	if (trace_writer__open(path, &w))
		return;
	op = trace_writer__sym(w, PTG_SYM_OP, "aten::add", "", 0);
	rec(PTG_REC_OP_ENTER, op, 5, 0, 0, 0);
	rec(PTG_REC_OP_EXIT, 0, 9, 0, 0, 0);
	if (!ASSERT_EQ(trace_writer__close(w), 0, "close") ||
	    !ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open"))
		return;
	if (ASSERT_EQ(idle_analyze(r, &o, &rep), 0, "analyze CPU-only")) {
		ASSERT_EQ(rep->gpu_ops, 0, "no GPU ops");
		ASSERT_EQ(rep->nranked, 0, "nothing to rank");
		ASSERT_EQ(rep->nnames, 1, "CPU side still reported");
		ASSERT_EQ(rep->names[0].self_ns, US(4), "op self time");
		ASSERT_EQ(rep->names[0].idle_ns, 0, "no idle without GPU");
	}
	idle_report__free(rep);
	trace_reader__close(r);
}

int main(void)
{
	char path[] = "/tmp/test_idle_XXXXXX";
	int fd = mkstemp(path);

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return TEST_DONE();
	close(fd);
	test_gpu_trace(path);
	test_cpu_only(path);
	unlink(path);
	return TEST_DONE();
}
