// SPDX-License-Identifier: MIT
/*
 * The order of imported records. Kineto's X events of a thread may overlap
 * (rounding, clock skew): they are sorted parents first, clipped to their
 * parent's end so that they nest, and turned into ENTER/EXIT pairs; then all
 * records are sorted by content alone, so that importing a trace we exported
 * gives back the same file whatever the order of its events.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "import/kineto_import.h"

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
	struct kev *e = kineto_kev_new(im);

	if (!e)
		return -ENOMEM;
	e->name = n->name;
	e->seq = seq;
	e->rec.kind = enter ? n->kind : n->kind + 1;
	e->rec.pid = n->pid;
	e->rec.tid = n->tid;
	e->rec.ts = enter ? n->start : n->end;
	if (enter) {
		e->args = n->args;
		e->args_len = n->args_len;
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
	return strcmp(a->args ? a->args : "", b->args ? b->args : "");
}

int kineto_order(struct importer *im)
{
	int err;

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
