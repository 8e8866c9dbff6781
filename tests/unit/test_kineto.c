// SPDX-License-Identifier: MIT
/* Import of a small handwritten Kineto trace, checked record by record. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "import/kineto.h"
#include "model/model.h"
#include "chrome/chrome.h"
#include "test.h"
#include "trace/trace.h"

static const char trace_json[] =
    "{\"schemaVersion\": 1, \"distributedInfo\": {\"rank\": 0, \"path\": \"a/b\"},\n"
    " \"traceEvents\": [\n"
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::linear\", \"pid\": 10, \"tid\": 11,"
    "   \"ts\": 100.5, \"dur\": 50, \"args\": {\"External id\": 7, \"Sequence number\": 3,"
    "   \"Call stack\": \"m.py(3): f;m.py(9): <module>\", \"Module Hierarchy\": \"top.fc "
    "(Linear)\","
    "   \"Input Dims\": [[2, 3], [4, 3], []], \"Input type\": [\"float\", \"float\", \"\"]}},\n"
    /* overhangs aten::linear (ends at 150.5): clipped */
    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::addmm\", \"pid\": 10, \"tid\": 11,"
    "   \"ts\": 110.0, \"dur\": 60.25, \"args\": {\"External id\": 8}},\n"
    "  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"model.py(12): forward\","
    "   \"pid\": 10, \"tid\": 11, \"ts\": 90, \"dur\": 100,"
    "   \"args\": {\"Python id\": 3, \"Python parent id\": 1}},\n"
    "  {\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"nn.Module: Linear_0\","
    "   \"pid\": 10, \"tid\": 11, \"ts\": 95, \"dur\": 80, \"args\": {\"Python id\": 4}},\n"
    "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 10,"
    "   \"tid\": 11, \"ts\": 120.001, \"dur\": 5.9995,"
    "   \"args\": {\"External id\": 8, \"cbid\": 211, \"correlation\": 42}},\n"
    "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7,"
    "   \"ts\": 130, \"dur\": 10, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 42,"
    "   \"External id\": 8, \"grid\": [2, 3, 4], \"block\": [128, 1, 1]}},\n"
    "  {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoH (Device -> Pageable)\","
    "   \"pid\": 0, \"tid\": 7, \"ts\": 1712195495519695.8, \"dur\": 1.28,"
    "   \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 43, \"bytes\": 256,"
    "   \"memory bandwidth (GB/s)\": 0.6, \"queued\": 0}, \"unknown key\": [1, {\"a\": null}]},\n"
    "  {\"ph\": \"s\", \"id\": 42, \"pid\": 10, \"tid\": 11, \"ts\": 120.001, \"cat\": \"ac2g\","
    "   \"name\": \"ac2g\"},\n"
    "  {\"ph\": \"f\", \"id\": 42, \"pid\": 0, \"tid\": 7, \"ts\": 130, \"cat\": \"ac2g\","
    "   \"name\": \"ac2g\", \"bp\": \"e\"},\n"
    "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#3\", \"pid\": 10,"
    "   \"tid\": 11, \"ts\": 80, \"dur\": 200, \"args\": {\"External id\": 1}},\n"
    "  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 10, \"tid\": 11, \"ts\": 1,"
    "   \"args\": {\"name\": \"main\"}},\n"
    "  {\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", \"pid\": \"Spans\","
    "   \"tid\": \"PyTorch Profiler\", \"ts\": 0.5, \"dur\": 2},\n"
    "  {\"ph\": \"i\", \"name\": \"x\", \"pid\": 1, \"tid\": 1, \"ts\": 5}\n"
    " ],\n"
    " \"traceName\": \"t.json\"}\n";

static struct trace_reader *reader;

static const char *sym_name(uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(reader, id);

	return s ? s->name : NULL;
}

