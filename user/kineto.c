// SPDX-License-Identifier: MIT
/*
 * Import of torch.profiler / Kineto Chrome traces. The JSON is parsed whole
 * with json-c, every event becomes one or two records (see kineto.h), and the
 * records are sorted into an order that depends only on their content, so
 * that importing a trace we exported gives back the same file.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <zlib.h>

#include "array.h"
#include "kineto.h"

const char *const kineto_meta_names[KINETO_M_NR] = {
    [KINETO_M_THREAD_NAME] = "thread_name",
    [KINETO_M_PROCESS_NAME] = "process_name",
    [KINETO_M_PROCESS_LABELS] = "process_labels",
    [KINETO_M_PROCESS_SORT_INDEX] = "process_sort_index",
    [KINETO_M_THREAD_SORT_INDEX] = "thread_sort_index",
};

/* A record to write, with the strings that order records of equal ts. */
struct kev {
	struct ptg_record rec;
	const char *name;
	const char *cat;
	const char *extra;
	uint32_t seq; /* position in its thread's ENTER/EXIT sequence; UINT32_MAX for others */
};

/* A cpu_op or python_function X event before nesting. */
struct knest {
	uint64_t start;
	uint64_t end;
	uint32_t pid;
	uint32_t tid;
	uint32_t sym;
	uint16_t kind; /* PTG_REC_PY_ENTER or PTG_REC_OP_ENTER */
	const char *name;
	uint64_t ext;
	int64_t aux0;
	int64_t aux1;
};

struct kunknown {
	char *what;
	uint64_t count;
};

struct importer {
	const char *path;
	struct trace_writer *w;
	struct kev *evs;
	size_t nevs, evcap;
	struct knest *nest;
	size_t nnest, nestcap;
	struct kunknown *unk;
	size_t nunk;
	struct kineto_stats st;
};

static struct kev *kev_new(struct importer *im)
{
	struct kev *e;

	if (array_grow((void **)&im->evs, &im->evcap, im->nevs + 1, sizeof(*im->evs)))
		return NULL;
	e = &im->evs[im->nevs++];
	memset(e, 0, sizeof(*e));
	e->name = e->cat = e->extra = "";
	e->seq = UINT32_MAX;
	return e;
}

static int count_unknown(struct importer *im, const char *what)
{
	struct kunknown *u;
	size_t i;

	im->st.unknown++;
	for (i = 0; i < im->nunk; i++) {
		if (!strcmp(im->unk[i].what, what)) {
			im->unk[i].count++;
			return 0;
		}
	}
	u = realloc(im->unk, (im->nunk + 1) * sizeof(*u));
	if (!u)
		return -ENOMEM;
	im->unk = u;
	u[im->nunk].what = strdup(what);
	if (!u[im->nunk].what)
		return -ENOMEM;
	u[im->nunk++].count = 1;
	return 0;
}

/*
 * Exact decimal conversion: Kineto writes µs with up to 3 decimals and
 * epoch-based values near 2^60 ns, where a double is off by hundreds of ns.
 */
