// SPDX-License-Identifier: MIT
/*
 * Round trip through trace_writer and trace_reader: every field, symbol, meta
 * and loss; and what a write that fails half way (a file size limit standing in
 * for a full disk) leaves at the trace's name.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "trace/trace.h"
#include "trace_recode.h"

#define NR_RANDOM 400000 /* several RECORDS chunks */
/* a new symbol every LATE_EVERY records, from record LATE_EVERY on */
#define LATE_EVERY 50000
#define NR_SYMS	   (9 + NR_RANDOM / LATE_EVERY - 1)

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng(void)
{
	/* xorshift64*: fixed seed, same records on every run */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/ptg-%s-%d.ptg", dir ? dir : "/tmp", name, getpid());
}

/* Records with every field set to awkward values, ts going back in time. */
static size_t edge_records(struct ptg_record *out, uint32_t sym)
{
	struct ptg_record r;
	size_t n = 0;
	unsigned int kind;

	for (kind = 1; kind < PTG_REC_NR_KINDS; kind++) {
		memset(&r, 0, sizeof(r));
		r.kind = kind;
		r.flags = kind == 1 ? 0xffff : kind;
		r.pid = kind == 2 ? UINT32_MAX : 1000 + kind;
		r.tid = kind == 3 ? UINT32_MAX : 2000 + kind;
		r.sym = kind % 2 ? sym : 0;
		r.ts = kind == 4 ? UINT64_MAX : 5000000000ull - kind * 1000ull;
		r.dur = kind == 5 ? UINT64_MAX : kind * 7ull;
		r.stream = kind == 6 ? UINT64_MAX : kind;
		r.corr = kind == 7 ? UINT64_MAX : 100 - kind;
		r.ext = kind == 8 ? 0 : (uint64_t)kind << 40;
		r.device = kind == 9 ? UINT32_MAX : kind;
		r.aux[0] = INT64_MIN;
		r.aux[1] = INT64_MAX;
		r.aux[2] = -1;
		r.aux[3] = kind == 10 ? 0 : -(int64_t)kind * 1000003;
		out[n++] = r;
	}
	/* a record equal to the previous one of its kind: only the ts delta is stored */
	out[n] = out[n - 1];
	n++;
	return n;
}

static void random_record(struct ptg_record *r, uint32_t nsyms, uint64_t *ts)
{
	uint64_t x = rng();
	int i;

	memset(r, 0, sizeof(*r));
	r->kind = 1 + x % (PTG_REC_NR_KINDS - 1);
	r->flags = (x >> 8) % 3;
	r->pid = 100 + (x >> 12) % 2;
	r->tid = 200 + (x >> 14) % 4;
	r->sym = (x >> 20) % (nsyms + 1);
	/* mostly forward, sometimes a little backwards (other CPU's clock) */
	*ts += (x >> 28) % 1000;
	r->ts = *ts - (x >> 40) % 64;
	if (r->kind >= PTG_REC_SPAN) {
		r->dur = rng() % 100000;
		r->stream = (x >> 50) % 3 ? 7 : 13;
		r->corr = rng() % 5000;
		r->ext = rng();
		r->device = (x >> 52) % 2;
		for (i = 0; i < 4; i++)
			r->aux[i] = (x >> (54 + i)) & 1 ? (int64_t)rng() : 0;
	}
}

static bool records_equal(const struct ptg_record *a, const struct ptg_record *b)
{
	return a->kind == b->kind && a->flags == b->flags && a->pid == b->pid && a->tid == b->tid &&
	       a->sym == b->sym && a->ts == b->ts && a->dur == b->dur && a->stream == b->stream &&
	       a->corr == b->corr && a->ext == b->ext && a->device == b->device && a->pad == 0 &&
	       !memcmp(a->aux, b->aux, sizeof(a->aux));
}

static uint32_t syms[7];

