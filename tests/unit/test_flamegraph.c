// SPDX-License-Identifier: MIT
/*
 * Flame graphs of a hand-built trace: folded output to the byte for each
 * weight, weights that add up to the span self time, GPU kernels tied to
 * their launch by correlation id in either file order, and an SVG that is
 * well-formed XML with its script and one rect per frame.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "output/flamegraph_write.h"
#include "test.h"
#include "trace/trace.h"

static char path[256];
static uint32_t s_main, s_f, s_g, s_w, s_mm, s_gemm, s_relu, s_orphan;

static void rec(struct trace_writer *w, uint16_t kind, uint32_t tid, uint32_t sym, uint64_t ts,
		uint64_t dur, uint64_t corr)
{
	struct ptg_record r = {
	    .kind = kind, .pid = 1, .tid = tid, .sym = sym, .ts = ts, .dur = dur, .corr = corr};

	ASSERT_EQ(trace_writer__record(w, &r), 0, "write record");
}

/*
 * Thread 1: <module>(0..100) > f(10..40) > aten::mm(20..30); <module> >
 * g(50..70); <module> > f(80..90). Thread 2: w(0..50).
 * Self: <module> 40, f 20 + 10, mm 10, g 20, w 50: 150 in all.
 * Off-CPU: tid 1 5 ns at 22 (in mm) and 3 ns at 45 (in <module>); tid 3,
 * which has no frames, 7 ns.
 * GPU: gemm (30 ns) launched in mm with corr 7, its record after the launch;
 * relu (11 ns) launched in g with corr 8, its record before the launch;
 * an orphan kernel (4 ns, corr 9) whose launch is not in the trace.
 */
static int build_trace(void)
{
	struct trace_writer *w;

	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		return -EIO;
	s_main = trace_writer__sym(w, PTG_SYM_PY_FUNC, "<module>", "app.py", 1);
	s_f = trace_writer__sym(w, PTG_SYM_PY_FUNC, "f", "app.py", 3);
	s_g = trace_writer__sym(w, PTG_SYM_PY_FUNC, "g", "app.py", 9);
	s_w = trace_writer__sym(w, PTG_SYM_PY_FUNC, "w", "w&x.py", 2);
	s_mm = trace_writer__sym(w, PTG_SYM_OP, "aten::mm", "", 0);
	s_gemm = trace_writer__sym(w, PTG_SYM_KERNEL, "gemm", "", 0);
	s_relu = trace_writer__sym(w, PTG_SYM_KERNEL, "relu", "", 0);
	s_orphan = trace_writer__sym(w, PTG_SYM_KERNEL, "orphan", "", 0);
	rec(w, PTG_REC_PY_ENTER, 1, s_main, 0, 0, 0);
	rec(w, PTG_REC_PY_ENTER, 2, s_w, 0, 0, 0);
	rec(w, PTG_REC_PY_ENTER, 1, s_f, 10, 0, 0);
	rec(w, PTG_REC_OP_ENTER, 1, s_mm, 20, 0, 0);
	rec(w, PTG_REC_SCHED, 1, 0, 22, 5, 0);
	rec(w, PTG_REC_CUDA_CALL, 1, 0, 25, 1, 7);
	rec(w, PTG_REC_OP_EXIT, 1, 0, 30, 0, 0);
	rec(w, PTG_REC_SCHED, 3, 0, 35, 7, 0);
	rec(w, PTG_REC_PY_EXIT, 1, 0, 40, 0, 0);
	rec(w, PTG_REC_SCHED, 1, 0, 45, 3, 0);
	rec(w, PTG_REC_PY_ENTER, 1, s_g, 50, 0, 0);
	rec(w, PTG_REC_PY_EXIT, 2, 0, 50, 0, 0);
	rec(w, PTG_REC_GPU_KERNEL, 0, s_relu, 58, 11, 8);
	rec(w, PTG_REC_CUDA_CALL, 1, 0, 60, 1, 8);
	rec(w, PTG_REC_PY_EXIT, 1, 0, 70, 0, 0);
	rec(w, PTG_REC_PY_ENTER, 1, s_f, 80, 0, 0);
	rec(w, PTG_REC_PY_EXIT, 1, 0, 90, 0, 0);
	rec(w, PTG_REC_PY_EXIT, 1, 0, 100, 0, 0);
	rec(w, PTG_REC_GPU_KERNEL, 0, s_gemm, 200, 30, 7);
	rec(w, PTG_REC_GPU_KERNEL, 0, s_orphan, 240, 4, 9);
	if (!ASSERT_EQ(trace_writer__close(w), 0, "writer close"))
		return -EIO;
	return 0;
}