int kineto_us_to_ns(const char *s, uint64_t *ns)
{
	char digits[64];
	size_t nd = 0, i;
	int point = -1, exp = 0, shift;
	uint64_t v = 0;
	char *end;

	if (!s || *s == '-' || *s == '\0')
		return -EINVAL;
	for (; *s; s++) {
		if (*s >= '0' && *s <= '9') {
			if (nd >= sizeof(digits))
				return -EINVAL;
			digits[nd++] = *s;
		} else if (*s == '.' && point < 0) {
			point = nd;
		} else {
			break;
		}
	}
	if (*s == 'e' || *s == 'E') {
		long e = strtol(s + 1, &end, 10);

		if (end == s + 1 || *end || e < -40 || e > 40)
			return -EINVAL;
		exp = e;
	} else if (*s) {
		return -EINVAL;
	}
	if (!nd)
		return -EINVAL;
	/* digits before the ns point: integer digits + exponent + 3 (µs -> ns) */
	shift = (point < 0 ? (int)nd : point) + exp + 3;
	for (i = 0; (int)i < shift; i++) {
		unsigned int d = i < nd ? digits[i] - '0' : 0;

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	/* round half up on the first dropped digit */
	if (shift >= 0 && (size_t)shift < nd && digits[shift] >= '5')
		v++;
	*ns = v;
	return 0;
}

bool kineto_parse_pyname(const char *name, char *file, size_t file_len, uint32_t *line,
			 const char **func)
{
	const char *sep = strstr(name, "): "), *open, *p;
	unsigned long ln = 0;

	/* the last "): " is the one after the line number: paths may hold "(" */
	for (p = sep; p; p = strstr(p + 1, "): "))
		sep = p;
	if (!sep)
		return false;
	for (open = sep; open > name && open[-1] >= '0' && open[-1] <= '9'; open--)
		;
	if (open == sep || open - name < 2 || open[-1] != '(' || sep - open > 9)
		return false;
	for (p = open; p < sep; p++)
		ln = ln * 10 + (*p - '0');
	/* a leading zero would not survive the trip back to text */
	if (*open == '0' && sep - open > 1)
		return false;
	if ((size_t)(open - 1 - name) >= file_len)
		return false;
	memcpy(file, name, open - 1 - name);
	file[open - 1 - name] = '\0';
	*line = ln;
	*func = sep + 3;
	return true;
}

static const char *get_str(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static bool get_int(json_object *o, const char *key, int64_t *out)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_int64(v);
	return true;
}

/* An optional id stored as value + 1 so that 0 means absent; INT64_MAX has no + 1. */
static int64_t get_id1(json_object *o, const char *key)
{
	int64_t v;

	return get_int(o, key, &v) && v >= 0 && v < INT64_MAX ? v + 1 : 0;
}

static uint64_t get_u64(json_object *o, const char *key)
{
	int64_t v;

	return get_int(o, key, &v) && v > 0 ? (uint64_t)v : 0;
}

static bool get_time(json_object *o, const char *key, uint64_t *ns)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return false;
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double) &&
	    !json_object_is_type(v, json_type_string))
		return false;
	return kineto_us_to_ns(json_object_get_string(v), ns) == 0;
}

/* pid and tid are ints in Kineto's CPU and GPU rows; strings mark its own spans. */
static bool get_pid_tid(json_object *ev, uint32_t *pid, uint32_t *tid)
{
	int64_t p, t;

	if (!get_int(ev, "pid", &p) || !get_int(ev, "tid", &t))
		return false;
	*pid = (uint32_t)p;
	*tid = (uint32_t)t;
	return true;
}

static json_object *get_args(json_object *ev)
{
	json_object *a;

	if (json_object_object_get_ex(ev, "args", &a) && json_object_is_type(a, json_type_object))
		return a;
	return NULL;
}

static uint32_t sym_str(struct importer *im, uint32_t kind, const char *s)
{
	return trace_writer__sym(im->w, kind, s, "", 0);
}

static int add_nest(struct importer *im, json_object *ev, bool py, const char *name, uint64_t ts,
		    uint64_t dur, uint32_t pid, uint32_t tid)
{
	json_object *args = get_args(ev);
	char file[4096];
	const char *func;
	uint32_t line;
	struct knest *n;

	if (array_grow((void **)&im->nest, &im->nestcap, im->nnest + 1, sizeof(*im->nest)))
		return -ENOMEM;
	n = &im->nest[im->nnest++];
	memset(n, 0, sizeof(*n));
	n->start = ts;
	n->end = ts + dur;
	n->pid = pid;
	n->tid = tid;
	n->name = name;
	n->kind = py ? PTG_REC_PY_ENTER : PTG_REC_OP_ENTER;
	if (!py)
		n->sym = sym_str(im, PTG_SYM_OP, name);
	else if (kineto_parse_pyname(name, file, sizeof(file), &line, &func))
		n->sym = trace_writer__sym(im->w, PTG_SYM_PY_FUNC, func, file, line);
	else
		n->sym = sym_str(im, PTG_SYM_PY_FUNC, name);
	if (!n->sym)
		return -ENOMEM;
	if (args) {
		n->ext = get_u64(args, "External id");
		n->aux0 = get_id1(args, py ? "Python id" : "Sequence number");
		n->aux1 = get_id1(args, py ? "Python parent id" : "Fwd thread id");
	}
	return 0;
}