static void expect(uint16_t kind, uint32_t tid, uint64_t ts, const char *name, const char *what)
{
	struct ptg_record r;

	if (!ASSERT_EQ(trace_reader__next(reader, &r), 1, what))
		return;
	ASSERT_EQ(r.kind, kind, what);
	ASSERT_EQ(r.tid, tid, what);
	ASSERT_EQ(r.ts, ts, what);
	if (name)
		ASSERT_STREQ(sym_name(r.sym), name, what);
}

/* Every field of the records whose arguments matter. */
static void check_records(void)
{
	struct ptg_record r;
	const struct ptg_sym *s;

	/* what no record kind models comes back whole: the Trace span with string pid, "i" */
	expect(PTG_REC_EVENT, 0, 500, "PyTorch Profiler (0)", "Trace span kept");
	ASSERT_STREQ(trace_reader__args(reader, NULL),
		     "{\"ph\": \"X\", \"cat\": \"Trace\", \"name\": \"PyTorch Profiler (0)\", "
		     "\"pid\": \"Spans\", \"tid\": \"PyTorch Profiler\", \"ts\": 0.5, \"dur\": 2}",
		     "Trace span as it came");
	expect(PTG_REC_THREAD, 11, 1000, "main", "thread name");
	ASSERT_TRUE(trace_reader__args(reader, NULL) == NULL, "nothing extra in thread_name");
	expect(PTG_REC_EVENT, 1, 5000, "x", "instant kept");
	ASSERT_STREQ(trace_reader__args(reader, NULL),
		     "{\"ph\": \"i\", \"name\": \"x\", \"pid\": 1, \"tid\": 1, \"ts\": 5}",
		     "instant as it came");
	expect(PTG_REC_SPAN, 11, 80000, "ProfilerStep#3", "annotation");
	ASSERT_EQ(trace_reader__next(reader, &r), 1, "py enter");
	ASSERT_EQ(r.kind, PTG_REC_PY_ENTER, "py enter kind");
	ASSERT_EQ(r.ts, 90000, "py enter ts");
	s = trace_reader__sym(reader, r.sym);
	if (ASSERT_TRUE(s != NULL, "py sym")) {
		ASSERT_STREQ(s->name, "forward", "py func");
		ASSERT_STREQ(s->file, "model.py", "py file");
		ASSERT_EQ(s->line, 12, "py line");
		ASSERT_EQ(s->kind, PTG_SYM_PY_FUNC, "py sym kind");
	}
	ASSERT_EQ(r.aux[0], 4, "Python id + 1");
	ASSERT_EQ(r.aux[1], 2, "Python parent id + 1");
	expect(PTG_REC_PY_ENTER, 11, 95000, "nn.Module: Linear_0", "module");
	expect(PTG_REC_OP_ENTER, 11, 100500, "aten::linear", "linear");
	expect(PTG_REC_OP_ENTER, 11, 110000, "aten::addmm", "addmm");
	ASSERT_EQ(trace_reader__next(reader, &r), 1, "launch");
	ASSERT_EQ(r.kind, PTG_REC_CUDA_CALL, "launch kind");
	ASSERT_EQ(r.ts, 120001, "launch ts");
	ASSERT_EQ(r.dur, 6000, "launch dur rounded");
	ASSERT_EQ(r.corr, 42, "launch corr");
	ASSERT_EQ(r.ext, 8, "launch ext");
	ASSERT_EQ(r.aux[0], 211, "cbid");
	expect(PTG_REC_FLOW, 11, 120001, "ac2g", "flow start");
	ASSERT_EQ(trace_reader__next(reader, &r), 1, "kernel");
	ASSERT_EQ(r.kind, PTG_REC_GPU_KERNEL, "kernel kind");
	ASSERT_EQ(r.ts, 130000, "kernel ts");
	ASSERT_EQ(r.dur, 10000, "kernel dur");
	ASSERT_EQ(r.stream, 7, "kernel stream");
	ASSERT_EQ(r.corr, 42, "kernel corr");
	ASSERT_EQ(r.aux[0], 2 | 3ll << 32, "grid x, y");
	ASSERT_EQ(r.aux[1], 4, "grid z");
	ASSERT_EQ(r.aux[2], 128 | 1ll << 32, "block x, y");
	ASSERT_EQ(r.aux[3], 1, "block z");
	ASSERT_STREQ(trace_reader__args(reader, NULL),
		     "{\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 42, "
		     "\"External id\": 8, \"grid\": [2, 3, 4], \"block\": [128, 1, 1]}}",
		     "kernel args as they came");
	ASSERT_EQ(trace_reader__next(reader, &r), 1, "flow finish");
	ASSERT_EQ(r.kind, PTG_REC_FLOW, "flow finish kind");
	ASSERT_EQ(r.aux[0], 'f', "flow phase");
	ASSERT_EQ(r.aux[1], 1, "flow binding point");
	ASSERT_EQ(r.corr, 42, "flow id");
	/* both ops end at 150.5 µs, the clipped inner one first */
	expect(PTG_REC_OP_EXIT, 11, 150500, NULL, "addmm exit (clipped)");
	expect(PTG_REC_OP_EXIT, 11, 150500, NULL, "linear exit");
	expect(PTG_REC_PY_EXIT, 11, 175000, NULL, "module exit");
	expect(PTG_REC_PY_EXIT, 11, 190000, NULL, "forward exit");
	ASSERT_EQ(trace_reader__next(reader, &r), 1, "memcpy");
	ASSERT_EQ(r.kind, PTG_REC_GPU_MEMCPY, "memcpy kind");
	ASSERT_EQ(r.ts, 1712195495519695800ull, "exact ns at epoch scale");
	ASSERT_EQ(r.dur, 1280, "memcpy dur");
	ASSERT_EQ(r.aux[0], 256, "memcpy bytes");
	ASSERT_EQ(r.aux[1], 2, "memcpy kind DtoH");
	ASSERT_STREQ(
	    trace_reader__args(reader, NULL),
	    "{\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 43, \"bytes\": 256, "
	    "\"memory bandwidth (GB/s)\": 0.6, \"queued\": 0}, \"unknown key\": [1, {\"a\": "
	    "null}]}",
	    "memcpy args and an unknown key, numbers as written");
	ASSERT_EQ(trace_reader__next(reader, &r), 0, "end of records");
}

