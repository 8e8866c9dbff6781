// SPDX-License-Identifier: MIT
/*
 * pstats file and listings. The file is what cProfile.Profile.dump_stats()
 * writes: marshal.dump() of {(file, line, name): (cc, nc, tt, ct, callers)}
 * with callers = {(file, line, name): (nc, cc, tt, ct)}. Note the two tuples
 * order call counts differently: that is how cProfile stores them. The
 * listings follow Lib/pstats.py.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/outfile.h"
#include "base/utf8.h"
#include "output/pstats.h"

/* Type codes of CPython's Python/marshal.c (format version 4, no refs). */
#define M_NULL	       '0'
#define M_INT	       'i'
#define M_LONG	       'l'
#define M_BINARY_FLOAT 'g'
#define M_UNICODE      'u'
#define M_ASCII	       'a'
#define M_SHORT_ASCII  'z'
#define M_SMALL_TUPLE  ')'
#define M_DICT	       '{'

int pstats_sort_parse(const char *s, enum pstats_sort *out)
{
	if (!strcmp(s, "cumtime") || !strcmp(s, "cumulative"))
		*out = PSTATS_SORT_CUMTIME;
	else if (!strcmp(s, "tottime") || !strcmp(s, "time"))
		*out = PSTATS_SORT_TOTTIME;
	else if (!strcmp(s, "ncalls") || !strcmp(s, "calls"))
		*out = PSTATS_SORT_NCALLS;
	else if (!strcmp(s, "name"))
		*out = PSTATS_SORT_NAME;
	else
		return -EINVAL;
	return 0;
}

char *pstats_key(const struct trace_reader *r, uint32_t sym, const char **file, uint32_t *line)
{
	const struct ptg_sym *s = trace_reader__sym(r, sym);
	char *name = NULL;

	*file = "~";
	*line = 0;
	if (!s) {
		if (asprintf(&name, "<unknown symbol %u>", sym) < 0)
			return NULL;
		return name;
	}
	if (s->kind == PTG_SYM_PY_FUNC) {
		*file = s->file ? s->file : "";
		*line = s->line;
		return strdup(s->name);
	}
	/* pstats prints ("~", 0, "<x>") as {x}, as for cProfile's built-ins */
	if (asprintf(&name, "<%s>", s->name) < 0)
		return NULL;
	return name;
}

static void put_le(FILE *f, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		fputc((int)(v >> (8 * i) & 0xff), f);
}

static void marshal_int(FILE *f, uint64_t v)
{
	int32_t n = 0;
	uint64_t m;

	if (v <= INT32_MAX) {
		fputc(M_INT, f);
		put_le(f, v, 4);
		return;
	}
	/* PyLong: the digit count, then base 2^15 digits, least significant first */
	for (m = v; m; m >>= 15)
		n++;
	fputc(M_LONG, f);
	put_le(f, (uint32_t)n, 4);
	for (m = v; m; m >>= 15)
		put_le(f, m & 0x7fff, 2);
}

static void marshal_float(FILE *f, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	fputc(M_BINARY_FLOAT, f);
	put_le(f, bits, 8);
}

/*
 * marshal reads 'u' strings as UTF-8 and fails the whole load on a bad byte:
 * names read from a target's memory are not trusted to be valid, so invalid
 * bytes become U+FFFD.
 */
static int marshal_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len = strlen(str), out, i;
	bool ascii = true;
	char *buf;

	for (i = 0; i < len; i++)
		ascii &= s[i] < 0x80;
	if (ascii) {
		if (len < 256) {
			fputc(M_SHORT_ASCII, f);
			fputc((int)len, f);
		} else {
			fputc(M_ASCII, f);
			put_le(f, len, 4);
		}
		fwrite(str, 1, len, f);
		return 0;
	}
	buf = utf8_valid_dup(str);
	if (!buf)
		return -ENOMEM;
	out = strlen(buf);
	fputc(M_UNICODE, f);
	put_le(f, out, 4);
	fwrite(buf, 1, out, f);
	free(buf);
	return 0;
}

/* Per function: its pstats key and std string, and the heads of its edge lists. */
struct fentry {
	const char *file;
	uint32_t line;
	char *name;
	char *std;    /* func_std_string() */
	long callers; /* first edge with this callee, -1 = none */
	long callees; /* first edge with this caller */
};

struct view {
	const struct profile_func *funcs;
	size_t nfuncs;
	const struct profile_edge *edges;
	size_t nedges;
	struct fentry *fe;
	long *next_caller; /* per edge: next edge with the same callee */
	long *next_callee; /* per edge: next edge with the same caller */
	size_t *order;	   /* listed functions */
	size_t n;
	int width;
	char msg[160];
};