static void write_symbols(struct trace_writer *w)
{
	syms[0] = trace_writer__sym(w, PTG_SYM_PY_FUNC, "Model.forward", "/src/model.py", 42);
	syms[1] = trace_writer__sym(w, PTG_SYM_OP, "aten::addmm", "", 0);
	syms[2] = trace_writer__sym(w, PTG_SYM_KERNEL, "ampere_sgemm_128x64_nn", NULL, 0);
	syms[3] = trace_writer__sym(w, PTG_SYM_CUDA_API, "cudaLaunchKernel", "", 0);
	syms[4] = trace_writer__sym(w, PTG_SYM_STRING, "", "", 0);
	syms[5] = trace_writer__sym(w, PTG_SYM_STACK, "1;2;3", "", 0);
	syms[6] = trace_writer__sym(w, PTG_SYM_NATIVE, "memcpy", "/lib/libc.so.6", 0);
	ASSERT_EQ(syms[0], 1, "first symbol id");
	ASSERT_EQ(syms[6], 7, "last symbol id");
	ASSERT_EQ(trace_writer__sym(w, PTG_SYM_PY_FUNC, "Model.forward", "/src/model.py", 42),
		  syms[0], "same symbol, same id");
	ASSERT_EQ(trace_writer__sym(w, PTG_SYM_OP, "aten::addmm", NULL, 0), syms[1],
		  "NULL file is the empty file");
	ASSERT_EQ(trace_writer__sym(w, PTG_SYM_PY_FUNC, "Model.forward", "/src/model.py", 43), 8,
		  "other line, new id");
	ASSERT_EQ(trace_writer__sym(w, PTG_SYM_STRING, "aten::addmm", "", 0), 9,
		  "other kind, new id");
}

static void write_trace(const char *path, struct ptg_record *expect, size_t *n)
{
	struct trace_writer *w;
	struct ptg_record bad = {.kind = PTG_REC_NR_KINDS};
	size_t i, nedge;
	uint64_t ts = 1000;
	char name[64];

	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		exit(1);
	ASSERT_EQ(trace_writer__meta(w, "pid", "1234"), 0, "meta");
	ASSERT_EQ(trace_writer__meta(w, "empty", ""), 0, "empty meta value");
	write_symbols(w);
	ASSERT_EQ(trace_writer__record(w, &bad), -EINVAL, "unknown kind refused");
	bad.kind = PTG_REC_PY_ENTER;
	bad.sym = 1000;
	ASSERT_EQ(trace_writer__record(w, &bad), -EINVAL, "unknown symbol refused");
	nedge = edge_records(expect, syms[0]);
	for (i = 0; i < nedge; i++)
		ASSERT_EQ(trace_writer__record(w, &expect[i]), 0, "edge record");
	/* symbols registered between records go into later SYMS chunks */
	for (i = nedge; i < NR_RANDOM; i++) {
		if (i % LATE_EVERY == 0) {
			snprintf(name, sizeof(name), "late_%zu", i);
			trace_writer__sym(w, PTG_SYM_PY_FUNC, name, "late.py", i);
		}
		random_record(&expect[i], 9 + i / LATE_EVERY, &ts);
		if (!ASSERT_EQ(trace_writer__record(w, &expect[i]), 0, "record"))
			exit(1);
	}
	ASSERT_EQ(trace_writer__meta(w, "pid", "4321"), 0, "meta written twice");
	ASSERT_EQ(trace_writer__loss(w, "py_event", 0, 5), 0, "loss");
	ASSERT_EQ(trace_writer__loss(w, "py_event", 1, 1), 0, "loss other cpu");
	ASSERT_EQ(trace_writer__loss(w, "py_event", 0, 10), 0, "loss adds up");
	ASSERT_EQ(trace_writer__loss(w, "cupti_records", UINT32_MAX, UINT64_MAX - 1), 0,
		  "loss not per cpu");
	ASSERT_EQ(trace_writer__loss(w, "a_name_that_is_far_too_long_for_it", 0, 1), -EINVAL,
		  "long loss name refused");
	ASSERT_EQ(trace_writer__close(w), 0, "writer close");
	*n = NR_RANDOM;
}

