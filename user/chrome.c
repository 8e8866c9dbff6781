// SPDX-License-Identifier: MIT
/*
 * Chrome trace writer. Records are written in file order; a Python function
 * or op becomes one "X" event when its EXIT arrives, so memory is bounded by
 * threads x stack depth. Field conventions are those of kineto.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <zlib.h>

#include "chrome.h"
#include "cudajoin.h"
#include "kineto.h"
#include "utf8.h"

#define FLUSH_AT (64 * 1024)

struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

struct cthread {
	uint32_t pid, tid;
	struct ptg_record *frames;
	size_t depth, cap;
	bool used;
};

struct chrome {
	struct trace_reader *r;
	gzFile gz;
	const char *path;
	struct sbuf b;
	bool kineto; /* META source=kineto: pid/tid and flows are stored as they were */
	bool first;  /* no event written yet */
	uint64_t last_ts;
	struct cthread *threads;
	size_t tmask, nthreads;
	struct u64map joins; /* host call id -> correlation id (cudajoin.h) */
};

static void sb_reserve(struct sbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->err || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return;
	}
	b->p = p;
	b->cap = cap;
}

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	sb_reserve(b, n);
	if (b->err)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n >= 0)
		sb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string literal; a byte that starts no valid UTF-8 sequence becomes U+FFFD. */
static void sb_json(struct sbuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];
	size_t n;

	sb_put(b, "\"", 1);
	for (; *p; p += n) {
		n = utf8_seq_len(p);
		if (!n) {
			sb_put(b, UTF8_REPLACEMENT, 3);
			n = 1;
		} else if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = *p;
			sb_put(b, esc, 2);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			sb_put(b, esc, 6);
		} else {
			sb_put(b, (const char *)p, n);
		}
	}
	sb_put(b, "\"", 1);
}

/* ns -> µs with exactly 3 decimals: the importer reads it back to the same ns */
static void sb_us(struct sbuf *b, uint64_t ns)
{
	sb_printf(b, "%" PRIu64 ".%03u", ns / 1000, (unsigned int)(ns % 1000));
}

static int out_flush(struct chrome *c)
{
	if (c->b.err)
		return c->b.err;
	if (c->b.len && gzwrite(c->gz, c->b.p, c->b.len) != (int)c->b.len) {
		int errnum;

		fprintf(stderr, "chrome: %s: %s\n", c->path, gzerror(c->gz, &errnum));
		return -EIO;
	}
	c->b.len = 0;
	return 0;
}

static const char *sym_name(const struct chrome *c, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(c->r, id);

	return s ? s->name : "";
}

/* Starts an event object: the separator, then {"ph": ..., "cat": ..., "name": ... */
static void ev_begin(struct chrome *c, const char *ph, const char *cat)
{
	sb_str(&c->b, c->first ? "\n  {\"ph\": \"" : ",\n  {\"ph\": \"");
	c->first = false;
	sb_str(&c->b, ph);
	sb_str(&c->b, "\", \"cat\": ");
	sb_json(&c->b, cat);
}

static void ev_where(struct chrome *c, uint32_t pid, uint32_t tid, uint64_t ts)
{
	sb_printf(&c->b, ", \"pid\": %d, \"tid\": %d, \"ts\": ", (int32_t)pid, (int32_t)tid);
	sb_us(&c->b, ts);
}

/* Args are written as they come; the first one opens the object. */
struct args {
	struct sbuf *b;
	bool open;
};

static void arg_key(struct args *a, const char *key)
{
	sb_str(a->b, a->open ? ", " : ", \"args\": {");
	a->open = true;
	sb_json(a->b, key);
	sb_str(a->b, ": ");
}

static void arg_int(struct args *a, const char *key, int64_t v)
{
	arg_key(a, key);
	sb_printf(a->b, "%" PRId64, v);
}

/* An id stored as value + 1 (0 = absent). */
static void arg_id1(struct args *a, const char *key, int64_t v)
{
	if (v)
		arg_int(a, key, v - 1);
}

static void arg_nz(struct args *a, const char *key, uint64_t v)
{
	if (v)
		arg_int(a, key, (int64_t)v);
}