static void set_dims(json_object *args, const char *key, int64_t *xy, int64_t *z)
{
	json_object *a;
	int64_t d[3] = {};
	size_t i;

	if (!json_object_object_get_ex(args, key, &a) || !json_object_is_type(a, json_type_array))
		return;
	for (i = 0; i < 3 && i < json_object_array_length(a); i++)
		d[i] = json_object_get_int64(json_object_array_get_idx(a, i));
	*xy = (int64_t)((uint64_t)(uint32_t)d[0] | (uint64_t)(uint32_t)d[1] << 32);
	*z = d[2];
}

/* CUPTI's copy kinds, from the direction Kineto puts in the name. */
static int64_t memcpy_kind(const char *name)
{
	static const char *const kinds[] = {"HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					    "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strstr(name, kinds[i]))
			return i + 1;
	}
	return 0;
}

static void fill_gpu(struct kev *e, json_object *args, const char *cat)
{
	struct ptg_record *r = &e->rec;
	int64_t v;

	r->device = r->pid;
	r->stream = r->tid;
	if (!args)
		return;
	if (get_int(args, "device", &v))
		r->device = v;
	if (get_int(args, "stream", &v))
		r->stream = v;
	r->corr = get_u64(args, "correlation");
	r->ext = get_u64(args, "External id");
	if (!strcmp(cat, "kernel")) {
		set_dims(args, "grid", &r->aux[0], &r->aux[1]);
		set_dims(args, "block", &r->aux[2], &r->aux[3]);
	} else if (!strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset")) {
		r->aux[0] = get_u64(args, "bytes");
		if (!strcmp(cat, "gpu_memcpy"))
			r->aux[1] = memcpy_kind(e->name);
	} else if (!strcmp(cat, "cuda_sync")) {
		r->aux[1] = get_id1(args, "wait_on_stream");
		r->aux[2] = get_id1(args, "wait_on_cuda_event_record_corr_id");
		r->aux[3] = get_id1(args, "wait_on_cuda_event_id");
	}
}

static int add_sync_kind(struct importer *im, struct kev *e, json_object *args)
{
	const char *kind = args ? get_str(args, "cuda_sync_kind") : NULL;

	if (!kind)
		return 0;
	e->extra = kind;
	e->rec.aux[0] = sym_str(im, PTG_SYM_STRING, kind);
	return e->rec.aux[0] ? 0 : -ENOMEM;
}

struct kcat {
	const char *cat;
	uint16_t kind;
	uint16_t sym_kind;
};

static const struct kcat kcats[] = {
    {"user_annotation", PTG_REC_SPAN, PTG_SYM_STRING},
    {"gpu_user_annotation", PTG_REC_SPAN, PTG_SYM_STRING},
    {"cuda_runtime", PTG_REC_CUDA_CALL, PTG_SYM_CUDA_API},
    {"cuda_driver", PTG_REC_CUDA_CALL, PTG_SYM_CUDA_API},
    {"kernel", PTG_REC_GPU_KERNEL, PTG_SYM_KERNEL},
    {"gpu_memcpy", PTG_REC_GPU_MEMCPY, PTG_SYM_STRING},
    {"gpu_memset", PTG_REC_GPU_MEMSET, PTG_SYM_STRING},
    {"cuda_sync", PTG_REC_GPU_SYNC, PTG_SYM_STRING},
};

static const struct kcat *kcat_find(const char *cat)
{
	size_t i;

	for (i = 0; i < sizeof(kcats) / sizeof(kcats[0]); i++) {
		if (!strcmp(kcats[i].cat, cat))
			return &kcats[i];
	}
	return NULL;
}