static void check_header_data(struct trace_reader *r)
{
	const struct ptg_loss *l;
	const struct ptg_sym *s;
	const char *k, *v;
	size_t n;

	ASSERT_EQ(trace_reader__nsyms(r), NR_SYMS, "symbol count");
	s = trace_reader__sym(r, syms[0]);
	if (ASSERT_TRUE(s != NULL, "symbol 1")) {
		ASSERT_EQ(s->id, 1, "sym id");
		ASSERT_EQ(s->kind, PTG_SYM_PY_FUNC, "sym kind");
		ASSERT_STREQ(s->name, "Model.forward", "sym name");
		ASSERT_STREQ(s->file, "/src/model.py", "sym file");
		ASSERT_EQ(s->line, 42, "sym line");
	}
	s = trace_reader__sym(r, syms[6]);
	ASSERT_TRUE(s && !strcmp(s->file, "/lib/libc.so.6") && s->kind == PTG_SYM_NATIVE,
		    "native symbol");
	s = trace_reader__sym(r, syms[4]);
	ASSERT_TRUE(s && !strcmp(s->name, "") && !strcmp(s->file, ""), "empty symbol");
	s = trace_reader__sym(r, NR_SYMS);
	ASSERT_TRUE(s && !strcmp(s->name, "late_350000") && s->line == 350000, "late symbol");
	ASSERT_TRUE(trace_reader__sym(r, 0) == NULL, "symbol 0 is none");
	ASSERT_TRUE(trace_reader__sym(r, 1000) == NULL, "symbol past the end");

	ASSERT_STREQ(trace_reader__meta(r, "pid"), "4321", "last meta value wins");
	ASSERT_STREQ(trace_reader__meta(r, "empty"), "", "empty meta");
	ASSERT_TRUE(trace_reader__meta(r, "nope") == NULL, "missing meta");
	ASSERT_TRUE(trace_reader__meta_at(r, 0, &k, &v) && !strcmp(k, "pid") && !strcmp(v, "1234"),
		    "meta_at 0");
	ASSERT_TRUE(trace_reader__meta_at(r, 2, &k, &v) && !strcmp(v, "4321"), "meta_at 2");
	ASSERT_TRUE(!trace_reader__meta_at(r, 3, &k, &v), "meta_at past the end");

	l = trace_reader__losses(r, &n);
	if (ASSERT_EQ(n, 3, "loss counters")) {
		ASSERT_TRUE(!strcmp(l[0].what, "py_event") && l[0].cpu == 0 && l[0].count == 15,
			    "loss summed");
		ASSERT_TRUE(l[1].cpu == 1 && l[1].count == 1, "loss cpu 1");
		ASSERT_TRUE(!strcmp(l[2].what, "cupti_records") && l[2].cpu == UINT32_MAX &&
				l[2].count == UINT64_MAX - 1,
			    "loss not per cpu");
	}
}

/* Rewrites the trace at path as version v of the format (trace_recode.h). */
static void set_version(const char *path, uint32_t v)
{
	uint8_t *data = NULL, *out = NULL;
	size_t len = 0, out_len = 0;
	FILE *f = fopen(path, "rb");
	long size;

	if (!ASSERT_TRUE(f != NULL, "reopen"))
		return;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	data = malloc(size > 0 ? size : 1);
	if (data && size > 0 && fread(data, 1, size, f) == (size_t)size)
		len = size;
	fclose(f);
	out = len ? trace_recode(data, len, v, &out_len) : NULL;
	if (ASSERT_TRUE(out != NULL, "recode") && (f = fopen(path, "wb"))) {
		ASSERT_EQ(fwrite(out, 1, out_len, f), out_len, "write recoded");
		fclose(f);
	}
	free(data);
	free(out);
}