static void arg_str(struct args *a, const char *key, const char *v)
{
	arg_key(a, key);
	sb_json(a->b, v);
}

static void arg_dims(struct args *a, const char *key, int64_t xy, int64_t z)
{
	arg_key(a, key);
	sb_printf(a->b, "[%u, %u, %" PRId64 "]", (uint32_t)xy, (uint32_t)((uint64_t)xy >> 32), z);
}

static void ev_end(struct chrome *c, struct args *a)
{
	sb_str(&c->b, a->open ? "}}" : "}");
}

static void ev_x(struct chrome *c, const char *cat, const char *name, uint32_t pid, uint32_t tid,
		 uint64_t ts, uint64_t dur)
{
	ev_begin(c, "X", cat);
	sb_str(&c->b, ", \"name\": ");
	sb_json(&c->b, name);
	ev_where(c, pid, tid, ts);
	sb_str(&c->b, ", \"dur\": ");
	sb_us(&c->b, dur);
}

/* Python names as Kineto writes them: "file(line): function". */
static void py_name(const struct chrome *c, uint32_t id, char *buf, size_t len)
{
	const struct ptg_sym *s = trace_reader__sym(c->r, id);

	if (s && s->file && s->file[0])
		snprintf(buf, len, "%s(%u): %s", s->file, s->line, s->name);
	else
		snprintf(buf, len, "%s", s ? s->name : "");
}

static void write_span(struct chrome *c, const struct ptg_record *enter, uint64_t end)
{
	bool py = enter->kind == PTG_REC_PY_ENTER;
	struct args a = {&c->b};
	char name[4096];

	if (py)
		py_name(c, enter->sym, name, sizeof(name));
	ev_x(c, py ? "python_function" : "cpu_op", py ? name : sym_name(c, enter->sym), enter->pid,
	     enter->tid, enter->ts, end > enter->ts ? end - enter->ts : 0);
	arg_nz(&a, "External id", enter->ext);
	arg_id1(&a, py ? "Python id" : "Sequence number", enter->aux[0]);
	arg_id1(&a, py ? "Python parent id" : "Fwd thread id", enter->aux[1]);
	ev_end(c, &a);
}

static const char *call_cat(const struct chrome *c, const struct ptg_record *rec)
{
	const char *name = sym_name(c, rec->sym);
	bool driver;

	if (c->kineto)
		driver = rec->aux[1] == KINETO_CALL_DRIVER;
	else
		driver = !strncmp(name, "cu", 2) && strncmp(name, "cuda", 4);
	return driver ? "cuda_driver" : "cuda_runtime";
}

static void write_call(struct chrome *c, const struct ptg_record *rec)
{
	struct args a = {&c->b};

	ev_x(c, call_cat(c, rec), sym_name(c, rec->sym), rec->pid, rec->tid, rec->ts, rec->dur);
	arg_nz(&a, "External id", rec->ext);
	arg_nz(&a, "cbid", c->kineto ? rec->aux[0] : 0);
	arg_nz(&a, "correlation", rec->corr);
	ev_end(c, &a);
}

static void write_span_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = rec->aux[0] ? sym_name(c, rec->aux[0]) : "";
	struct args a = {&c->b};

	ev_x(c, cat[0] ? cat : "user_annotation", sym_name(c, rec->sym), rec->pid, rec->tid,
	     rec->ts, rec->dur);
	arg_nz(&a, "External id", rec->ext);
	ev_end(c, &a);
}

static const char *gpu_cat(uint16_t kind)
{
	switch (kind) {
	case PTG_REC_GPU_KERNEL:
		return "kernel";
	case PTG_REC_GPU_MEMCPY:
		return "gpu_memcpy";
	case PTG_REC_GPU_MEMSET:
		return "gpu_memset";
	default:
		return "cuda_sync";
	}
}