static int add_interval(struct importer *im, const struct kcat *kc, json_object *ev,
			const char *name, uint64_t ts, uint64_t dur, uint32_t pid, uint32_t tid)
{
	json_object *args = get_args(ev);
	struct kev *e = kev_new(im);
	struct ptg_record *r;

	if (!e)
		return -ENOMEM;
	r = &e->rec;
	e->name = name;
	e->cat = kc->cat;
	r->kind = kc->kind;
	r->pid = pid;
	r->tid = tid;
	r->ts = ts;
	r->dur = dur;
	r->sym = sym_str(im, kc->sym_kind, name);
	if (!r->sym)
		return -ENOMEM;
	switch (kc->kind) {
	case PTG_REC_SPAN:
		r->aux[0] = sym_str(im, PTG_SYM_STRING, kc->cat);
		r->ext = args ? get_u64(args, "External id") : 0;
		if (!strcmp(kc->cat, "gpu_user_annotation")) {
			r->device = pid;
			r->stream = tid;
		}
		return r->aux[0] ? 0 : -ENOMEM;
	case PTG_REC_CUDA_CALL:
		if (args) {
			r->corr = get_u64(args, "correlation");
			r->ext = get_u64(args, "External id");
			r->aux[0] = get_u64(args, "cbid");
		}
		r->aux[1] = !strcmp(kc->cat, "cuda_driver") ? KINETO_CALL_DRIVER : 0;
		return 0;
	default:
		fill_gpu(e, args, kc->cat);
		return kc->kind == PTG_REC_GPU_SYNC ? add_sync_kind(im, e, args) : 0;
	}
}

static int add_x(struct importer *im, json_object *ev, const char *cat)
{
	const char *name = get_str(ev, "name");
	bool py = !strcmp(cat, "python_function");
	const struct kcat *kc = NULL;
	uint64_t ts, dur;
	uint32_t pid, tid;

	if (!py && strcmp(cat, "cpu_op")) {
		kc = kcat_find(cat);
		if (!kc)
			return count_unknown(im, cat);
	}
	if (!name || !get_time(ev, "ts", &ts) || !get_time(ev, "dur", &dur) ||
	    !get_pid_tid(ev, &pid, &tid))
		return count_unknown(im, cat);
	if (!kc)
		return add_nest(im, ev, py, name, ts, dur, pid, tid);
	return add_interval(im, kc, ev, name, ts, dur, pid, tid);
}

static int add_flow(struct importer *im, json_object *ev, const char *ph)
{
	const char *cat = get_str(ev, "cat"), *name = get_str(ev, "name"), *bp;
	uint32_t pid, tid;
	struct kev *e;
	int64_t id;
	uint64_t ts;

	if (!cat || !name || !get_int(ev, "id", &id) || !get_time(ev, "ts", &ts) ||
	    !get_pid_tid(ev, &pid, &tid))
		return count_unknown(im, cat ? cat : "flow");
	e = kev_new(im);
	if (!e)
		return -ENOMEM;
	e->name = name;
	e->cat = cat;
	e->rec.kind = PTG_REC_FLOW;
	e->rec.pid = pid;
	e->rec.tid = tid;
	e->rec.ts = ts;
	e->rec.corr = id;
	e->rec.aux[0] = ph[0];
	bp = get_str(ev, "bp");
	e->rec.aux[1] = bp && !strcmp(bp, "e");
	e->rec.sym = sym_str(im, PTG_SYM_STRING, name);
	e->rec.aux[2] = sym_str(im, PTG_SYM_STRING, cat);
	return e->rec.sym && e->rec.aux[2] ? 0 : -ENOMEM;
}

static int add_meta(struct importer *im, json_object *ev)
{
	const char *name = get_str(ev, "name"), *val = NULL;
	json_object *args = get_args(ev);
	uint32_t pid, tid;
	int64_t sort = 0;
	struct kev *e;
	uint64_t ts = 0;
	int m;

	for (m = 0; name && m < KINETO_M_NR; m++) {
		if (!strcmp(name, kineto_meta_names[m]))
			break;
	}
	if (!name || m == KINETO_M_NR || !args || !get_pid_tid(ev, &pid, &tid))
		return count_unknown(im, name ? name : "M");
	if (m == KINETO_M_PROCESS_SORT_INDEX || m == KINETO_M_THREAD_SORT_INDEX) {
		if (!get_int(args, "sort_index", &sort))
			return count_unknown(im, name);
	} else {
		val = get_str(args, m == KINETO_M_PROCESS_LABELS ? "labels" : "name");
		if (!val)
			return count_unknown(im, name);
	}
	get_time(ev, "ts", &ts);
	e = kev_new(im);
	if (!e)
		return -ENOMEM;
	e->name = val ? val : "";
	e->rec.kind = PTG_REC_THREAD;
	e->rec.pid = pid;
	e->rec.tid = tid;
	e->rec.ts = ts;
	e->rec.aux[0] = m;
	e->rec.aux[1] = sort;
	if (val && !(e->rec.sym = sym_str(im, PTG_SYM_STRING, val)))
		return -ENOMEM;
	return 0;
}

