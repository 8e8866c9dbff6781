// SPDX-License-Identifier: MIT
/*
 * Import of torch.profiler / Kineto Chrome traces. The JSON is parsed into
 * one document as it is read (kineto_json.c, within bounds), every event
 * becomes one or two records here (see kineto.h), and the records are sorted
 * into an order that depends only on their content (kineto_order.c), so that
 * importing a trace we exported gives back the same file.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/array.h"
#include "base/log.h"
#include "import/kineto.h"
#include "import/kineto_import.h"
#include "import/kineto_json.h"

/*
 * Skipped events are counted per category (or phase) for import.unknown.*
 * metadata, the first UNKNOWN_MAX names of at most UNKNOWN_LEN bytes each,
 * the rest under UNKNOWN_OTHER: a file with a million made-up categories
 * costs neither a scan per event nor a million metadata entries.
 */
#define UNKNOWN_MAX   64
#define UNKNOWN_LEN   64
#define UNKNOWN_OTHER "(other)"

static int count_unknown(struct importer *im, const char *what)
{
	struct kunknown *u;
	size_t i;

	im->st.unknown++;
	if (im->nunk >= UNKNOWN_MAX)
		what = UNKNOWN_OTHER;
	for (i = 0; i < im->nunk; i++) {
		if (!strncmp(im->unk[i].what, what, UNKNOWN_LEN)) {
			im->unk[i].count++;
			return 0;
		}
	}
	u = realloc(im->unk, (im->nunk + 1) * sizeof(*u));
	if (!u)
		return -ENOMEM;
	im->unk = u;
	u[im->nunk].what = strndup(what, UNKNOWN_LEN);
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
			point = (int)nd; /* nd < sizeof(digits) */
		} else {
			break;
		}
	}
	if (*s == 'e' || *s == 'E') {
		long e = strtol(s + 1, &end, 10);

		if (end == s + 1 || *end || e < -40 || e > 40)
			return -EINVAL;
		exp = (int)e;
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
	*line = (uint32_t)ln; /* at most 9 digits */
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

/*
 * A 32-bit id: pid and tid are ints in Kineto's CPU and GPU rows (strings
 * mark its own spans), device an int of a GPU row's args. Negative ones are
 * the int32 view of 32 bits that Chrome tools (and our export) write; one
 * that does not fit 32 bits is not ours to cut down: 4294967297 would become
 * pid 1, another row's.
 */
static bool get_id32(json_object *o, const char *key, uint32_t *out)
{
	int64_t v;

	if (!get_int(o, key, &v) || v < INT32_MIN || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool get_pid_tid(json_object *ev, uint32_t *pid, uint32_t *tid)
{
	uint32_t p, t;

	if (!get_id32(ev, "pid", &p) || !get_id32(ev, "tid", &t))
		return false;
	*pid = p;
	*tid = t;
	return true;
}

static json_object *get_args(json_object *ev)
{
	json_object *a;

	if (json_object_object_get_ex(ev, "args", &a) && json_object_is_type(a, json_type_object))
		return a;
	return NULL;
}

/* An event no other kind models: counted as unknown, kept whole as an EVENT record. */
static int keep_event(struct importer *im, json_object *ev, const char *what)
{
	const char *name = get_str(ev, "name");
	struct kev *e;
	int err;

	if ((err = count_unknown(im, what)) || !(e = kineto_kev_new(im)))
		return err ?: -ENOMEM;
	e->rec.kind = PTG_REC_EVENT;
	get_time(ev, "ts", &e->rec.ts);
	get_time(ev, "dur", &e->rec.dur);
	/* one past 32 bits stays 0, as a string does: its JSON in args keeps it whole */
	get_id32(ev, "pid", &e->rec.pid);
	get_id32(ev, "tid", &e->rec.tid);
	if (name) {
		e->name = name;
		if (!(e->rec.sym = trace_writer__sym(im->w, PTG_SYM_STRING, name, "", 0)))
			return -ENOMEM;
	}
	return kineto_args__event(&im->ka, ev, &e->args, &e->args_len);
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
	return kineto_args__extra(&im->ka, ev, KINETO_SHAPE_X, &n->args, &n->args_len);
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
	/* one past 32 bits leaves the row's pid, Kineto's device number of GPU rows */
	get_id32(args, "device", &r->device);
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
	struct kev *e = kineto_kev_new(im);
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
	if (kineto_args__extra(&im->ka, ev, KINETO_SHAPE_X, &e->args, &e->args_len))
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
			return keep_event(im, ev, cat);
	}
	if (!name || !get_time(ev, "ts", &ts) || !get_time(ev, "dur", &dur) ||
	    !get_pid_tid(ev, &pid, &tid))
		return keep_event(im, ev, cat);
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
		return keep_event(im, ev, cat ? cat : "flow");
	e = kineto_kev_new(im);
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
	if (!e->rec.sym || !e->rec.aux[2])
		return -ENOMEM;
	return kineto_args__extra(&im->ka, ev, KINETO_SHAPE_FLOW, &e->args, &e->args_len);
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
	/* the record holds one arg: an event with more is kept whole */
	if (!name || m == KINETO_M_NR || !args || json_object_object_length(args) != 1 ||
	    !get_pid_tid(ev, &pid, &tid))
		return keep_event(im, ev, name ? name : "M");
	if (m == KINETO_M_PROCESS_SORT_INDEX || m == KINETO_M_THREAD_SORT_INDEX) {
		if (!get_int(args, "sort_index", &sort))
			return keep_event(im, ev, name);
	} else {
		val = get_str(args, m == KINETO_M_PROCESS_LABELS ? "labels" : "name");
		if (!val)
			return keep_event(im, ev, name);
	}
	/* Kineto always writes one; other writers' names without a ts come back at 0 */
	get_time(ev, "ts", &ts);
	e = kineto_kev_new(im);
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
	return kineto_args__extra(&im->ka, ev, KINETO_SHAPE_META, &e->args, &e->args_len);
}

static int add_event(struct importer *im, json_object *ev)
{
	const char *ph, *cat;

	im->st.events++;
	if (!json_object_is_type(ev, json_type_object))
		return keep_event(im, ev, "not an object");
	ph = get_str(ev, "ph");
	cat = get_str(ev, "cat");
	if (!ph)
		return keep_event(im, ev, "no ph");
	if (!strcmp(ph, "X"))
		return add_x(im, ev, cat ? cat : "X");
	if (!strcmp(ph, "s") || !strcmp(ph, "f") || !strcmp(ph, "t"))
		return add_flow(im, ev, ph);
	if (!strcmp(ph, "M"))
		return add_meta(im, ev);
	return keep_event(im, ev, cat ? cat : ph);
}

static int meta_u64(struct importer *im, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return trace_writer__meta(im->w, key, buf);
}

/*
 * Top-level keys in their order, values re-spaced as Kineto writes them;
 * import.events_at says how many came before traceEvents, so that export puts
 * each on its side of the events.
 */
static int write_top_keys(struct importer *im, json_object *root)
{
	size_t n = 0, at = 0;
	char key[256], *text;
	int err;

	json_object_object_foreach(root, k, v)
	{
		if (!strcmp(k, "traceEvents")) {
			at = n;
			continue;
		}
		snprintf(key, sizeof(key), KINETO_META_PREFIX "%s", k);
		text = kineto_json_text(v, NULL);
		err = text ? trace_writer__meta(im->w, key, text) : -ENOMEM;
		free(text);
		if (err)
			return err;
		n++;
	}
	return meta_u64(im, "import.events_at", at);
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
	return kineto_order(im);
}

static int write_records(struct importer *im)
{
	size_t i;
	int err;

	for (i = 0; i < im->nevs; i++) {
		err = trace_writer__record_args(im->w, &im->evs[i].rec, im->evs[i].args,
						im->evs[i].args_len);
		if (err)
			return err;
	}
	im->st.records = im->nevs;
	return 0;
}

static void importer_free(struct importer *im)
{
	size_t i;

	for (i = 0; i < im->nunk; i++)
		free(im->unk[i].what);
	free(im->unk);
	kineto_args__free(&im->ka);
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
		pr_err("import: %s: no traceEvents array: not a Chrome trace", im->path);
		return -EINVAL;
	}
	err = trace_writer__open(out_path, &im->w);
	if (err)
		return err;
	err = convert(im, events);
	if (err == -ENOMEM)
		pr_err("import: %s: out of memory", im->path);
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

	root = kineto_json_parse(json, len, name);
	if (!root)
		return -EINVAL;
	err = import_root(&im, root, out_path);
	if (!err && stats)
		*stats = im.st;
	importer_free(&im);
	json_object_put(root);
	return err;
}

int kineto_import(const char *json_path, const char *out_path, struct kineto_stats *stats)
{
	struct importer im = {.path = json_path};
	json_object *root = NULL;
	int err;

	err = kineto_json_parse_file(json_path, &root);
	if (err)
		return err;
	err = import_root(&im, root, out_path);
	if (!err && stats)
		*stats = im.st;
	importer_free(&im);
	json_object_put(root);
	return err;
}