static char *std_string(const char *file, uint32_t line, const char *name)
{
	size_t len = strlen(name);
	char *s = NULL;

	if (!strcmp(file, "~") && line == 0) {
		if (len >= 2 && name[0] == '<' && name[len - 1] == '>')
			return asprintf(&s, "{%.*s}", (int)len - 2, name + 1) < 0 ? NULL : s;
		return strdup(name);
	}
	return asprintf(&s, "%s:%u(%s)", file, line, name) < 0 ? NULL : s;
}

static void view_free(struct view *v)
{
	for (size_t i = 0; v->fe && i < v->nfuncs; i++) {
		free(v->fe[i].name);
		free(v->fe[i].std);
	}
	free(v->fe);
	free(v->next_caller);
	free(v->next_callee);
	free(v->order);
}

static void view_link_edges(struct view *v, const struct profile *p)
{
	/* walk backwards so each list ends up in edge order */
	for (size_t i = v->nedges; i-- > 0;) {
		long callee = profile__find(p, v->edges[i].callee);
		long caller = profile__find(p, v->edges[i].caller);

		v->next_caller[i] = callee >= 0 ? v->fe[callee].callers : -1;
		v->next_callee[i] = caller >= 0 ? v->fe[caller].callees : -1;
		if (callee >= 0)
			v->fe[callee].callers = (long)i;
		if (caller >= 0)
			v->fe[caller].callees = (long)i;
	}
}

static int view_init(struct view *v, const struct profile *p, const struct trace_reader *r)
{
	memset(v, 0, sizeof(*v));
	v->funcs = profile__funcs(p, &v->nfuncs);
	v->edges = profile__edges(p, &v->nedges);
	v->fe = calloc(v->nfuncs ? v->nfuncs : 1, sizeof(*v->fe));
	v->next_caller = calloc(v->nedges ? v->nedges : 1, sizeof(long));
	v->next_callee = calloc(v->nedges ? v->nedges : 1, sizeof(long));
	v->order = calloc(v->nfuncs ? v->nfuncs : 1, sizeof(size_t));
	if (!v->fe || !v->next_caller || !v->next_callee || !v->order)
		return -ENOMEM;
	for (size_t i = 0; i < v->nfuncs; i++) {
		struct fentry *e = &v->fe[i];

		e->callers = e->callees = -1;
		e->name = pstats_key(r, v->funcs[i].sym, &e->file, &e->line);
		e->std = e->name ? std_string(e->file, e->line, e->name) : NULL;
		if (!e->std)
			return -ENOMEM;
	}
	view_link_edges(v, p);
	return 0;
}

static int write_key(FILE *f, const struct fentry *e)
{
	fputc(M_SMALL_TUPLE, f);
	fputc(3, f);
	if (marshal_str(f, e->file))
		return -ENOMEM;
	marshal_int(f, e->line);
	return marshal_str(f, e->name);
}

static int write_callers(FILE *f, const struct view *v, const struct profile *p, size_t fi)
{
	int err;

	fputc(M_DICT, f);
	for (long i = v->fe[fi].callers; i >= 0; i = v->next_caller[i]) {
		const struct profile_edge *e = &v->edges[i];

		err = write_key(f, &v->fe[profile__find(p, e->caller)]);
		if (err)
			return err;
		fputc(M_SMALL_TUPLE, f);
		fputc(4, f);
		marshal_int(f, e->ncalls);
		marshal_int(f, e->pcalls);
		marshal_float(f, e->tt_ns / 1e9);
		marshal_float(f, e->ct_ns / 1e9);
	}
	fputc(M_NULL, f);
	return 0;
}

static int write_stats(FILE *f, const struct view *v, const struct profile *p)
{
	int err;

	fputc(M_DICT, f);
	for (size_t i = 0; i < v->nfuncs; i++) {
		const struct profile_func *fn = &v->funcs[i];

		err = write_key(f, &v->fe[i]);
		if (err)
			return err;
		fputc(M_SMALL_TUPLE, f);
		fputc(5, f);
		marshal_int(f, fn->pcalls);
		marshal_int(f, fn->ncalls);
		marshal_float(f, fn->tt_ns / 1e9);
		marshal_float(f, fn->ct_ns / 1e9);
		err = write_callers(f, v, p, i);
		if (err)
			return err;
	}
	fputc(M_NULL, f);
	return 0;
}