static int add_event(struct importer *im, json_object *ev)
{
	const char *ph, *cat;

	im->st.events++;
	if (!json_object_is_type(ev, json_type_object))
		return count_unknown(im, "not an object");
	ph = get_str(ev, "ph");
	cat = get_str(ev, "cat");
	if (!ph)
		return count_unknown(im, "no ph");
	if (!strcmp(ph, "X"))
		return add_x(im, ev, cat ? cat : "X");
	if (!strcmp(ph, "s") || !strcmp(ph, "f") || !strcmp(ph, "t"))
		return add_flow(im, ev, ph);
	if (!strcmp(ph, "M"))
		return add_meta(im, ev);
	return count_unknown(im, cat ? cat : ph);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* Thread, start, longer first, then content: parents sort before children. */
static int cmp_nest(const void *pa, const void *pb)
{
	const struct knest *a = pa, *b = pb;
	int c;

	if ((c = cmp_u64(a->pid, b->pid)) || (c = cmp_u64(a->tid, b->tid)) ||
	    (c = cmp_u64(a->start, b->start)) || (c = cmp_u64(b->end, a->end)) ||
	    (c = cmp_u64(a->kind, b->kind)) || (c = strcmp(a->name, b->name)) ||
	    (c = cmp_u64(a->ext, b->ext)) || (c = cmp_i64(a->aux0, b->aux0)))
		return c;
	return cmp_i64(a->aux1, b->aux1);
}

static bool same_thread(const struct knest *a, const struct knest *b)
{
	return a->pid == b->pid && a->tid == b->tid;
}

/* Cuts every event that overhangs the innermost open event on its thread. */
static int clip_nest(struct importer *im)
{
	uint64_t *stack = NULL;
	size_t depth = 0, cap = 0, i;

	for (i = 0; i < im->nnest; i++) {
		struct knest *n = &im->nest[i];

		if (i && !same_thread(n, n - 1))
			depth = 0;
		while (depth && stack[depth - 1] <= n->start)
			depth--;
		if (depth && n->end > stack[depth - 1]) {
			n->end = stack[depth - 1];
			im->st.clipped++;
		}
		if (array_grow((void **)&stack, &cap, depth + 1, sizeof(*stack))) {
			free(stack);
			return -ENOMEM;
		}
		stack[depth++] = n->end;
	}
	free(stack);
	return 0;
}

static int emit_nest(struct importer *im, const struct knest *n, bool enter, uint32_t seq)
{
	struct kev *e = kev_new(im);

	if (!e)
		return -ENOMEM;
	e->name = n->name;
	e->seq = seq;
	e->rec.kind = enter ? n->kind : n->kind + 1;
	e->rec.pid = n->pid;
	e->rec.tid = n->tid;
	e->rec.ts = enter ? n->start : n->end;
	if (enter) {
		e->rec.sym = n->sym;
		e->rec.ext = n->ext;
		e->rec.aux[0] = n->aux0;
		e->rec.aux[1] = n->aux1;
	}
	return 0;
}

/* Turns the (now laminar) X events of each thread into ENTER/EXIT pairs. */
static int nest_to_records(struct importer *im)
{
	size_t *stack = NULL, depth = 0, cap = 0, i;
	uint32_t seq = 0;
	int err = 0;

	for (i = 0; i <= im->nnest && !err; i++) {
		const struct knest *n = i < im->nnest ? &im->nest[i] : NULL;
		bool new_thread = !n || (i && !same_thread(n, n - 1));

		while (!err && depth && (new_thread || im->nest[stack[depth - 1]].end <= n->start))
			err = emit_nest(im, &im->nest[stack[--depth]], false, seq++);
		if (!n || err)
			break;
		if (new_thread)
			seq = 0;
		if ((err = array_grow((void **)&stack, &cap, depth + 1, sizeof(*stack))))
			break;
		stack[depth++] = i;
		err = emit_nest(im, n, true, seq++);
	}
	free(stack);
	return err;
}

static int cmp_kev(const void *pa, const void *pb)
{
	const struct kev *a = pa, *b = pb;
	const struct ptg_record *x = &a->rec, *y = &b->rec;
	int c, i;

	if ((c = cmp_u64(x->ts, y->ts)) || (c = cmp_u64(x->pid, y->pid)) ||
	    (c = cmp_u64(x->tid, y->tid)) || (c = cmp_u64(a->seq, b->seq)))
		return c;
	/* records of equal time on one thread that are not ENTER/EXIT: by content */
	if ((c = cmp_u64(x->kind, y->kind)) || (c = cmp_u64(y->dur, x->dur)) ||
	    (c = strcmp(a->cat, b->cat)) || (c = strcmp(a->name, b->name)) ||
	    (c = strcmp(a->extra, b->extra)) || (c = cmp_u64(x->corr, y->corr)) ||
	    (c = cmp_u64(x->ext, y->ext)) || (c = cmp_u64(x->device, y->device)) ||
	    (c = cmp_u64(x->stream, y->stream)))
		return c;
	for (i = 0; i < 4; i++) {
		if ((c = cmp_i64(x->aux[i], y->aux[i])))
			return c;
	}
	return 0;
}

static int write_top_keys(struct importer *im, json_object *root)
{
	char key[256];
	int err;

	json_object_object_foreach(root, k, v)
	{
		if (!strcmp(k, "traceEvents"))
			continue;
		snprintf(key, sizeof(key), KINETO_META_PREFIX "%s", k);
		err = trace_writer__meta(
		    im->w, key,
		    json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
							  JSON_C_TO_STRING_NOSLASHESCAPE));
		if (err)
			return err;
	}
	return 0;
}