static void check_records(struct trace_reader *r, const struct ptg_record *expect, size_t n)
{
	struct ptg_record rec;
	size_t i, bad = 0;
	int err;

	for (i = 0; i < n; i++) {
		err = trace_reader__next(r, &rec);
		if (!ASSERT_EQ(err, 1, "next")) {
			fprintf(stderr, "record %zu: %s\n", i, trace_reader__error(r));
			return;
		}
		if (!records_equal(&rec, &expect[i]) && bad++ < 5)
			fprintf(stderr, "record %zu (kind %u) differs\n", i, expect[i].kind);
	}
	ASSERT_EQ(bad, 0, "records equal");
	ASSERT_EQ(trace_reader__next(r, &rec), 0, "end");
	ASSERT_EQ(trace_reader__next(r, &rec), 0, "still end");
}

static void test_round_trip(void)
{
	struct ptg_record *expect = calloc(NR_RANDOM, sizeof(*expect));
	struct trace_reader *r;
	char path[256], err[256] = "";
	size_t n;

	tmp_path(path, sizeof(path), "roundtrip");
	write_trace(path, expect, &n);
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "reader open")) {
		fprintf(stderr, "%s\n", err);
		goto cleanup;
	}
	ASSERT_EQ(trace_reader__nrecords(r), n, "record count");
	check_header_data(r);
	check_records(r, expect, n);
	ASSERT_EQ(trace_reader__rewind(r), 0, "rewind");
	check_records(r, expect, n);
	trace_reader__close(r);
	/* the same trace as version 2 wrote it (zlib chunks) reads the same */
	set_version(path, 2);
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "version 2 open")) {
		fprintf(stderr, "%s\n", err);
		goto cleanup;
	}
	ASSERT_EQ(trace_reader__nrecords(r), n, "version 2 record count");
	check_header_data(r);
	check_records(r, expect, n);
	trace_reader__close(r);
cleanup:
	unlink(path);
	free(expect);
}

static void test_empty(void)
{
	struct trace_writer *w;
	struct trace_reader *r;
	struct ptg_record rec;
	char path[256], err[256] = "";
	size_t n = 1;

	tmp_path(path, sizeof(path), "empty");
	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		return;
	ASSERT_EQ(trace_writer__close(w), 0, "close empty");
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open empty")) {
		ASSERT_EQ(trace_reader__nrecords(r), 0, "no records");
		ASSERT_EQ(trace_reader__nsyms(r), 0, "no symbols");
		ASSERT_TRUE(trace_reader__losses(r, &n) == NULL && n == 0, "no losses");
		ASSERT_EQ(trace_reader__next(r, &rec), 0, "end at once");
		trace_reader__close(r);
	}
	unlink(path);
}

static void test_bad_files(void)
{
	static const uint8_t v7[16] = "PTGTRACE\7\0\0\0\0\0\0\0";
	struct trace_reader *r = NULL;
	char path[256], err[256];
	FILE *f;

	tmp_path(path, sizeof(path), "missing");
	ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), -ENOENT, "missing file");
	ASSERT_TRUE(strstr(err, path) != NULL, "message names the file");

	tmp_path(path, sizeof(path), "v7");
	f = fopen(path, "wb");
	fwrite(v7, 1, sizeof(v7), f);
	fclose(f);
	ASSERT_TRUE(trace_reader__open(path, &r, err, sizeof(err)) < 0, "version 7 refused");
	ASSERT_STREQ(err, "unsupported trace version 7 (this build reads 1 to 3)",
		     "version message");

	f = fopen(path, "wb");
	fputs("{\"traceEvents\": []}", f);
	fclose(f);
	ASSERT_TRUE(trace_reader__open(path, &r, err, sizeof(err)) < 0, "JSON refused");
	ASSERT_STREQ(err,
		     "not a ptrace-gpu trace but a JSON file (a Chrome/Kineto trace?): convert it "
		     "with 'ptrace-gpu import'",
		     "JSON is named");
	ASSERT_TRUE(r == NULL, "no reader on failure");
	unlink(path);
}

