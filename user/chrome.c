// SPDX-License-Identifier: MIT
/*
 * Chrome trace writer. A Python function or op becomes one "X" event when its
 * EXIT arrives, so events come out of the records children first; they are
 * kept in memory and written sorted by start, longer first, so that every
 * reader (Perfetto nests equal starts in file order) sees parents before
 * their children. Field conventions are those of trace_kineto.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <zlib.h>

#include "array.h"
#include "chrome.h"
#include "cudajoin.h"
#include "trace_kineto.h"
#include "kineto_args.h"
#include "outfile.h"
#include "utf8.h"

#define FLUSH_AT (64 * 1024)

/*
 * Tracks of their own for what would cut across a thread's nested Python
 * frames and ops: ProfilerStep#N spans of a recorded trace (a step ends where
 * optimizer.step() returns, deep inside the loop's frames) and off-CPU
 * intervals. Their tids are the thread's with a high bit set (Linux tids stay
 * below 2^22), named by thread_name metadata and sorted next to the thread.
 */
#define STEPS_TRACK  0x40000000u
#define OFFCPU_TRACK 0x20000000u
/* the key of a process's own process_name in tracks: no thread has this tid */
#define PROCESS_TRACK 0xffffffffu
/* a thread's name (at most 15 bytes from the kernel, more from a trace) and its container tid */
#define PTG_NAME_IN_NS_MAX 320

struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

struct cthread {
	uint32_t pid, tid;
	struct ptg_record *frames;
	char **frame_args; /* args blob of each frame's ENTER, NULL for none */
	size_t depth, cap;
	bool used;
};

/* One event in c->b: it runs from off to the next one's off. */
struct cevent {
	size_t off, end;
	uint64_t ts, dur;
	size_t seq;
	bool meta; /* "M": ahead of every other event */
};