static int meta_u64(struct importer *im, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return trace_writer__meta(im->w, key, buf);
}

static int write_meta(struct importer *im, json_object *root)
{
	char key[256];
	size_t i;
	int err;

	if ((err = trace_writer__meta(im->w, "source", "kineto")) ||
	    (err = trace_writer__meta(im->w, "clock", "realtime")) ||
	    (err = trace_writer__meta(im->w, "import.file", im->path)) ||
	    (err = meta_u64(im, "import.events", im->st.events)) ||
	    (err = meta_u64(im, "import.clipped", im->st.clipped)) ||
	    (err = meta_u64(im, "import.unknown", im->st.unknown)))
		return err;
	for (i = 0; i < im->nunk; i++) {
		snprintf(key, sizeof(key), "import.unknown.%s", im->unk[i].what);
		if ((err = meta_u64(im, key, im->unk[i].count)))
			return err;
	}
	return write_top_keys(im, root);
}

static int convert(struct importer *im, json_object *events)
{
	size_t i, n = json_object_array_length(events);
	int err;

	for (i = 0; i < n; i++) {
		err = add_event(im, json_object_array_get_idx(events, i));
		if (err)
			return err;
	}
	array_sort(im->nest, im->nnest, sizeof(*im->nest), cmp_nest);
	if ((err = clip_nest(im)))
		return err;
	/* clipping shortens events: sort again so the order depends on the result only */
	array_sort(im->nest, im->nnest, sizeof(*im->nest), cmp_nest);
	if ((err = nest_to_records(im)))
		return err;
	array_sort(im->evs, im->nevs, sizeof(*im->evs), cmp_kev);
	return 0;
}

static int write_records(struct importer *im)
{
	size_t i;
	int err;

	for (i = 0; i < im->nevs; i++) {
		err = trace_writer__record(im->w, &im->evs[i].rec);
		if (err)
			return err;
	}
	im->st.records = im->nevs;
	return 0;
}

