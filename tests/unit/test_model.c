// SPDX-License-Identifier: MIT
/* model__walk on hand-built traces whose spans and self times are worked out by hand. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "model/model.h"
#include "test.h"
#include "trace/trace.h"

#define MAX_SEEN 64

/* What a visitor saw: one entry per callback, with a copy of the stack. */
struct seen {
	bool is_span;
	struct model_span span;
	struct ptg_record rec;
	unsigned int depth;
	uint32_t stack_syms[8];
	uint64_t stack_child[8];
};

struct walk {
	struct seen seen[MAX_SEEN];
	int n;
	struct model_stats stats;
};

static char path[256];

static void copy_stack(struct seen *s, const struct model_frame *stack, unsigned int depth)
{
	unsigned int i;

	s->depth = depth;
	for (i = 0; i < depth && i < 8; i++) {
		s->stack_syms[i] = stack[i].sym;
		s->stack_child[i] = stack[i].child_ns;
	}
}

static void on_span(void *ctx, const struct model_span *sp, const struct model_frame *stack,
		    unsigned int depth)
{
	struct walk *w = ctx;
	struct seen *s;

	if (w->n == MAX_SEEN)
		return;
	s = &w->seen[w->n++];
	s->is_span = true;
	s->span = *sp;
	copy_stack(s, stack, depth);
}

static void on_record(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		      unsigned int depth)
{
	struct walk *w = ctx;
	struct seen *s;

	if (w->n == MAX_SEEN)
		return;
	s = &w->seen[w->n++];
	s->is_span = false;
	s->rec = *rec;
	copy_stack(s, stack, depth);
}

static const struct model_visitor visitor = {.span = on_span, .record = on_record};

static struct trace_writer *writer;

static void rec(uint16_t kind, uint16_t flags, uint32_t pid, uint32_t tid, uint32_t sym,
		uint64_t ts, uint64_t ext)
{
	struct ptg_record r = {
	    .kind = kind, .flags = flags, .pid = pid, .tid = tid, .sym = sym, .ts = ts, .ext = ext};

	ASSERT_EQ(trace_writer__record(writer, &r), 0, "write record");
}

static void start(void)
{
	ASSERT_EQ(trace_writer__open(path, &writer), 0, "writer open");
}

/* Closes the trace being written and walks it into w. */
static int finish(struct walk *w)
{
	struct trace_reader *r;
	char err[256];
	int ret;

	memset(w, 0, sizeof(*w));
	if (!ASSERT_EQ(trace_writer__close(writer), 0, "writer close"))
		return -EIO;
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "reader open")) {
		fprintf(stderr, "%s\n", err);
		return -EIO;
	}
	ret = model__walk(r, &visitor, w, &w->stats);
	ASSERT_EQ(ret, 0, "walk");
	/* a second pass after rewind sees the same spans */
	trace_reader__rewind(r);
	ASSERT_EQ(model__walk(r, NULL, NULL, NULL), 0, "second walk without visitor");
	trace_reader__close(r);
	return ret;
}

static void check_span(const struct seen *s, uint32_t sym, uint64_t start, uint64_t end,
		       uint64_t self, unsigned int depth, const char *name)
{
	if (!ASSERT_TRUE(s->is_span, name))
		return;
	ASSERT_EQ(s->span.sym, sym, name);
	ASSERT_EQ(s->span.start, start, name);
	ASSERT_EQ(s->span.end, end, name);
	ASSERT_EQ(s->span.self_ns, self, name);
	ASSERT_EQ(s->depth, depth, name);
}

/*
 * A(100..200) > B(110..160) > op(120..150), then a SPAN record at 165 under A:
 * op self 30; B self 50 - 30 = 20; A self 100 - 50 = 50.
 */
