// SPDX-License-Identifier: MIT
/*
 * Chrome export of a trace as record writes it (not imported): the top-level
 * keys Kineto writes, in its order and spacing, and the args Kineto gives
 * kernels, copies and CUDA calls, linked op -> call -> kernel by External id
 * and correlation through a join flow, with the further args CUPTI's decoding
 * keeps (PTG_F_ARGS_ADD).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <json-c/json.h>

#include "import/kineto.h"
#include "chrome/chrome.h"
#include "test.h"
#include "trace/trace.h"

#define PID	    100
#define CORR	    77
#define KERNEL_ARGS "{\"context\": 1, \"registers per thread\": 32, \"shared memory\": 1536}"

static void write_recorded(struct trace_writer *w)
{
	uint32_t op = trace_writer__sym(w, PTG_SYM_OP, "aten::mm", "", 0);
	uint32_t api = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaLaunchKernel", "", 0);
	uint32_t kern = trace_writer__sym(w, PTG_SYM_KERNEL, "gemm", "", 0);
	uint32_t copy = trace_writer__sym(w, PTG_SYM_STRING, "Memcpy HtoD", "", 0);
	struct ptg_record recs[] = {
	    {.kind = PTG_REC_OP_ENTER, .pid = PID, .tid = PID, .sym = op, .ts = 1000, .ext = 5},
	    /* probed: no correlation id, host call id 1 in aux[3] */
	    {.kind = PTG_REC_CUDA_CALL,
	     .pid = PID,
	     .tid = PID,
	     .sym = api,
	     .ts = 1100,
	     .dur = 300,
	     .ext = 5,
	     .aux = {0, 0, 0, 1}},
	    /* the join flow: CUPTI's correlation id and cbid for host call 1 */
	    {.kind = PTG_REC_FLOW,
	     .pid = PID,
	     .tid = PID,
	     .sym = api,
	     .ts = 1100,
	     .corr = CORR,
	     .aux = {0, 0, 211, 1}},
	    {.kind = PTG_REC_OP_EXIT, .pid = PID, .tid = PID, .ts = 2000},
	    {.kind = PTG_REC_GPU_KERNEL,
	     .pid = PID,
	     .sym = kern,
	     .ts = 3000,
	     .dur = 500,
	     .device = 1,
	     .stream = 7,
	     .corr = CORR,
	     .aux = {2 | 3ll << 32, 4, 128 | 1ll << 32, 1}},
	    {.kind = PTG_REC_GPU_MEMCPY,
	     .pid = PID,
	     .sym = copy,
	     .ts = 4000,
	     .dur = 12000,
	     .device = 1,
	     .stream = 7,
	     .corr = 78,
	     .aux = {92928, 1}},
	};
	size_t i;

	trace_writer__meta(w, "source", "ptrace-gpu record");
	trace_writer__meta(w, "start.realtime_ns", "1700000000000001000");
	trace_writer__meta(w, "start.monotonic_ns", "1000");
	trace_writer__meta(w, "cupti.api_joined", "1");
	trace_writer__meta(w, "dist.rank", "3");
	trace_writer__meta(w, "dist.world_size", "4");
	for (i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		/* what CUPTI told of the kernel beyond the fields, as gpu/gpu.c writes it */
		if (recs[i].kind == PTG_REC_GPU_KERNEL) {
			recs[i].flags = PTG_F_ARGS_ADD;
			ASSERT_EQ(trace_writer__record_args(w, &recs[i], KERNEL_ARGS,
							    strlen(KERNEL_ARGS)),
				  0, "kernel");
			continue;
		}
		ASSERT_EQ(trace_writer__record(w, &recs[i]), 0, "record");
	}
}