int pstats__write(const struct profile *p, const struct trace_reader *r, const char *path)
{
	struct outfile *of = NULL;
	struct view v;
	FILE *f;
	int err;

	err = view_init(&v, p, r);
	if (err) {
		pr_err("pstats: out of memory");
		goto cleanup;
	}
	err = outfile__open(path, &of);
	f = err ? NULL : outfile__stream(of);
	if (!f) {
		err = err ?: -ENOMEM;
		pr_err("pstats: cannot create %s: %s", path, strerror(-err));
		goto cleanup;
	}
	err = write_stats(f, &v, p);
	if (err) {
		pr_err("pstats: out of memory");
		goto cleanup;
	}
	err = outfile__commit(of);
	of = NULL;
	if (err)
		pr_err("pstats: writing %s: %s", path, strerror(-err));
cleanup:
	outfile__abort(of);
	view_free(&v);
	return err;
}

struct sort_ctx {
	const struct view *v;
	enum pstats_sort sort;
};

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

/* pstats sorts stably; ties keep the order of first appearance */
static int cmp_listed(const void *pa, const void *pb, void *arg)
{
	const struct sort_ctx *c = arg;
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	const struct profile_func *fa = &c->v->funcs[a], *fb = &c->v->funcs[b];
	int d = 0;

	switch (c->sort) {
	case PSTATS_SORT_CUMTIME:
		d = cmp_u64_desc(fa->ct_ns, fb->ct_ns);
		break;
	case PSTATS_SORT_TOTTIME:
		d = cmp_u64_desc(fa->tt_ns, fb->tt_ns);
		break;
	case PSTATS_SORT_NCALLS:
		d = cmp_u64_desc(fa->ncalls, fb->ncalls);
		break;
	case PSTATS_SORT_NAME:
		d = strcmp(c->v->fe[a].name, c->v->fe[b].name);
		break;
	}
	return d ? d : (a > b) - (a < b);
}

static const char *sort_title(enum pstats_sort s)
{
	switch (s) {
	case PSTATS_SORT_CUMTIME:
		return "cumulative time";
	case PSTATS_SORT_TOTTIME:
		return "internal time";
	case PSTATS_SORT_NCALLS:
		return "call count";
	case PSTATS_SORT_NAME:
		return "function name";
	}
	return "";
}

/* Stats.get_print_list(): the sorted, limited list, its message and width. */
static void view_select(struct view *v, const struct pstats_list_opts *o)
{
	struct sort_ctx c = {.v = v, .sort = o->sort};
	size_t width = 0, n;

	for (size_t i = 0; i < v->nfuncs; i++)
		v->order[i] = i;
	qsort_r(v->order, v->nfuncs, sizeof(*v->order), cmp_listed, &c);
	n = o->limit >= 0 && (size_t)o->limit < v->nfuncs ? (size_t)o->limit : v->nfuncs;
	v->n = n;
	snprintf(v->msg, sizeof(v->msg), "   Ordered by: %s\n", sort_title(o->sort));
	if (n != v->nfuncs)
		snprintf(v->msg + strlen(v->msg), sizeof(v->msg) - strlen(v->msg),
			 "   List reduced from %zu to %zu due to restriction <%ld>\n", v->nfuncs, n,
			 o->limit);
	/* the width is over all functions unless the list was reduced */
	for (size_t i = 0; i < (n != v->nfuncs ? n : v->nfuncs); i++) {
		size_t len = strlen(v->fe[n != v->nfuncs ? v->order[i] : i].std);

		if (len > width)
			width = len;
	}
	v->width = (int)width + 2;
}

static void print_f8(FILE *out, double x)
{
	fprintf(out, "%8.3f ", x);
}

static void print_line(FILE *out, const struct view *v, size_t i)
{
	const struct profile_func *f = &v->funcs[i];
	char calls[48];

	if (f->ncalls != f->pcalls)
		snprintf(calls, sizeof(calls), "%" PRIu64 "/%" PRIu64, f->ncalls, f->pcalls);
	else
		snprintf(calls, sizeof(calls), "%" PRIu64, f->ncalls);
	fprintf(out, "%9s ", calls);
	print_f8(out, f->tt_ns / 1e9);
	if (f->ncalls)
		print_f8(out, f->tt_ns / 1e9 / f->ncalls);
	else
		fprintf(out, "%8s ", "");
	print_f8(out, f->ct_ns / 1e9);
	if (f->pcalls)
		print_f8(out, f->ct_ns / 1e9 / f->pcalls);
	else
		fprintf(out, "%8s ", "");
	fprintf(out, "%s\n", v->fe[i].std);
}

static int listing_begin(struct view *v, const struct profile *p, const struct trace_reader *r,
			 const struct pstats_list_opts *o)
{
	int err = view_init(v, p, r);

	if (err) {
		pr_err("pstats: out of memory");
		return err;
	}
	view_select(v, o);
	return 0;
}