static void test_nested(void)
{
	struct walk w;
	uint32_t a, b, op, ann;

	start();
	a = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "A", "m.py", 1);
	b = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "B", "m.py", 5);
	op = trace_writer__sym(writer, PTG_SYM_OP, "aten::mm", "", 0);
	ann = trace_writer__sym(writer, PTG_SYM_STRING, "step", "", 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, a, 100, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, b, 110, 0);
	rec(PTG_REC_OP_ENTER, 0, 1, 10, op, 120, 77);
	rec(PTG_REC_OP_EXIT, 0, 1, 10, 0, 150, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 10, 0, 160, 0);
	rec(PTG_REC_SPAN, 0, 1, 10, ann, 165, 0);
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_UNWIND, 1, 10, 0, 200, 0);
	if (finish(&w) || !ASSERT_EQ(w.n, 4, "callbacks"))
		return;
	check_span(&w.seen[0], op, 120, 150, 30, 2, "op");
	ASSERT_EQ(w.seen[0].span.kind, PTG_REC_OP_ENTER, "op kind");
	ASSERT_EQ(w.seen[0].span.ext, 77, "op ext");
	ASSERT_TRUE(w.seen[0].stack_syms[0] == a && w.seen[0].stack_syms[1] == b, "op stack");
	check_span(&w.seen[1], b, 110, 160, 20, 1, "B");
	ASSERT_EQ(w.seen[1].span.kind, PTG_REC_PY_ENTER, "B kind");
	ASSERT_EQ(w.seen[1].stack_child[0], 50, "A's child time after B");
	ASSERT_TRUE(!w.seen[2].is_span && w.seen[2].rec.sym == ann, "annotation record");
	ASSERT_EQ(w.seen[2].depth, 1, "annotation under A");
	ASSERT_EQ(w.seen[2].stack_syms[0], a, "annotation stack");
	check_span(&w.seen[3], a, 100, 200, 50, 0, "A");
	ASSERT_EQ(w.seen[3].span.exit_flags, PTG_F_EXIT_UNWIND, "A exit flags");
	ASSERT_EQ(w.seen[3].span.pid, 1, "pid");
	ASSERT_EQ(w.seen[3].span.tid, 10, "tid");
	ASSERT_EQ(w.stats.spans, 3, "spans");
	ASSERT_EQ(w.stats.records, 7, "records");
	ASSERT_EQ(w.stats.threads, 1, "threads");
	ASSERT_EQ(w.stats.first_ts, 100, "first ts");
	ASSERT_EQ(w.stats.last_ts, 200, "last ts");
}

/*
 * main(1000..1100) runs gen twice: gen(1010..1020) yields; gen resumes
 * (1050..1080) and calls helper(1055..1065). Segments: 10 self 10; 30 self 20;
 * main self 100 - 10 - 30 = 60.
 */
static void test_generator(void)
{
	struct walk w;
	uint32_t m, g, h;

	start();
	m = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "main", "g.py", 1);
	g = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "gen", "g.py", 10);
	h = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "helper", "g.py", 20);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_CALL, 1, 1, m, 1000, 0);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_CALL, 1, 1, g, 1010, 0);
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_YIELD, 1, 1, 0, 1020, 0);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_RESUME, 1, 1, g, 1050, 0);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_CALL, 1, 1, h, 1055, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 1, 0, 1065, 0);
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_RETURN, 1, 1, 0, 1080, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 1, 0, 1100, 0);
	if (finish(&w) || !ASSERT_EQ(w.n, 4, "callbacks"))
		return;
	check_span(&w.seen[0], g, 1010, 1020, 10, 1, "first segment");
	ASSERT_EQ(w.seen[0].span.enter_flags, PTG_F_ENTER_CALL, "first segment is a call");
	ASSERT_EQ(w.seen[0].span.exit_flags, PTG_F_EXIT_YIELD, "first segment yields");
	check_span(&w.seen[1], h, 1055, 1065, 10, 2, "helper");
	check_span(&w.seen[2], g, 1050, 1080, 20, 1, "resumed segment");
	ASSERT_EQ(w.seen[2].span.enter_flags, PTG_F_ENTER_RESUME, "resumed segment flags");
	check_span(&w.seen[3], m, 1000, 1100, 60, 0, "main");
}