static json_object *parse_json(const char *json, size_t len, const char *name)
{
	json_tokener *tok = json_tokener_new_ex(128);
	enum json_tokener_error jerr = json_tokener_continue;
	json_object *root = NULL;
	size_t off = 0, chunk = 0;

	if (!tok) {
		fprintf(stderr, "ptrace-gpu: import: %s: out of memory\n", name);
		return NULL;
	}
	/* json-c takes an int length: feed traces above 2 GiB in pieces */
	while (off < len && jerr == json_tokener_continue) {
		chunk = len - off < (1u << 30) ? len - off : (1u << 30);
		root = json_tokener_parse_ex(tok, json + off, chunk);
		jerr = json_tokener_get_error(tok);
		off += chunk;
	}
	if (!root || jerr != json_tokener_success) {
		if (jerr == json_tokener_continue)
			fprintf(stderr, "ptrace-gpu: import: %s: malformed JSON: unexpected end of file\n",
				name);
		else
			fprintf(stderr, "ptrace-gpu: import: %s: malformed JSON near byte %zu: %s\n", name,
				off - chunk + json_tokener_get_parse_end(tok),
				json_tokener_error_desc(jerr));
		json_object_put(root);
		root = NULL;
	}
	json_tokener_free(tok);
	return root;
}

static void importer_free(struct importer *im)
{
	size_t i;

	for (i = 0; i < im->nunk; i++)
		free(im->unk[i].what);
	free(im->unk);
	free(im->evs);
	free(im->nest);
}

static int import_root(struct importer *im, json_object *root, const char *out_path)
{
	json_object *events;
	int err;

	if (!json_object_is_type(root, json_type_object) ||
	    !json_object_object_get_ex(root, "traceEvents", &events) ||
	    !json_object_is_type(events, json_type_array)) {
		fprintf(stderr, "ptrace-gpu: import: %s: no traceEvents array: not a Chrome trace\n", im->path);
		return -EINVAL;
	}
	err = trace_writer__open(out_path, &im->w);
	if (err)
		return err;
	err = convert(im, events);
	if (err == -ENOMEM)
		fprintf(stderr, "ptrace-gpu: import: %s: out of memory\n", im->path);
	if (!err)
		err = write_meta(im, root);
	if (!err)
		err = write_records(im);
	if (err) {
		trace_writer__abort(im->w);
		return err;
	}
	return trace_writer__close(im->w);
}

int kineto_import_buf(const char *json, size_t len, const char *name, const char *out_path,
		      struct kineto_stats *stats)
{
	struct importer im = {.path = name};
	json_object *root;
	int err;

	root = parse_json(json, len, name);
	if (!root)
		return -EINVAL;
	err = import_root(&im, root, out_path);
	if (!err && stats)
		*stats = im.st;
	importer_free(&im);
	json_object_put(root);
	return err;
}

/* Reads a whole file, gunzipping it when it is gzip (zlib reads plain files as they are). */
static int read_file(const char *path, char **out, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap), *nb;
	gzFile gz = gzopen(path, "rb");
	int got, errnum, err = 0;

	if (!gz || !buf) {
		err = gz ? -ENOMEM : -(errno ? errno : ENOMEM);
		fprintf(stderr, "ptrace-gpu: import: %s: %s\n", path, strerror(-err));
		goto cleanup;
	}
	while ((got = gzread(gz, buf + n, cap - n - 1)) > 0) {
		n += got;
		if (cap - n - 1 > 0)
			continue;
		nb = realloc(buf, cap * 2);
		if (!nb) {
			err = -ENOMEM;
			fprintf(stderr, "ptrace-gpu: import: %s: out of memory\n", path);
			goto cleanup;
		}
		buf = nb;
		cap *= 2;
	}
	if (got < 0) {
		err = -EIO;
		fprintf(stderr, "ptrace-gpu: import: %s: %s\n", path, gzerror(gz, &errnum));
		goto cleanup;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	buf = NULL;
cleanup:
	free(buf);
	if (gz)
		gzclose(gz);
	return err;
}

int kineto_import(const char *json_path, const char *out_path, struct kineto_stats *stats)
{
	char *buf = NULL;
	size_t len = 0;
	int err;

	err = read_file(json_path, &buf, &len);
	if (err)
		return err;
	err = kineto_import_buf(buf, len, json_path, out_path, stats);
	free(buf);
	return err;
}