struct chrome {
	struct trace_reader *r;
	gzFile gz;
	const char *path;
	struct sbuf b; /* every event, in the order they were made */
	struct cevent *evs;
	size_t nevs, evs_cap;
	struct u64map tracks; /* pid << 32 | track tid of the tracks named so far */
	bool kineto;	      /* META source=kineto: pid/tid and flows are stored as they were */
	uint64_t last_ts;
	struct cthread *threads;
	size_t tmask, nthreads;
	struct cuda_links links; /* a recorded trace's joins, cbids, External ids */
	const char *args;	 /* args blob of the record being written, or NULL */
	unsigned int nkeys;	 /* top-level keys written so far */
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

/* Indexes the event that starts at the end of c->b. */
static void ev_new(struct chrome *c, bool meta)
{
	struct cevent *e;

	if (c->b.err)
		return;
	if (array_grow((void **)&c->evs, &c->evs_cap, c->nevs + 1, sizeof(*c->evs))) {
		c->b.err = -ENOMEM;
		return;
	}
	e = &c->evs[c->nevs];
	*e = (struct cevent){.off = c->b.len, .seq = c->nevs, .meta = meta};
	c->nevs++;
}

/* Starts an event object: {"ph": ..., "cat": ..., "name": ... */
static void ev_begin(struct chrome *c, const char *ph, const char *cat)
{
	ev_new(c, false);
	sb_str(&c->b, "{\"ph\": \"");
	sb_str(&c->b, ph);
	sb_str(&c->b, "\", \"cat\": ");
	sb_json(&c->b, cat);
}

static void ev_where(struct chrome *c, uint32_t pid, uint32_t tid, uint64_t ts)
{
	sb_printf(&c->b, ", \"pid\": %d, \"tid\": %d, \"ts\": ", (int32_t)pid, (int32_t)tid);
	sb_us(&c->b, ts);
	if (c->nevs)
		c->evs[c->nevs - 1].ts = ts;
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

/* The shortest text that reads back as the same double, as Kineto's fmt writes it. */
static void arg_double(struct args *a, const char *key, double v)
{
	char buf[32];
	int prec;

	for (prec = 15; prec < 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	snprintf(buf, sizeof(buf), "%.*g", prec, v);
	arg_key(a, key);
	/* a whole number stays a JSON float, as 7.0 */
	sb_str(a->b, buf);
	if (!strpbrk(buf, ".eEn"))
		sb_str(a->b, ".0");
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

/*
 * The members of an args blob (kineto_args.h) after those written, for a
 * record imported with one: its Kineto args and unknown keys as they came.
 */
static void ev_extra(struct chrome *c, const char *blob)
{
	size_t n = blob ? strlen(blob) : 0;

	/* "{}" has none; the blob is an object, so its members lie between the braces */
	if (n > 2 && blob[0] == '{' && blob[n - 1] == '}') {
		sb_str(&c->b, ", ");
		sb_put(&c->b, blob + 1, n - 2);
	}
}

/* A record's own further args (PTG_F_ARGS_ADD): the blob's members inside "args". */
static void arg_members(struct args *a, const char *blob)
{
	size_t n = strlen(blob);

	if (n <= 2 || blob[0] != '{' || blob[n - 1] != '}')
		return;
	sb_str(a->b, a->open ? ", " : ", \"args\": {");
	a->open = true;
	sb_put(a->b, blob + 1, n - 2);
}

static void ev_end(struct chrome *c, struct args *a, const char *blob)
{
	if (a->open)
		sb_str(&c->b, "}");
	ev_extra(c, blob);
	sb_str(&c->b, "}");
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
	if (c->nevs)
		c->evs[c->nevs - 1].dur = dur;
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

static void write_span(struct chrome *c, const struct ptg_record *enter, const char *blob,
		       uint64_t end)
{
	bool py = enter->kind == PTG_REC_PY_ENTER;
	struct args a = {&c->b};
	char name[4096];

	if (py)
		py_name(c, enter->sym, name, sizeof(name));
	ev_x(c, py ? "python_function" : "cpu_op", py ? name : sym_name(c, enter->sym), enter->pid,
	     enter->tid, enter->ts, end > enter->ts ? end - enter->ts : 0);
	if (!blob) {
		arg_nz(&a, "External id", enter->ext);
		arg_id1(&a, py ? "Python id" : "Sequence number", enter->aux[0]);
		arg_id1(&a, py ? "Python parent id" : "Fwd thread id", enter->aux[1]);
	}
	ev_end(c, &a, blob);
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
	if (!c->args) {
		arg_nz(&a, "External id", rec->ext);
		arg_nz(&a, "cbid", cuda_links_cbid(&c->links, rec));
		arg_nz(&a, "correlation", rec->corr);
	}
	ev_end(c, &a, c->args);
}

/* Whether key (a track) is seen here for the first time; on no memory, the error is kept. */
static bool first_sight(struct chrome *c, uint64_t key)
{
	if (u64map__get(&c->tracks, key))
		return false;
	if (u64map__put(&c->tracks, key, 1)) {
		c->b.err = -ENOMEM;
		return false;
	}
	return true;
}

/* thread_name and thread_sort_index of a track of thread tid, once per track. */
static void name_track(struct chrome *c, uint32_t pid, uint32_t tid, uint32_t track,
		       const char *what, uint64_t ts)
{
	uint64_t key = u64map_key((uint64_t)pid << 32 | track);
	struct args a = {&c->b};
	char name[64];

	if (!first_sight(c, key))
		return;
	snprintf(name, sizeof(name), "thread %u %s", tid, what);
	ev_new(c, true);
	sb_str(&c->b, "{\"ph\": \"M\", \"name\": \"thread_name\"");
	ev_where(c, pid, track, ts);
	arg_str(&a, "name", name);
	ev_end(c, &a, NULL);
	a.open = false;
	ev_new(c, true);
	sb_str(&c->b, "{\"ph\": \"M\", \"name\": \"thread_sort_index\"");
	ev_where(c, pid, track, ts);
	arg_int(&a, "sort_index", tid);
	ev_end(c, &a, NULL);
}

/* A recorded trace's ProfilerStep#N (steps.c), which a Kineto trace does not split off. */
static bool is_step(const struct chrome *c, const struct ptg_record *rec)
{
	return !c->kineto && !strncmp(sym_name(c, rec->sym), "ProfilerStep#", 13);
}

static void write_span_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = rec->aux[0] ? sym_name(c, rec->aux[0]) : "";
	struct args a = {&c->b};
	uint32_t tid = rec->tid;

	if (is_step(c, rec)) {
		tid |= STEPS_TRACK;
		name_track(c, rec->pid, rec->tid, tid, "steps", rec->ts);
	}
	ev_x(c, cat[0] ? cat : "user_annotation", sym_name(c, rec->sym), rec->pid, tid, rec->ts,
	     rec->dur);
	if (!c->args)
		arg_nz(&a, "External id", rec->ext);
	ev_end(c, &a, c->args);
}

/* An off-CPU interval of a thread (schedprobe.c), on the thread's off-CPU track. */
static void write_sched(struct chrome *c, const struct ptg_record *rec)
{
	uint32_t track = rec->tid | OFFCPU_TRACK;
	struct args a = {&c->b};
	const char *why = rec->aux[0] == PTG_SCHED_PREEMPTED ? "preempted"
			  : rec->aux[0] == PTG_SCHED_BLOCKED ? "blocked"
							     : "off-CPU";

	name_track(c, rec->pid, rec->tid, track, "off-CPU", rec->ts);
	ev_x(c, "off_cpu", why, rec->pid, track, rec->ts, rec->dur);
	arg_nz(&a, "runqueue delay ns", (uint64_t)rec->aux[1]);
	arg_nz(&a, "waker tid", (uint64_t)rec->aux[2]);
	if (rec->sym)
		arg_str(&a, "blocked in", sym_name(c, rec->sym));
	ev_end(c, &a, NULL);
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
		/* Kineto's: bytes per ns, which is GB/s; none for a zero duration */
		if (rec->dur)
			arg_double(a, "memory bandwidth (GB/s)", (double)rec->aux[0] / rec->dur);
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
	bool add = c->args && (rec->flags & PTG_F_ARGS_ADD);

	ev_x(c, gpu_cat(rec->kind), sym_name(c, rec->sym), pid, tid, rec->ts, rec->dur);
	if (!c->args || add) {
		/* a recorded GPU record names its op as Kineto's do: through its CUDA call */
		arg_nz(&a, "External id", rec->ext ?: cuda_links_ext(&c->links, rec->corr));
		arg_int(&a, "device", rec->device);
		arg_int(&a, "stream", (int64_t)rec->stream);
		arg_nz(&a, "correlation", rec->corr);
		gpu_args(c, rec, &a);
	}
	if (add)
		arg_members(&a, c->args);
	ev_end(c, &a, add ? NULL : c->args);
}

static void write_flow(struct chrome *c, char ph, const char *cat, const char *name, uint32_t pid,
		       uint32_t tid, uint64_t ts, uint64_t id, bool bp_enclosing, const char *blob)
{
	char phs[2] = {ph, '\0'};

	ev_begin(c, phs, cat);
	sb_str(&c->b, ", \"name\": ");
	sb_json(&c->b, name);
	sb_printf(&c->b, ", \"id\": %" PRIu64, id);
	ev_where(c, pid, tid, ts);
	if (bp_enclosing)
		sb_str(&c->b, ", \"bp\": \"e\"");
	ev_extra(c, blob);
	sb_str(&c->b, "}");
}

static void write_flow_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = sym_name(c, rec->aux[2]);

	if (rec->aux[0] != 's' && rec->aux[0] != 'f' && rec->aux[0] != 't')
		return;
	write_flow(c, rec->aux[0], cat[0] ? cat : "ac2g", sym_name(c, rec->sym), rec->pid, rec->tid,
		   rec->ts, rec->corr, rec->aux[1], c->args);
}

/*
 * A recorded thread in a container (aux[2], aux[3]: its pid and tid there):
 * its process is named "pid 12345 (container pid 1)" once, as Perfetto shows
 * process_name beside the pid, and the thread's name says its container tid.
 */
static void name_ns_process(struct chrome *c, const struct ptg_record *rec)
{
	uint64_t key = u64map_key((uint64_t)rec->pid << 32 | PROCESS_TRACK);
	struct args a = {&c->b};
	char name[64];

	if (!first_sight(c, key))
		return;
	snprintf(name, sizeof(name), "pid %u (container pid %u)", rec->pid, (uint32_t)rec->aux[2]);
	ev_new(c, true);
	sb_str(&c->b, "{\"ph\": \"M\", \"name\": \"process_name\"");
	ev_where(c, rec->pid, 0, rec->ts);
	arg_str(&a, "name", name);
	ev_end(c, &a, NULL);
}

static void write_thread(struct chrome *c, const struct ptg_record *rec)
{
	int64_t m = rec->aux[0] >= 0 && rec->aux[0] < KINETO_M_NR ? rec->aux[0] : 0;
	bool ns = !c->kineto && m == KINETO_M_THREAD_NAME && rec->aux[3] > 0;
	struct args a = {&c->b};
	char name[PTG_NAME_IN_NS_MAX];

	if (ns) {
		name_ns_process(c, rec);
		snprintf(name, sizeof(name), "%s (container tid %u)", sym_name(c, rec->sym),
			 (uint32_t)rec->aux[3]);
	}
	ev_new(c, true);
	sb_str(&c->b, "{\"ph\": \"M\", \"name\": ");
	sb_json(&c->b, kineto_meta_names[m]);
	ev_where(c, rec->pid, rec->tid, rec->ts);
	if (m == KINETO_M_PROCESS_SORT_INDEX || m == KINETO_M_THREAD_SORT_INDEX)
		arg_int(&a, "sort_index", rec->aux[1]);
	else
		arg_str(&a, m == KINETO_M_PROCESS_LABELS ? "labels" : "name",
			ns ? name : sym_name(c, rec->sym));
	ev_end(c, &a, c->args);
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
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **fa;

		f = realloc(t->frames, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		t->frames = f;
		fa = realloc(t->frame_args, cap * sizeof(*fa));
		if (!fa)
			return -ENOMEM;
		t->frame_args = fa;
		t->cap = cap;
	}
	/* the blob lives in the reader's buffer only until the next record */
	t->frame_args[t->depth] = c->args ? strdup(c->args) : NULL;
	if (c->args && !t->frame_args[t->depth])
		return -ENOMEM;
	t->frames[t->depth++] = *rec;
	return 0;
}

static void span_exit(struct chrome *c, const struct ptg_record *rec)
{
	struct cthread *t = thread_get(c, rec->pid, rec->tid, false);

	/* an EXIT without ENTER (recording started inside the call) has no start */
	if (t && t->depth) {
		t->depth--;
		write_span(c, &t->frames[t->depth], t->frame_args[t->depth], rec->ts);
		free(t->frame_args[t->depth]);
	}
}

static void write_synth_flows(struct chrome *c, const struct ptg_record *rec)
{
	if (c->kineto || !rec->corr)
		return;
	if (rec->kind == PTG_REC_CUDA_CALL)
		write_flow(c, 's', "ac2g", "ac2g", rec->pid, rec->tid, rec->ts, rec->corr, false,
			   NULL);
	else
		write_flow(c, 'f', "ac2g", "ac2g", rec->device, (uint32_t)rec->stream, rec->ts,
			   rec->corr, true, NULL);
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
		call.corr = cuda_join_corr(&c->links.joins, rec);
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
	case PTG_REC_EVENT:
		/* an imported event nothing models: written back as it came, in start order */
		if (c->args) {
			ev_new(c, false);
			if (c->nevs)
				c->evs[c->nevs - 1].ts = rec->ts;
			sb_str(&c->b, c->args);
		}
		break;
	case PTG_REC_SCHED:
		write_sched(c, rec);
		break;
	default:
		/* samples have no place in Kineto's schema */
		break;
	}
	return c->b.err;
}

/* Spans still open at the end of the trace close at its last timestamp. */
static void close_open_spans(struct chrome *c)
{
	size_t i;

	for (i = 0; c->threads && i <= c->tmask; i++) {
		struct cthread *t = &c->threads[i];

		while (t->used && t->depth) {
			t->depth--;
			write_span(c, &t->frames[t->depth], t->frame_args[t->depth], c->last_ts);
			free(t->frame_args[t->depth]);
		}
	}
}

static bool is_kineto_key(const char *key)
{
	return !strncmp(key, KINETO_META_PREFIX, strlen(KINETO_META_PREFIX));
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

/* One top-level member on its own line, its value spaced as Kineto writes it. */
static void top_key(struct chrome *c, const char *key, const char *val)
{
	char *spaced = kineto_json_respace(val);
	char *valid = spaced ? utf8_valid_dup(spaced) : NULL;

	sb_str(&c->b, c->nkeys++ ? ",\n  " : "\n  ");
	sb_json(&c->b, key);
	sb_str(&c->b, ": ");
	/* any .ptg can hold any text there: what is no JSON is written as a string */
	if (valid)
		sb_str(&c->b, valid);
	else
		sb_json_value(&c->b, val);
	free(spaced);
	free(valid);
}

/*
 * The imported trace's own top-level keys that came before its events (after
 * = false) or after them. import.events_at says how many came before; a trace
 * imported before that existed has them all before but displayTimeUnit.
 */
static void kineto_keys(struct chrome *c, bool after)
{
	const char *at = trace_reader__meta(c->r, "import.events_at"), *key, *val;
	size_t i, n = 0, nr_before = at ? strtoull(at, NULL, 10) : 0;
	bool is_after;

	/* such an older import also had these added, and keeps them */
	if (!at && !after && !trace_reader__meta(c->r, KINETO_META_PREFIX "schemaVersion"))
		top_key(c, "schemaVersion", "1");
	for (i = 0; trace_reader__meta_at(c->r, i, &key, &val); i++) {
		if (!is_kineto_key(key))
			continue;
		key += strlen(KINETO_META_PREFIX);
		is_after = at ? n++ >= nr_before : !strcmp(key, "displayTimeUnit");
		if (is_after == after)
			top_key(c, key, val);
	}
	if (!at && after && !trace_reader__meta(c->r, KINETO_META_PREFIX "displayTimeUnit"))
		top_key(c, "displayTimeUnit", "\"ms\"");
}

static bool meta_u64(const struct chrome *c, const char *key, uint64_t *v)
{
	const char *s = trace_reader__meta(c->r, key);
	char *end;

	if (!s || !*s)
		return false;
	*v = strtoull(s, &end, 10);
	return !*end;
}

/*
 * A recorded trace's keys in Kineto's order: what HTA and Perfetto look for.
 * Its ts are CLOCK_MONOTONIC, so the base that turns them into wall-clock
 * time is the two clocks' difference at the start.
 */
static void recorded_keys(struct chrome *c)
{
	uint64_t real, mono, rank, world;
	char buf[96];

	top_key(c, "schemaVersion", "1");
	top_key(c, "deviceProperties", "[]");
	/* only when record found the job's rank in the target's environment */
	if (meta_u64(c, "dist.rank", &rank) && meta_u64(c, "dist.world_size", &world)) {
		snprintf(buf, sizeof(buf), "{\"rank\": %" PRIu64 ", \"world_size\": %" PRIu64 "}",
			 rank, world);
		top_key(c, "distributedInfo", buf);
	}
	top_key(c, "displayTimeUnit", "\"ms\"");
	if (meta_u64(c, "start.realtime_ns", &real) && meta_u64(c, "start.monotonic_ns", &mono)) {
		snprintf(buf, sizeof(buf), "%" PRIu64, real - mono);
		top_key(c, "baseTimeNanoseconds", buf);
	}
}

static void write_header(struct chrome *c)
{
	sb_str(&c->b, "{");
	if (c->kineto)
		kineto_keys(c, false);
	else
		recorded_keys(c);
	sb_str(&c->b, c->nkeys ? ",\n  \"traceEvents\": [" : "\n  \"traceEvents\": [");
}

static void write_footer(struct chrome *c)
{
	sb_str(&c->b, "\n  ]");
	c->nkeys = 1; /* the events' array came first */
	if (c->kineto) {
		kineto_keys(c, true);
	} else {
		sb_str(&c->b, ",\n  \"traceName\": ");
		sb_json(&c->b, c->path);
	}
	sb_str(&c->b, "\n}\n");
}

/* Metadata first, then by start, longer first, then in the order they were made. */
static int cmp_cevent(const void *pa, const void *pb)
{
	const struct cevent *a = pa, *b = pb;

	if (a->meta != b->meta)
		return a->meta ? -1 : 1;
	if (!a->meta && a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (!a->meta && a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

/* Writes the events of c->b in order, through out, flushed as it fills. */
static int write_sorted(struct chrome *c)
{
	struct sbuf events = c->b;
	size_t i;
	int err = 0;

	/* events lie back to back: each ends where the next one made begins */
	for (i = 0; i < c->nevs; i++)
		c->evs[i].end = i + 1 < c->nevs ? c->evs[i + 1].off : events.len;
	array_sort(c->evs, c->nevs, sizeof(*c->evs), cmp_cevent);
	c->b = (struct sbuf){};
	for (i = 0; i < c->nevs && !err; i++) {
		sb_str(&c->b, i ? ",\n  " : "\n  ");
		sb_put(&c->b, events.p + c->evs[i].off, c->evs[i].end - c->evs[i].off);
		if (c->b.len >= FLUSH_AT)
			err = out_flush(c);
	}
	free(events.p);
	return err ?: c->b.err;
}

static int write_all(struct chrome *c)
{
	struct ptg_record rec;
	int err;

	write_header(c);
	err = out_flush(c);
	while (!err && (err = trace_reader__next(c->r, &rec)) > 0) {
		c->args = trace_reader__args(c->r, NULL);
		err = write_record(c, &rec);
		if (err)
			return err;
	}
	if (err < 0) {
		fprintf(stderr, "chrome: %s\n", trace_reader__error(c->r));
		return err;
	}
	close_open_spans(c);
	if ((err = write_sorted(c)))
		return err;
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

	for (i = 0; c->threads && i <= c->tmask; i++) {
		while (c->threads[i].depth)
			free(c->threads[i].frame_args[--c->threads[i].depth]);
		free(c->threads[i].frames);
		free(c->threads[i].frame_args);
	}
	free(c->threads);
	free(c->b.p);
	cuda_links_free(&c->links);
	free(c->evs);
	u64map__free(&c->tracks);
}

/* gzip (or plain, "T") on a descriptor of the output file; gzclose closes only its own. */
static int open_gz(struct chrome *c, int fd)
{
	int gzfd = dup(fd);

	if (gzfd < 0)
		return -errno;
	/* "T": zlib writes plain bytes, so both outputs share one code path */
	c->gz = gzdopen(gzfd, ends_with(c->path, ".gz") ? "wb6" : "wbT");
	if (!c->gz) {
		close(gzfd);
		return -ENOMEM;
	}
	gzbuffer(c->gz, 256 * 1024);
	return 0;
}

int chrome_export(struct trace_reader *r, const char *out_path)
{
	const char *source = trace_reader__meta(r, "source");
	struct chrome c = {.r = r, .path = out_path};
	struct outfile *of = NULL;
	int err, zerr;

	c.kineto = source && !strcmp(source, "kineto");
	err = outfile__open(out_path, &of);
	err = err ?: open_gz(&c, outfile__fd(of));
	if (err) {
		fprintf(stderr, "chrome: cannot create %s: %s\n", out_path, strerror(-err));
		outfile__abort(of);
		return err;
	}
	err = cuda_links_load(r, &c.links);
	if (!err)
		err = write_all(&c);
	if (err == -ENOMEM)
		fprintf(stderr, "chrome: out of memory\n");
	zerr = gzclose(c.gz);
	if (!err && zerr != Z_OK) {
		fprintf(stderr, "chrome: %s: write failed\n", out_path);
		err = -EIO;
	}
	if (!err) {
		err = outfile__commit(of);
		if (err)
			fprintf(stderr, "chrome: cannot write %s: %s\n", out_path, strerror(-err));
	} else {
		outfile__abort(of);
	}
	chrome_free(&c);
	return err;
}