/*
 * Threads (1,20) and (1,21) interleave; (2,20) is another process's thread
 * with the same tid. An EXIT on a thread never seen and one on an emptied
 * stack are unmatched. A CUDA call sees its thread's stack, a GPU kernel
 * (tid 0) none. An exit earlier than its enter gives a zero-length span, and
 * a span still open at the end is not reported.
 */
static void test_threads(void)
{
	struct ptg_record kernel = {.kind = PTG_REC_GPU_KERNEL, .ts = 400, .dur = 1000};
	struct walk w;
	uint32_t f, g, op, launch;
	int i;

	start();
	f = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "f", "t.py", 1);
	g = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "g", "t.py", 2);
	op = trace_writer__sym(writer, PTG_SYM_OP, "aten::add", "", 0);
	launch = trace_writer__sym(writer, PTG_SYM_CUDA_API, "cudaLaunchKernel", "", 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 99, 0, 50, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 20, f, 100, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 21, g, 105, 0);
	rec(PTG_REC_PY_ENTER, 0, 2, 20, g, 106, 0);
	rec(PTG_REC_OP_ENTER, 0, 1, 21, op, 110, 5);
	rec(PTG_REC_CUDA_CALL, 0, 1, 21, launch, 115, 5);
	kernel.sym = launch;
	ASSERT_EQ(trace_writer__record(writer, &kernel), 0, "kernel");
	rec(PTG_REC_PY_EXIT, 0, 1, 20, 0, 130, 0);
	rec(PTG_REC_OP_EXIT, 0, 1, 21, 0, 140, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 20, 0, 150, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 21, 0, 145, 0);
	rec(PTG_REC_PY_EXIT, 0, 2, 20, 0, 100, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 20, g, 160, 0);
	if (finish(&w) || !ASSERT_EQ(w.n, 6, "callbacks"))
		return;
	ASSERT_TRUE(!w.seen[0].is_span && w.seen[0].rec.kind == PTG_REC_CUDA_CALL, "cuda call");
	ASSERT_EQ(w.seen[0].depth, 2, "cuda call under g and the op");
	ASSERT_TRUE(w.seen[0].stack_syms[0] == g && w.seen[0].stack_syms[1] == op, "call stack");
	ASSERT_TRUE(!w.seen[1].is_span && w.seen[1].rec.kind == PTG_REC_GPU_KERNEL, "kernel");
	ASSERT_EQ(w.seen[1].depth, 0, "kernel has no stack");
	check_span(&w.seen[2], f, 100, 130, 30, 0, "f on 20");
	ASSERT_EQ(w.seen[2].span.tid, 20, "f's tid");
	check_span(&w.seen[3], op, 110, 140, 30, 1, "op on 21");
	check_span(&w.seen[4], g, 105, 145, 10, 0, "g on 21");
	check_span(&w.seen[5], g, 106, 106, 0, 0, "g in pid 2, exit before enter");
	ASSERT_EQ(w.seen[5].span.pid, 2, "other process");
	for (i = 0; i < w.n; i++)
		ASSERT_TRUE(!w.seen[i].is_span || w.seen[i].span.start != 160,
			    "open span unreported");
	ASSERT_EQ(w.stats.unmatched_exits, 2, "unmatched exits");
	ASSERT_EQ(w.stats.spans, 4, "spans");
	ASSERT_EQ(w.stats.threads, 3, "threads");
	ASSERT_EQ(w.stats.records, 13, "records");
	ASSERT_EQ(w.stats.first_ts, 50, "first ts");
	ASSERT_EQ(w.stats.last_ts, 1400, "last ts is the kernel's end");
}