static char *export_text(const char *ptg, const char *json)
{
	struct trace_writer *w;
	struct trace_reader *r;
	char err[256], *text = NULL;
	long n;
	FILE *f;

	if (!ASSERT_EQ(trace_writer__open(ptg, &w), 0, "writer"))
		return NULL;
	write_recorded(w);
	if (!ASSERT_EQ(trace_writer__close(w), 0, "close") ||
	    !ASSERT_EQ(trace_reader__open(ptg, &r, err, sizeof(err)), 0, "reader"))
		return NULL;
	ASSERT_EQ(chrome_export(r, json), 0, "export");
	trace_reader__close(r);
	f = fopen(json, "rb");
	if (!ASSERT_TRUE(f != NULL, "open export"))
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, n + 1);
	if (text && fread(text, 1, n, f) != (size_t)n) {
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

/* The first event of category cat, or NULL. */
static json_object *event(json_object *root, const char *cat)
{
	json_object *evs, *e, *v;
	size_t i;

	if (!json_object_object_get_ex(root, "traceEvents", &evs))
		return NULL;
	for (i = 0; i < json_object_array_length(evs); i++) {
		e = json_object_array_get_idx(evs, i);
		if (json_object_object_get_ex(e, "cat", &v) &&
		    !strcmp(json_object_get_string(v), cat))
			return e;
	}
	return NULL;
}

/* The event's args as text, to check their order too. */
static const char *args_of(json_object *root, const char *cat)
{
	json_object *e = event(root, cat), *a;

	if (!e || !json_object_object_get_ex(e, "args", &a))
		return "";
	return json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN |
						     JSON_C_TO_STRING_NOSLASHESCAPE);
}

static void check_keys(const char *text, json_object *root)
{
	static const char *const order[] = {
	    "schemaVersion",	   "deviceProperties", "distributedInfo", "displayTimeUnit",
	    "baseTimeNanoseconds", "traceEvents",      "traceName"};
	size_t i = 0;

	json_object_object_foreach(root, k, v)
	{
		(void)v;
		ASSERT_STREQ(k, i < 7 ? order[i] : "(none)", "top-level key in Kineto's order");
		i++;
	}
	ASSERT_EQ(i, 7, "top-level keys");
	/* HTA finds the rank with "rank":\s+N in the file's text */
	ASSERT_TRUE(strstr(text, "\n  \"distributedInfo\": {\"rank\": 3, \"world_size\": 4},\n") !=
			NULL,
		    "distributedInfo spaced as Kineto writes it");
	ASSERT_TRUE(strstr(text, "\"baseTimeNanoseconds\": 1700000000000000000,\n") != NULL,
		    "base: wall clock minus monotonic at the start");
}

static void check_args(json_object *root)
{
	ASSERT_STREQ(args_of(root, "cpu_op"), "{\"External id\":5}", "op");
	ASSERT_STREQ(args_of(root, "cuda_runtime"),
		     "{\"External id\":5,\"cbid\":211,\"correlation\":77}",
		     "call: cbid and correlation from its join flow");
	ASSERT_STREQ(args_of(root, "kernel"),
		     "{\"External id\":5,\"device\":1,\"stream\":7,\"correlation\":77,"
		     "\"grid\":[2,3,4],\"block\":[128,1,1],\"context\":1,"
		     "\"registers per thread\":32,\"shared memory\":1536}",
		     "kernel: the External id of the op that launched it, CUPTI's args");
	ASSERT_STREQ(args_of(root, "gpu_memcpy"),
		     "{\"device\":1,\"stream\":7,\"correlation\":78,\"bytes\":92928,"
		     "\"memory bandwidth (GB/s)\":7.744}",
		     "memcpy: bandwidth in bytes per ns");
}

int main(void)
{
	char ptg[] = "/tmp/test_chrome_recorded_XXXXXX", json[64];
	int fd = mkstemp(ptg);
	json_object *root;
	char *text;

	if (!ASSERT_TRUE(fd >= 0, "mkstemp"))
		return TEST_DONE();
	close(fd);
	snprintf(json, sizeof(json), "%s.json", ptg);
	text = export_text(ptg, json);
	root = text ? json_tokener_parse(text) : NULL;
	if (ASSERT_TRUE(root != NULL, "export parses")) {
		check_keys(text, root);
		check_args(root);
		ASSERT_STREQ(json_object_get_string(json_object_object_get(root, "traceName")),
			     json, "traceName");
	}
	json_object_put(root);
	free(text);
	unlink(ptg);
	unlink(json);
	return TEST_DONE();
}