int pstats__print_stats(FILE *out, const struct profile *p, const struct trace_reader *r,
			const struct pstats_list_opts *o)
{
	uint64_t ncalls, pcalls, tt_ns;
	struct view v;
	int err;

	err = listing_begin(&v, p, r, o);
	if (err)
		goto cleanup;
	profile__totals(p, &ncalls, &pcalls, &tt_ns);
	fprintf(out, "         %" PRIu64 " function calls ", ncalls);
	if (ncalls != pcalls)
		fprintf(out, "(%" PRIu64 " primitive calls) ", pcalls);
	fprintf(out, "in %.3f seconds\n\n", tt_ns / 1e9);
	if (!v.n)
		goto cleanup;
	fprintf(out, "%s\n", v.msg);
	fprintf(out, "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n");
	for (size_t i = 0; i < v.n; i++)
		print_line(out, &v, v.order[i]);
	fprintf(out, "\n\n");
cleanup:
	view_free(&v);
	return err;
}

static void print_call_heading(FILE *out, const struct view *v, const char *title)
{
	fprintf(out, "%-*s%s\n", v->width, "Function ", title);
	if (v->nedges)
		fprintf(out, "%*s    ncalls  tottime  cumtime\n", v->width, "");
}

static int cmp_keys(const struct fentry *a, const struct fentry *b)
{
	int d = strcmp(a->file, b->file);

	if (d)
		return d;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return strcmp(a->name, b->name);
}

struct call_item {
	const struct profile_edge *e;
	const struct fentry *other;
};

static int cmp_call_items(const void *pa, const void *pb)
{
	return cmp_keys(((const struct call_item *)pa)->other,
			((const struct call_item *)pb)->other);
}

/* Stats.print_call_line(): the other ends sorted by key, one per line. */
static void print_call_line(FILE *out, const struct view *v, size_t fi, struct call_item *items,
			    size_t n, const char *arrow)
{
	fprintf(out, "%-*s%s ", v->width, v->fe[fi].std, arrow);
	if (!n) {
		fprintf(out, "\n");
		return;
	}
	qsort(items, n, sizeof(*items), cmp_call_items);
	for (size_t i = 0; i < n; i++) {
		const struct profile_edge *e = items[i].e;
		char calls[48];

		if (e->ncalls != e->pcalls)
			snprintf(calls, sizeof(calls), "%" PRIu64 "/%" PRIu64, e->ncalls,
				 e->pcalls);
		else
			snprintf(calls, sizeof(calls), "%" PRIu64, e->ncalls);
		fprintf(out, "%*s%*s %8.3f %8.3f  %s\n", i ? v->width + 1 : 0, "", i ? 9 : 7, calls,
			e->tt_ns / 1e9, e->ct_ns / 1e9, items[i].other->std);
	}
}

static int print_calls(FILE *out, const struct profile *p, const struct trace_reader *r,
		       const struct pstats_list_opts *o, bool callers)
{
	struct call_item *items = NULL;
	struct view v;
	int err;

	err = listing_begin(&v, p, r, o);
	if (err)
		goto cleanup;
	items = calloc(v.nedges ? v.nedges : 1, sizeof(*items));
	if (!items) {
		err = -ENOMEM;
		pr_err("pstats: out of memory");
		goto cleanup;
	}
	if (!v.n)
		goto cleanup;
	fprintf(out, "%s\n", v.msg);
	print_call_heading(out, &v, callers ? "was called by..." : "called...");
	for (size_t k = 0; k < v.n; k++) {
		size_t fi = v.order[k], n = 0;
		long i = callers ? v.fe[fi].callers : v.fe[fi].callees;

		for (; i >= 0; i = callers ? v.next_caller[i] : v.next_callee[i]) {
			const struct profile_edge *e = &v.edges[i];

			items[n].e = e;
			items[n++].other = &v.fe[profile__find(p, callers ? e->caller : e->callee)];
		}
		print_call_line(out, &v, fi, items, n, callers ? "<-" : "->");
	}
	fprintf(out, "\n\n");
cleanup:
	free(items);
	view_free(&v);
	return err;
}

int pstats__print_callers(FILE *out, const struct profile *p, const struct trace_reader *r,
			  const struct pstats_list_opts *o)
{
	return print_calls(out, p, r, o, true);
}

int pstats__print_callees(FILE *out, const struct profile *p, const struct trace_reader *r,
			  const struct pstats_list_opts *o)
{
	return print_calls(out, p, r, o, false);
}