static void gpu_args(struct chrome *c, const struct ptg_record *rec, struct args *a)
{
	switch (rec->kind) {
	case PTG_REC_GPU_KERNEL:
		if (rec->aux[0] || rec->aux[1])
			arg_dims(a, "grid", rec->aux[0], rec->aux[1]);
		if (rec->aux[2] || rec->aux[3])
			arg_dims(a, "block", rec->aux[2], rec->aux[3]);
		break;
	case PTG_REC_GPU_MEMCPY:
	case PTG_REC_GPU_MEMSET:
		arg_int(a, "bytes", rec->aux[0]);
		break;
	default:
		if (rec->aux[0] && c->kineto)
			arg_str(a, "cuda_sync_kind", sym_name(c, rec->aux[0]));
		arg_id1(a, "wait_on_stream", rec->aux[1]);
		arg_id1(a, "wait_on_cuda_event_record_corr_id", rec->aux[2]);
		arg_id1(a, "wait_on_cuda_event_id", rec->aux[3]);
	}
}

static void write_gpu(struct chrome *c, const struct ptg_record *rec)
{
	struct args a = {&c->b};
	/* Kineto's GPU rows: pid = device, tid = stream */
	uint32_t pid = c->kineto ? rec->pid : rec->device;
	uint32_t tid = c->kineto ? rec->tid : (uint32_t)rec->stream;

	ev_x(c, gpu_cat(rec->kind), sym_name(c, rec->sym), pid, tid, rec->ts, rec->dur);
	arg_nz(&a, "External id", rec->ext);
	arg_int(&a, "device", rec->device);
	arg_int(&a, "stream", (int64_t)rec->stream);
	arg_nz(&a, "correlation", rec->corr);
	gpu_args(c, rec, &a);
	ev_end(c, &a);
}

static void write_flow(struct chrome *c, char ph, const char *cat, const char *name, uint32_t pid,
		       uint32_t tid, uint64_t ts, uint64_t id, bool bp_enclosing)
{
	char phs[2] = {ph, '\0'};

	ev_begin(c, phs, cat);
	sb_str(&c->b, ", \"name\": ");
	sb_json(&c->b, name);
	sb_printf(&c->b, ", \"id\": %" PRIu64, id);
	ev_where(c, pid, tid, ts);
	sb_str(&c->b, bp_enclosing ? ", \"bp\": \"e\"}" : "}");
}

static void write_flow_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = sym_name(c, rec->aux[2]);

	if (rec->aux[0] != 's' && rec->aux[0] != 'f' && rec->aux[0] != 't')
		return;
	write_flow(c, rec->aux[0], cat[0] ? cat : "ac2g", sym_name(c, rec->sym), rec->pid, rec->tid,
		   rec->ts, rec->corr, rec->aux[1]);
}

static void write_thread(struct chrome *c, const struct ptg_record *rec)
{
	int64_t m = rec->aux[0] >= 0 && rec->aux[0] < KINETO_M_NR ? rec->aux[0] : 0;
	struct args a = {&c->b};

	sb_str(&c->b,
	       c->first ? "\n  {\"ph\": \"M\", \"name\": " : ",\n  {\"ph\": \"M\", \"name\": ");
	c->first = false;
	sb_json(&c->b, kineto_meta_names[m]);
	ev_where(c, rec->pid, rec->tid, rec->ts);
	if (m == KINETO_M_PROCESS_SORT_INDEX || m == KINETO_M_THREAD_SORT_INDEX)
		arg_int(&a, "sort_index", rec->aux[1]);
	else
		arg_str(&a, m == KINETO_M_PROCESS_LABELS ? "labels" : "name",
			sym_name(c, rec->sym));
	ev_end(c, &a);
}

static size_t thread_hash(uint32_t pid, uint32_t tid)
{
	uint64_t k = ((uint64_t)pid << 32 | tid) * 0x9e3779b97f4a7c15ull;

	return k ^ k >> 32;
}

static struct cthread *thread_slot(struct cthread *t, size_t mask, uint32_t pid, uint32_t tid)
{
	size_t i;

	for (i = thread_hash(pid, tid) & mask; t[i].used; i = (i + 1) & mask) {
		if (t[i].pid == pid && t[i].tid == tid)
			break;
	}
	return &t[i];
}