/* The flame graph of the trace as folded text, or as SVG; free() it. */
static char *render(const struct flamegraph_opts *o, bool svg, uint64_t *total)
{
	struct flamegraph *fg = NULL;
	struct trace_reader *r;
	char err[256], *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "reader open"))
		return NULL;
	f = open_memstream(&buf, &len);
	if (ASSERT_EQ(flamegraph__collect(r, o, &fg), 0, "collect") && f) {
		*total = flamegraph__total(fg);
		if (svg)
			ASSERT_EQ(flamegraph__write_svg(fg, r, f, "test.ptg"), 0, "write svg");
		else
			ASSERT_EQ(flamegraph__write_folded(fg, r, f), 0, "write folded");
	}
	if (f)
		fclose(f);
	flamegraph__free(fg);
	trace_reader__close(r);
	return buf;
}

/* Sum of the weights that end the lines of folded text. */
static uint64_t folded_sum(const char *s)
{
	uint64_t sum = 0;

	for (const char *nl; s && (nl = strchr(s, '\n')); s = nl + 1) {
		const char *w = nl;

		while (w > s && w[-1] != ' ')
			w--;
		sum += strtoull(w, NULL, 10);
	}
	return sum;
}

static void check_folded(const struct flamegraph_opts *o, const char *want, uint64_t total,
			 const char *name)
{
	uint64_t got_total = 0;
	char *out = render(o, false, &got_total);

	ASSERT_STREQ(out, want, name);
	ASSERT_EQ(got_total, total, name);
	ASSERT_EQ(folded_sum(out), total, name);
	free(out);
}

static void test_weights(void)
{
	struct flamegraph_opts o = {.weight = FG_WEIGHT_WALL};

	check_folded(&o,
		     "<module> (app.py:1) 40\n"
		     "<module> (app.py:1);f (app.py:3) 30\n"
		     "<module> (app.py:1);f (app.py:3);aten::mm 10\n"
		     "<module> (app.py:1);g (app.py:9) 20\n"
		     "w (w&x.py:2) 50\n",
		     150, "wall");
	o.weight = FG_WEIGHT_CPU;
	check_folded(&o,
		     "<module> (app.py:1) 37\n"
		     "<module> (app.py:1);f (app.py:3) 30\n"
		     "<module> (app.py:1);f (app.py:3);aten::mm 5\n"
		     "<module> (app.py:1);g (app.py:9) 20\n"
		     "w (w&x.py:2) 50\n",
		     142, "cpu");
	o.weight = FG_WEIGHT_OFFCPU;
	check_folded(&o,
		     "<module> (app.py:1) 3\n"
		     "<module> (app.py:1);f (app.py:3);aten::mm 5\n"
		     "[unknown] 7\n",
		     15, "offcpu");
	o.weight = FG_WEIGHT_GPU;
	check_folded(&o,
		     "<module> (app.py:1);f (app.py:3);aten::mm;[gpu] gemm 30\n"
		     "<module> (app.py:1);g (app.py:9);[gpu] relu 11\n"
		     "[gpu] orphan 4\n",
		     45, "gpu, kernels before and after their launch");
}

static void test_tid(void)
{
	struct flamegraph_opts o = {.weight = FG_WEIGHT_WALL, .by_tid = true, .tid = 2};

	check_folded(&o, "w (w&x.py:2) 50\n", 50, "wall --tid 2");
	o.weight = FG_WEIGHT_GPU;
	check_folded(&o, "", 0, "gpu --tid 2: thread 2 launched nothing");
	o.tid = 1;
	check_folded(&o,
		     "<module> (app.py:1);f (app.py:3);aten::mm;[gpu] gemm 30\n"
		     "<module> (app.py:1);g (app.py:9);[gpu] relu 11\n",
		     41, "gpu --tid 1: orphans are nobody's");
}