static void check_meta(void)
{
	ASSERT_STREQ(trace_reader__meta(reader, "source"), "kineto", "source");
	ASSERT_STREQ(trace_reader__meta(reader, "import.clipped"), "1", "clipped count");
	ASSERT_STREQ(trace_reader__meta(reader, "import.unknown"), "2", "unknown count");
	ASSERT_STREQ(trace_reader__meta(reader, "import.unknown.Trace"), "1", "unknown Trace");
	ASSERT_STREQ(trace_reader__meta(reader, "import.file"), "handwritten.json", "file name");
	/* spaced as Kineto writes it: HTA finds the rank by matching "rank":\s+N */
	ASSERT_STREQ(trace_reader__meta(reader, "kineto.distributedInfo"),
		     "{\"rank\": 0, \"path\": \"a/b\"}", "distributedInfo");
	ASSERT_STREQ(trace_reader__meta(reader, "import.events_at"), "2", "keys before events");
	ASSERT_STREQ(trace_reader__meta(reader, "kineto.traceName"), "\"t.json\"", "traceName");
	ASSERT_TRUE(trace_reader__meta(reader, "kineto.traceEvents") == NULL, "no events in META");
}

static void test_import(const char *path)
{
	struct model_stats ms = {};
	struct kineto_stats st = {};
	char err[256];

	if (!ASSERT_EQ(kineto_import_buf(trace_json, sizeof(trace_json) - 1, "handwritten.json",
					 path, &st),
		       0, "import"))
		return;
	ASSERT_EQ(st.events, 13, "events");
	ASSERT_EQ(st.clipped, 1, "clipped");
	ASSERT_EQ(st.unknown, 2, "unknown");
	if (!ASSERT_EQ(trace_reader__open(path, &reader, err, sizeof(err)), 0, "open"))
		return;
	check_records();
	check_meta();
	/* the Trace span (at 0.5 µs) and the instant are no part of what analyses see */
	trace_reader__rewind(reader);
	if (ASSERT_EQ(model__walk(reader, NULL, NULL, &ms), 0, "model walk")) {
		ASSERT_EQ(ms.records, trace_reader__nrecords(reader) - 2, "EVENT records skipped");
		ASSERT_EQ(ms.first_ts, 1000, "first ts: the thread_name");
	}
	trace_reader__close(reader);
}