/* Writes random records until a write fails under a 256 KiB file size limit; returns how many. */
static size_t write_until_full(const char *path, bool keep_partial, struct ptg_record *expect)
{
	struct rlimit old, lim = {.rlim_cur = 256 << 10};
	struct trace_writer *w;
	uint64_t ts = 1000;
	size_t i;
	int err = 0;

	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		return 0;
	if (keep_partial)
		trace_writer__keep_partial(w);
	trace_writer__sym(w, PTG_SYM_PY_FUNC, "f", "f.py", 1);
	getrlimit(RLIMIT_FSIZE, &old);
	lim.rlim_max = old.rlim_max;
	ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0, "setrlimit");
	for (i = 0; i < NR_RANDOM && !err; i++) {
		random_record(&expect[i], 1, &ts);
		err = trace_writer__record(w, &expect[i]);
	}
	ASSERT_EQ(err, -EFBIG, "a record fails at the limit");
	ASSERT_EQ(trace_writer__close(w), -EFBIG, "close says it failed");
	setrlimit(RLIMIT_FSIZE, &old);
	return i;
}

static void test_write_failure(void)
{
	struct ptg_record *expect = calloc(NR_RANDOM, sizeof(*expect));
	struct trace_reader *r;
	const struct ptg_loss *l;
	char path[256], err[256] = "", old[8] = "";
	size_t sent, n = 0;
	FILE *f;

	/* past the limit the write fails with EFBIG instead of the signal killing us */
	signal(SIGXFSZ, SIG_IGN);
	tmp_path(path, sizeof(path), "full");
	f = fopen(path, "w");
	fputs("old", f);
	fclose(f);
	write_until_full(path, false, expect);
	f = fopen(path, "r");
	ASSERT_TRUE(f && fgets(old, sizeof(old), f), "read the previous file");
	ASSERT_STREQ(old, "old", "a failed write leaves the previous file");
	if (f)
		fclose(f);

	sent = write_until_full(path, true, expect);
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "partial trace opens")) {
		fprintf(stderr, "%s\n", err);
		goto cleanup;
	}
	l = trace_reader__losses(r, &n);
	ASSERT_EQ(n, 1, "one loss counter");
	if (n == 1) {
		ASSERT_STREQ(l->what, "trace_write", "loss counter name");
		ASSERT_EQ(trace_reader__nrecords(r) + l->count, sent, "kept + lost = written");
	}
	ASSERT_TRUE(trace_reader__nrecords(r) > 5000, "the complete chunks are kept");
	ASSERT_EQ(trace_reader__nsyms(r), 1, "the symbol is kept");
	check_records(r, expect, trace_reader__nrecords(r));
	trace_reader__close(r);
cleanup:
	signal(SIGXFSZ, SIG_DFL);
	unlink(path);
	free(expect);
}

/* ends on a record with args: none may seem to follow it */
#define NR_ARGS_RECS 30001

/* Args blobs: every third record has one, one of them larger than a whole chunk. */
static void write_args_trace(const char *path, bool with_args)
{
	struct ptg_record rec = {.kind = PTG_REC_GPU_KERNEL, .pid = 1, .tid = 2};
	static char big[300 * 1024];
	struct trace_writer *w;
	char args[64];
	int i;

	memset(big, 'x', sizeof(big) - 1);
	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		return;
	for (i = 0; i < NR_ARGS_RECS; i++) {
		rec.ts = 1000 + i;
		rec.corr = i;
		snprintf(args, sizeof(args), "{\"n\": %d}", i);
		if (!with_args || i % 3)
			ASSERT_EQ(trace_writer__record(w, &rec), 0, "record");
		else
			ASSERT_EQ(trace_writer__record_args(w, &rec, i == 300 ? big : args,
							    i == 300 ? strlen(big) : strlen(args)),
				  0, "record with args");
	}
	ASSERT_EQ(trace_writer__record_args(w, &rec, big, PTG_ARGS_MAX + 1), -EINVAL,
		  "args over the limit refused");
	ASSERT_EQ(trace_writer__close(w), 0, "close");
}