/*
 * Enough of an XML parser to reject what browsers reject: every tag closed
 * in order, attributes quoted, '&' only in entities, '<' only in markup,
 * CDATA sections closed. Returns the number of elements, or -1.
 */
static int xml_check(const char *s, int *rects)
{
	const char *stack[64];
	int depth = 0, elements = 0;

	*rects = 0;
	while (*s) {
		if (!strncmp(s, "<![CDATA[", 9)) {
			s = strstr(s, "]]>");
			if (!s)
				return -1;
			s += 3;
		} else if (!strncmp(s, "<?", 2)) {
			s = strstr(s, "?>");
			if (!s)
				return -1;
			s += 2;
		} else if (!strncmp(s, "</", 2)) {
			size_t n = strcspn(s + 2, ">");

			if (!depth || strncmp(stack[depth - 1], s + 2, n) ||
			    (stack[depth - 1][n] != ' ' && stack[depth - 1][n] != '>' &&
			     stack[depth - 1][n] != '/'))
				return -1;
			depth--;
			s += n + 3;
		} else if (*s == '<') {
			const char *end = s + 1;
			char q = 0;

			for (; *end && (q || *end != '>'); end++) {
				if (*end == '"' && !q)
					q = '"';
				else if (*end == '"' && q)
					q = 0;
				else if (*end == '<' || (*end == '&' && q))
					return -1;
			}
			if (!*end || q)
				return -1;
			elements++;
			*rects += !strncmp(s, "<rect ", 6);
			if (end[-1] != '/') {
				if (depth == 64)
					return -1;
				stack[depth++] = s + 1;
			}
			s = end + 1;
		} else if (*s == '&') {
			if (strncmp(s, "&amp;", 5) && strncmp(s, "&lt;", 4) &&
			    strncmp(s, "&gt;", 4))
				return -1;
			s++;
		} else if (*s == '>') {
			return -1;
		} else {
			s++;
		}
	}
	return depth ? -1 : elements;
}

static void test_svg(void)
{
	struct flamegraph_opts o = {.weight = FG_WEIGHT_WALL};
	uint64_t total;
	char *svg = render(&o, true, &total);
	int rects = 0;

	if (!ASSERT_TRUE(svg != NULL, "svg"))
		return;
	ASSERT_TRUE(!strncmp(svg, "<?xml", 5), "XML declaration first");
	ASSERT_TRUE(xml_check(svg, &rects) > 0, "well-formed");
	/* all, <module>, f, aten::mm, g, w, plus the background */
	ASSERT_EQ(rects, 7, "one rect per frame");
	ASSERT_TRUE(strstr(svg, "<script type=\"text/ecmascript\"><![CDATA[") != NULL, "script");
	ASSERT_TRUE(strstr(svg, "function search(") && strstr(svg, "function zoom("),
		    "search and zoom");
	ASSERT_TRUE(strstr(svg, "id=\"search\"") && strstr(svg, "id=\"reset\"") &&
			strstr(svg, "id=\"matched\""),
		    "search box, reset zoom and match line");
	ASSERT_TRUE(strstr(svg, "<title>&lt;module&gt; (app.py:1) (100 ns, 66.67%)</title>") !=
			NULL,
		    "escaped name, weight and share in the hover title");
	ASSERT_TRUE(strstr(svg, "<title>w (w&amp;x.py:2) (50 ns, 33.33%)</title>") != NULL,
		    "'&' escaped");
	ASSERT_TRUE(strstr(svg, "data-total=\"150\"") != NULL, "total for the match share");
	free(svg);
}

/* Frames of a line of folded text ("a;b;c 12" has 3). */
int main(void)
{
	const char *dir = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ptg-flamegraph-%d.ptg", dir ? dir : "/tmp", getpid());
	if (!build_trace()) {
		test_weights();
		test_tid();
		test_svg();
	}
	unlink(path);
	return TEST_DONE();
}