static void test_bad_input(const char *path)
{
	static const char truncated[] = "{\"traceEvents\": [{\"ph\": \"X\"";
	static const char no_events[] = "{\"schemaVersion\": 1}";

	fprintf(stderr, "(two expected error lines follow)\n");
	ASSERT_EQ(kineto_import_buf(truncated, sizeof(truncated) - 1, "t", path, NULL), -EINVAL,
		  "truncated JSON");
	ASSERT_EQ(kineto_import_buf(no_events, sizeof(no_events) - 1, "t", path, NULL), -EINVAL,
		  "no traceEvents");
}

/* pids and tids past 32 bits are counted as unknown, not cut into another row's */
static void test_big_pids(const char *path)
{
	static const char json[] =
	    "{\"traceEvents\": [\n"
	    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\", \"pid\": 4294967297,"
	    "   \"tid\": 1, \"ts\": 1, \"dur\": 1},\n"
	    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"b\", \"pid\": 1,"
	    "   \"tid\": 4294967296, \"ts\": 2, \"dur\": 1},\n"
	    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"c\", \"pid\": -2147483649,"
	    "   \"tid\": 1, \"ts\": 3, \"dur\": 1},\n"
	    "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"d\", \"pid\": 4294967295,"
	    "   \"tid\": 4294967295, \"ts\": 4, \"dur\": 1}\n"
	    " ]}\n";
	struct kineto_stats st = {};
	struct ptg_record r;
	char err[256];

	if (!ASSERT_EQ(kineto_import_buf(json, sizeof(json) - 1, "big.json", path, &st), 0,
		       "import big pids"))
		return;
	ASSERT_EQ(st.unknown, 3, "pids or tids past 32 bits: unknown");
	if (!ASSERT_EQ(trace_reader__open(path, &reader, err, sizeof(err)), 0, "open big pids"))
		return;
	/* the rows that do not fit are kept verbatim, as EVENT records, for export */
	while (trace_reader__next(reader, &r) == 1 && r.kind == PTG_REC_EVENT)
		;
	if (ASSERT_EQ(r.kind, PTG_REC_OP_ENTER, "the one row that fits")) {
		ASSERT_EQ(r.pid, 4294967295u, "largest pid kept exactly");
		ASSERT_EQ(r.tid, 4294967295u, "largest tid kept exactly");
		ASSERT_STREQ(sym_name(r.sym), "d", "its name");
	}
	if (ASSERT_EQ(trace_reader__next(reader, &r), 1, "its exit"))
		ASSERT_EQ(r.pid, 4294967295u, "exit pid");
	while (trace_reader__next(reader, &r) == 1)
		ASSERT_EQ(r.kind, PTG_REC_EVENT, "no other row but kept ones");
	trace_reader__close(reader);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc(n + 1);
		if (buf && fread(buf, 1, n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = n;
	}
	fclose(f);
	return buf;
}

static int export_to(const char *ptg, const char *out)
{
	struct trace_reader *r;
	char err[256];
	int ret;

	if (trace_reader__open(ptg, &r, err, sizeof(err)))
		return -1;
	ret = chrome_export(r, out);
	trace_reader__close(r);
	return ret;
}

/* export -> import -> export gives the same bytes; .gz output reads back the same */
static void test_roundtrip(const char *ptg)
{
	char j1[] = "/tmp/test_kineto_e1_XXXXXX", j2[] = "/tmp/test_kineto_e2_XXXXXX";
	char *a = NULL, *b = NULL, gz[64];
	size_t la = 0, lb = 0;
	int fd1 = mkstemp(j1), fd2 = mkstemp(j2);

	close(fd1);
	close(fd2);
	snprintf(gz, sizeof(gz), "%s.gz", j2);
	if (!ASSERT_EQ(kineto_import_buf(trace_json, sizeof(trace_json) - 1, "h.json", ptg, NULL),
		       0, "import") ||
	    !ASSERT_EQ(export_to(ptg, j1), 0, "export 1") ||
	    !ASSERT_EQ(kineto_import(j1, ptg, NULL), 0, "import of the export") ||
	    !ASSERT_EQ(export_to(ptg, j2), 0, "export 2") ||
	    !ASSERT_EQ(export_to(ptg, gz), 0, "export .gz") ||
	    !ASSERT_EQ(kineto_import(gz, ptg, NULL), 0, "import of .gz"))
		goto cleanup;
	a = slurp(j1, &la);
	b = slurp(j2, &lb);
	if (ASSERT_TRUE(a && b, "read exports") && ASSERT_EQ(la, lb, "same length"))
		ASSERT_TRUE(!memcmp(a, b, la), "byte-identical");
	free(b);
	b = NULL;
	if (ASSERT_EQ(export_to(ptg, j2), 0, "export after .gz") && (b = slurp(j2, &lb)))
		ASSERT_TRUE(la == lb && !memcmp(a, b, la), ".gz round trip");
	ASSERT_TRUE(a && strstr(a, "\"ts\": 1712195495519695.800, \"dur\": 1.280") != NULL,
		    "µs with 3 decimals");
	ASSERT_TRUE(a && strstr(a, "\"name\": \"model.py(12): forward\"") != NULL,
		    "Python name rebuilt");
	ASSERT_TRUE(a && strstr(a, "\"dur\": 40.500, \"args\": {\"External id\": 8}") != NULL,
		    "clipped op exported clipped");
	ASSERT_TRUE(a && strstr(a,
				"{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"rank\": 0, "
				"\"path\": \"a/b\"},\n  \"traceEvents\": [") != NULL,
		    "top-level keys before the events, in order");
	ASSERT_TRUE(a && strstr(a, "\n  ],\n  \"traceName\": \"t.json\"\n}\n") != NULL,
		    "traceName after the events, as it was");
	ASSERT_TRUE(a && !strstr(a, "displayTimeUnit"), "no key the source did not have");
	ASSERT_TRUE(a && strstr(a,
				"\"bytes\": 256, \"memory bandwidth (GB/s)\": 0.6, \"queued\": 0}, "
				"\"unknown key\": [1, {\"a\": null}]}") != NULL,
		    "memcpy args and unknown key exported");
	ASSERT_TRUE(
	    a && strstr(a, "\"args\": {\"External id\": 7, \"Sequence number\": 3, \"Call stack\": "
			   "\"m.py(3): f;m.py(9): <module>\", \"Module Hierarchy\": "
			   "\"top.fc (Linear)\", \"Input Dims\": [[2, 3], [4, 3], []], "
			   "\"Input type\": [\"float\", \"float\", \"\"]}}") != NULL,
	    "op args exported as they came");
cleanup:
	free(a);
	free(b);
	unlink(j1);
	unlink(j2);
	unlink(gz);
}

/*
 * A trace imported before args blobs: top-level values as json-c wrote them,
 * no import.events_at, args only in the fields. Export still writes them.
 */
static void test_older_import(const char *ptg)
{
	char j[] = "/tmp/test_kineto_old_XXXXXX", *a = NULL;
	struct ptg_record k = {.kind = PTG_REC_GPU_KERNEL,
			       .ts = 5000,
			       .dur = 1000,
			       .stream = 7,
			       .corr = 42,
			       .aux = {2 | 3ll << 32, 4, 128 | 1ll << 32, 1}};
	struct trace_writer *w;
	int fd = mkstemp(j);
	size_t len = 0;

	close(fd);
	if (!ASSERT_EQ(trace_writer__open(ptg, &w), 0, "writer"))
		return;
	trace_writer__meta(w, "source", "kineto");
	trace_writer__meta(w, "kineto.distributedInfo", "{\"rank\":1,\"world_size\":2}");
	trace_writer__meta(w, "kineto.displayTimeUnit", "\"ns\"");
	trace_writer__meta(w, "kineto.traceName", "\"x.json\"");
	k.sym = trace_writer__sym(w, PTG_SYM_KERNEL, "gemm", "", 0);
	k.pid = 0;
	k.tid = 7;
	trace_writer__record(w, &k);
	if (ASSERT_EQ(trace_writer__close(w), 0, "close") &&
	    ASSERT_EQ(export_to(ptg, j), 0, "export"))
		a = slurp(j, &len);
	ASSERT_TRUE(
	    a &&
		strstr(a,
		       "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"rank\": 1, "
		       "\"world_size\": 2},\n  \"traceName\": \"x.json\",\n  \"traceEvents\": [") !=
		    NULL,
	    "older import: keys respaced, schemaVersion added as before");
	ASSERT_TRUE(a && strstr(a, "\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 42, "
				   "\"grid\": [2, 3, 4], \"block\": [128, 1, 1]}}") != NULL,
		    "older import: args from the fields");
	ASSERT_TRUE(a && strstr(a, "\n  ],\n  \"displayTimeUnit\": \"ns\"\n}\n") != NULL,
		    "older import: displayTimeUnit last");
	free(a);
	unlink(j);
}

static void test_us_to_ns(void)
{
	uint64_t ns = 0;

	ASSERT_EQ(kineto_us_to_ns("1712195495519695.8", &ns), 0, "parse");
	ASSERT_EQ(ns, 1712195495519695800ull, "epoch µs");
	kineto_us_to_ns("63.813", &ns);
	ASSERT_EQ(ns, 63813, "3 decimals");
	kineto_us_to_ns("0.0005", &ns);
	ASSERT_EQ(ns, 1, "half rounds up");
	kineto_us_to_ns("0.00049", &ns);
	ASSERT_EQ(ns, 0, "below half rounds down");
	kineto_us_to_ns("1.5e3", &ns);
	ASSERT_EQ(ns, 1500000, "exponent");
	kineto_us_to_ns("68.0", &ns);
	ASSERT_EQ(ns, 68000, "float with zero fraction");
	ASSERT_EQ(kineto_us_to_ns("-1", &ns), -EINVAL, "negative");
	ASSERT_EQ(kineto_us_to_ns("abc", &ns), -EINVAL, "not a number");
}

static void test_pyname(void)
{
	char file[64];
	const char *func = NULL;
	uint32_t line = 0;

	ASSERT_TRUE(kineto_parse_pyname("torch/nn/modules/module.py(1501): _call_impl", file,
					sizeof(file), &line, &func),
		    "path(line): func");
	ASSERT_STREQ(file, "torch/nn/modules/module.py", "file");
	ASSERT_EQ(line, 1501, "line");
	ASSERT_STREQ(func, "_call_impl", "func");
	ASSERT_TRUE(kineto_parse_pyname("a (x).py(7): f", file, sizeof(file), &line, &func),
		    "parenthesis in path");
	ASSERT_STREQ(file, "a (x).py", "file with parenthesis");
	ASSERT_TRUE(!kineto_parse_pyname("nn.Module: Linear_0", file, sizeof(file), &line, &func),
		    "module name");
	ASSERT_TRUE(!kineto_parse_pyname("<built-in method add>", file, sizeof(file), &line, &func),
		    "builtin");
	ASSERT_TRUE(!kineto_parse_pyname("a.py(012): f", file, sizeof(file), &line, &func),
		    "leading zero");
}

int main(void)
{
	char path[] = "/tmp/test_kineto_XXXXXX";
	int fd = mkstemp(path);

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return TEST_DONE();
	close(fd);
	test_us_to_ns();
	test_pyname();
	test_import(path);
	test_bad_input(path);
	test_big_pids(path);
	test_roundtrip(path);
	test_older_import(path);
	unlink(path);
	return TEST_DONE();
}