/* 10,000 nested calls: stacks grow past their first allocation. */
static void test_deep(void)
{
	struct walk w;
	uint32_t f;
	int i;

	start();
	f = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "recurse", "d.py", 1);
	for (i = 0; i < 10000; i++)
		rec(PTG_REC_PY_ENTER, 0, 1, 1, f, i * 10, 0);
	for (i = 0; i < 10000; i++)
		rec(PTG_REC_PY_EXIT, 0, 1, 1, 0, 100000 + i * 10, 0);
	if (finish(&w))
		return;
	ASSERT_EQ(w.stats.spans, 10000, "deep spans");
	check_span(&w.seen[0], f, 99990, 100000, 10, 9999, "innermost");
	/* each frame's own time: 10 ns before its child and 10 ns after */
	check_span(&w.seen[1], f, 99980, 100010, 20, 9998, "next");
}

/*
 * f > g > f > op > g on one thread: each span says its caller of the same
 * kind (the op's Python frames are transparent to it and it to them) and
 * what was already open when it was entered, as cProfile counts recursion.
 * Spans close innermost first: g, op, f, g, f.
 */
static void test_recursion(void)
{
	struct walk w;
	uint32_t f, g, op;

	start();
	f = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "f", "m.py", 1);
	g = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "g", "m.py", 5);
	op = trace_writer__sym(writer, PTG_SYM_OP, "aten::mm", "", 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, f, 100, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, g, 110, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, f, 120, 0);
	rec(PTG_REC_OP_ENTER, 0, 1, 10, op, 130, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, 10, g, 140, 0);
	for (uint64_t ts = 150; ts < 200; ts += 10)
		rec(ts == 160 ? PTG_REC_OP_EXIT : PTG_REC_PY_EXIT, 0, 1, 10, 0, ts, 0);
	if (finish(&w) || !ASSERT_EQ(w.n, 5, "five spans"))
		return;
	/* inner g: called by f (through the op), g and f -> g both open */
	ASSERT_EQ(w.seen[0].span.caller, f, "inner g's caller");
	ASSERT_EQ(w.seen[0].span.active, MODEL_ACTIVE_SYM | MODEL_ACTIVE_PAIR, "inner g");
	ASSERT_EQ(w.seen[0].span.up[MODEL_OP], 4, "inner g's op");
	ASSERT_EQ(w.seen[0].span.up[MODEL_PY], 3, "inner g's Python frame");
	/* the op: no op above it, no op open before */
	ASSERT_EQ(w.seen[1].span.caller, 0, "op's caller");
	ASSERT_EQ(w.seen[1].span.active, 0, "op");
	ASSERT_EQ(w.seen[1].span.up[MODEL_PY], 3, "op's Python frame");
	/* inner f: f open, g -> f is not */
	ASSERT_EQ(w.seen[2].span.caller, g, "inner f's caller");
	ASSERT_EQ(w.seen[2].span.active, MODEL_ACTIVE_SYM, "inner f");
	/* outer g and f: nothing of theirs open */
	ASSERT_EQ(w.seen[3].span.active, 0, "outer g");
	ASSERT_EQ(w.seen[3].span.caller, f, "outer g's caller");
	ASSERT_EQ(w.seen[4].span.active, 0, "outer f");
	ASSERT_EQ(w.seen[4].span.caller, 0, "outer f's caller");
}

static void test_empty_stats(void)
{
	struct walk w;

	start();
	if (finish(&w))
		return;
	ASSERT_EQ(w.n, 0, "no callbacks");
	ASSERT_EQ(w.stats.first_ts, UINT64_MAX, "first ts of nothing");
	ASSERT_EQ(w.stats.records, 0, "no records");
}

int main(void)
{
	const char *dir = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ptg-model-%d.ptg", dir ? dir : "/tmp", getpid());
	test_nested();
	test_generator();
	test_threads();
	test_deep();
	test_recursion();
	test_empty_stats();
	unlink(path);
	return TEST_DONE();
}