static void test_args(void)
{
	struct trace_reader *r;
	struct ptg_record rec;
	char path[256], err[256] = "", want[64];
	const char *args;
	size_t len = 0, bad = 0;
	int i;

	tmp_path(path, sizeof(path), "args");
	write_args_trace(path, true);
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open"))
		goto cleanup;
	ASSERT_EQ(trace_reader__nrecords(r), NR_ARGS_RECS, "args are not records");
	for (i = 0; trace_reader__next(r, &rec) == 1; i++) {
		args = trace_reader__args(r, &len);
		snprintf(want, sizeof(want), "{\"n\": %d}", i);
		if (rec.corr != (uint64_t)i || (i % 3 && args) || (!(i % 3) && !args))
			bad++;
		else if (i == 300 && (len != 300 * 1024 - 1 || args[len - 1] != 'x' || args[len]))
			bad++;
		else if (args && i != 300 && (strcmp(args, want) || len != strlen(want)))
			bad++;
	}
	ASSERT_EQ(i, NR_ARGS_RECS, "all records");
	ASSERT_EQ(bad, 0, "records with the wrong args");
	ASSERT_TRUE(trace_reader__args(r, NULL) == NULL, "no args past the end");
	trace_reader__close(r);
	/* a version 1 file had no args: one that has them is corrupt */
	set_version(path, 1);
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open as version 1")) {
		while ((i = trace_reader__next(r, &rec)) == 1)
			;
		ASSERT_TRUE(i < 0, "args refused in version 1");
		ASSERT_STREQ(trace_reader__error(r), "corrupted trace file: bad record in chunk 0",
			     "version 1 message");
		trace_reader__close(r);
	}
	/* a version 1 file without them still reads */
	write_args_trace(path, false);
	set_version(path, 1);
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "version 1 trace")) {
		for (i = 0; trace_reader__next(r, &rec) == 1; i++)
			bad += trace_reader__args(r, NULL) != NULL;
		ASSERT_EQ(i, NR_ARGS_RECS, "version 1 records");
		ASSERT_EQ(bad, 0, "no args in version 1");
		trace_reader__close(r);
	}
cleanup:
	unlink(path);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Loss counters merge by hash, in the writer and across the reader's LOSS
 * chunks: 200,000 of them took a scan each (minutes), now well under 10 s.
 */
#define NR_LOSSES 200000

static void test_many_losses(void)
{
	const struct ptg_loss *l;
	struct trace_writer *w;
	struct trace_reader *r;
	char path[256], err[256] = "", what[32];
	double t0 = now_s(), took;
	bool all = true;
	size_t n = 0;

	tmp_path(path, sizeof(path), "losses");
	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "writer open"))
		return;
	for (int round = 0; round < 2; round++) {
		for (uint32_t i = 0; i < NR_LOSSES; i++) {
			snprintf(what, sizeof(what), "loss%u", i / 4);
			all &= trace_writer__loss(w, what, i % 4, round + 1) == 0;
		}
	}
	ASSERT_TRUE(all, "every loss added");
	ASSERT_EQ(trace_writer__close(w), 0, "close");
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open")) {
		l = trace_reader__losses(r, &n);
		ASSERT_EQ(n, NR_LOSSES, "distinct counters");
		ASSERT_STREQ(n ? l[n - 1].what : NULL, "loss49999", "last counter");
		ASSERT_EQ(n ? l[n - 1].cpu : 0, 3, "its cpu");
		ASSERT_EQ(n ? l[n - 1].count : 0, 3, "its count, added up");
		trace_reader__close(r);
	}
	took = now_s() - t0;
	printf("%d loss counters written twice and read: %.2f s\n", NR_LOSSES, took);
	ASSERT_TRUE(took < 10, "loss counters merge in linear time");
	unlink(path);
}

int main(void)
{
	test_round_trip();
	test_args();
	test_empty();
	test_bad_files();
	test_write_failure();
	test_many_losses();
	return TEST_DONE();
}