static int threads_grow(struct chrome *c)
{
	size_t mask = c->threads ? 2 * c->tmask + 1 : 63, i;
	struct cthread *t = calloc(mask + 1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (i = 0; c->threads && i <= c->tmask; i++) {
		if (c->threads[i].used)
			*thread_slot(t, mask, c->threads[i].pid, c->threads[i].tid) = c->threads[i];
	}
	free(c->threads);
	c->threads = t;
	c->tmask = mask;
	return 0;
}

static struct cthread *thread_get(struct chrome *c, uint32_t pid, uint32_t tid, bool create)
{
	struct cthread *t;

	if (!c->threads && (!create || threads_grow(c)))
		return NULL;
	t = thread_slot(c->threads, c->tmask, pid, tid);
	if (t->used || !create)
		return t->used ? t : NULL;
	if ((c->nthreads + 1) * 2 > c->tmask + 1) {
		if (threads_grow(c))
			return NULL;
		t = thread_slot(c->threads, c->tmask, pid, tid);
	}
	*t = (struct cthread){.pid = pid, .tid = tid, .used = true};
	c->nthreads++;
	return t;
}

static int span_enter(struct chrome *c, const struct ptg_record *rec)
{
	struct cthread *t = thread_get(c, rec->pid, rec->tid, true);
	struct ptg_record *f;

	if (!t)
		return -ENOMEM;
	if (t->depth == t->cap) {
		f = realloc(t->frames, (t->cap ? 2 * t->cap : 16) * sizeof(*f));
		if (!f)
			return -ENOMEM;
		t->frames = f;
		t->cap = t->cap ? 2 * t->cap : 16;
	}
	t->frames[t->depth++] = *rec;
	return 0;
}

static void span_exit(struct chrome *c, const struct ptg_record *rec)
{
	struct cthread *t = thread_get(c, rec->pid, rec->tid, false);

	/* an EXIT without ENTER (recording started inside the call) has no start */
	if (t && t->depth)
		write_span(c, &t->frames[--t->depth], rec->ts);
}

static void write_synth_flows(struct chrome *c, const struct ptg_record *rec)
{
	if (c->kineto || !rec->corr)
		return;
	if (rec->kind == PTG_REC_CUDA_CALL)
		write_flow(c, 's', "ac2g", "ac2g", rec->pid, rec->tid, rec->ts, rec->corr, false);
	else
		write_flow(c, 'f', "ac2g", "ac2g", rec->device, (uint32_t)rec->stream, rec->ts,
			   rec->corr, true);
}

static int write_record(struct chrome *c, const struct ptg_record *rec)
{
	struct ptg_record call;

	if (rec->ts + rec->dur > c->last_ts)
		c->last_ts = rec->ts + rec->dur;
	switch (rec->kind) {
	case PTG_REC_PY_ENTER:
	case PTG_REC_OP_ENTER:
		return span_enter(c, rec);
	case PTG_REC_PY_EXIT:
	case PTG_REC_OP_EXIT:
		span_exit(c, rec);
		break;
	case PTG_REC_SPAN:
		write_span_rec(c, rec);
		break;
	case PTG_REC_CUDA_CALL:
		/* a probed call carries the id of the CUPTI record joined to it, as Kineto's do */
		call = *rec;
		call.corr = cuda_join_corr(&c->joins, rec);
		write_call(c, &call);
		write_synth_flows(c, &call);
		break;
	case PTG_REC_GPU_KERNEL:
	case PTG_REC_GPU_MEMCPY:
	case PTG_REC_GPU_MEMSET:
	case PTG_REC_GPU_SYNC:
		write_gpu(c, rec);
		if (rec->kind != PTG_REC_GPU_SYNC)
			write_synth_flows(c, rec);
		break;
	case PTG_REC_FLOW:
		write_flow_rec(c, rec);
		break;
	case PTG_REC_THREAD:
		write_thread(c, rec);
		break;
	default:
		/* scheduler intervals and samples have no place in Kineto's schema */
		break;
	}
	return c->b.len >= FLUSH_AT ? out_flush(c) : c->b.err;
}

/* Spans still open at the end of the trace close at its last timestamp. */
static void close_open_spans(struct chrome *c)
{
	size_t i;

	for (i = 0; c->threads && i <= c->tmask; i++) {
		struct cthread *t = &c->threads[i];

		while (t->used && t->depth)
			write_span(c, &t->frames[--t->depth], c->last_ts);
	}
}

/*
 * A top-level value of an imported trace, kept as JSON text in the trace's
 * metadata: any .ptg can hold any text there, so it is parsed and written
 * again (as valid UTF-8), or written as a string when it is no JSON.
 */
static void sb_json_value(struct sbuf *b, const char *text)
{
	json_object *o = json_tokener_parse(text);
	char *valid;

	/* json-c's NULL is also what it parses "null" into */
	if (!o && strcmp(text, "null")) {
		sb_json(b, text);
		return;
	}
	valid = utf8_valid_dup(o ? json_object_to_json_string_ext(
				       o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
				 : "null");
	json_object_put(o);
	if (!valid) {
		b->err = -ENOMEM;
		return;
	}
	sb_str(b, valid);
	free(valid);
}

static bool is_kineto_key(const char *key)
{
	return !strncmp(key, KINETO_META_PREFIX, strlen(KINETO_META_PREFIX));
}

static void write_header(struct chrome *c)
{
	const char *key, *val;
	size_t i;

	sb_str(&c->b, "{");
	/* a trace recorded here has no Kineto keys: say which schema it follows */
	if (!trace_reader__meta(c->r, KINETO_META_PREFIX "schemaVersion"))
		sb_str(&c->b, "\n  \"schemaVersion\": 1,");
	for (i = 0; trace_reader__meta_at(c->r, i, &key, &val); i++) {
		if (!is_kineto_key(key) || !strcmp(key, KINETO_META_PREFIX "displayTimeUnit"))
			continue;
		sb_str(&c->b, "\n  ");
		sb_json(&c->b, key + strlen(KINETO_META_PREFIX));
		sb_str(&c->b, ": ");
		sb_json_value(&c->b, val);
		sb_str(&c->b, ",");
	}
	sb_str(&c->b, "\n  \"traceEvents\": [");
}

static void write_footer(struct chrome *c)
{
	const char *unit = trace_reader__meta(c->r, KINETO_META_PREFIX "displayTimeUnit");

	sb_str(&c->b, "\n  ],\n  \"displayTimeUnit\": ");
	sb_json_value(&c->b, unit ? unit : "\"ms\"");
	sb_str(&c->b, "\n}\n");
}

static int write_all(struct chrome *c)
{
	struct ptg_record rec;
	int err;

	write_header(c);
	while ((err = trace_reader__next(c->r, &rec)) > 0) {
		err = write_record(c, &rec);
		if (err)
			return err;
	}
	if (err < 0) {
		fprintf(stderr, "chrome: %s\n", trace_reader__error(c->r));
		return err;
	}
	close_open_spans(c);
	write_footer(c);
	return out_flush(c);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static void chrome_free(struct chrome *c)
{
	size_t i;

	for (i = 0; c->threads && i <= c->tmask; i++)
		free(c->threads[i].frames);
	free(c->threads);
	free(c->b.p);
	u64map__free(&c->joins);
}

int chrome_export(struct trace_reader *r, const char *out_path)
{
	const char *source = trace_reader__meta(r, "source");
	struct chrome c = {.r = r, .path = out_path, .first = true};
	int err, zerr;

	c.kineto = source && !strcmp(source, "kineto");
	/* "T": zlib writes plain bytes, so both outputs share one code path */
	c.gz = gzopen(out_path, ends_with(out_path, ".gz") ? "wb6" : "wbT");
	if (!c.gz) {
		err = -(errno ? errno : ENOMEM);
		fprintf(stderr, "chrome: %s: %s\n", out_path, strerror(-err));
		return err;
	}
	gzbuffer(c.gz, 256 * 1024);
	err = cuda_join_load(r, &c.joins);
	if (!err)
		err = write_all(&c);
	if (err == -ENOMEM)
		fprintf(stderr, "chrome: out of memory\n");
	zerr = gzclose(c.gz);
	if (!err && zerr != Z_OK) {
		fprintf(stderr, "chrome: %s: write failed\n", out_path);
		err = -EIO;
	}
	chrome_free(&c);
	return err;
}
