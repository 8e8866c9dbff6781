// SPDX-License-Identifier: MIT
/*
 * One pass over the input: each thread's stack of open ENTER records is
 * replayed up to t0 without writing, then written as is inside the window;
 * a thread's records after t1 are dropped (they come in time order per
 * thread), so its stack at the end is the stack at t1.
 * It reads with trace_reader and writes with trace_writer only, not through
 * the model: a slice is a trace, so it needs every record whole and in file
 * order (ENTERs re-emitted with all their fields, args blobs, EVENTs), where
 * the model hands spans only once closed and keeps a few fields of each.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/threads.h"
#include "trace/slice.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

struct slice_thread {
	struct ptg_record *open; /* ENTER records, outermost first */
	size_t n, cap;
	bool in_window; /* its open records were written at t0 */
};

struct slicer {
	struct trace_reader *r;
	struct trace_writer *w;
	uint64_t t0, t1;
	struct threads threads; /* of struct slice_thread, walked in order of first record */
};

static bool is_enter(uint16_t kind)
{
	return kind == PTG_REC_PY_ENTER || kind == PTG_REC_OP_ENTER;
}

static bool is_exit(uint16_t kind)
{
	return kind == PTG_REC_PY_EXIT || kind == PTG_REC_OP_EXIT;
}

static struct slice_thread *thread_of(struct slicer *s, uint32_t pid, uint32_t tid)
{
	return threads__get(&s->threads, pid, tid, NULL);
}

static void slice_thread_fini(void *th)
{
	free(((struct slice_thread *)th)->open);
}

static int replay(struct slice_thread *th, const struct ptg_record *rec)
{
	if (is_exit(rec->kind)) {
		th->n -= th->n > 0;
		return 0;
	}
	if (th->n == th->cap) {
		size_t cap = th->cap ? th->cap * 2 : 64;
		struct ptg_record *n = realloc(th->open, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		th->open = n;
		th->cap = cap;
	}
	th->open[th->n++] = *rec;
	return 0;
}

/* The thread's frames that were open when the window began start at t0. */
static int enter_window(struct slicer *s, struct slice_thread *th)
{
	int err = 0;

	th->in_window = true;
	for (size_t i = 0; !err && i < th->n; i++) {
		struct ptg_record r = th->open[i];

		r.ts = s->t0;
		r.flags |= PTG_F_ENTER_PREEXISTING;
		err = trace_writer__record(s->w, &r);
	}
	return err;
}

/* A record read in the window, with the args blob it has (CUPTI's, trace.h). */
static int copy_record(struct slicer *s, const struct ptg_record *rec)
{
	size_t len = 0;
	const char *args = trace_reader__args(s->r, &len);

	return trace_writer__record_args(s->w, rec, args, len);
}

static int span_record(struct slicer *s, const struct ptg_record *rec)
{
	struct slice_thread *th = thread_of(s, rec->pid, rec->tid);
	int err;

	if (!th)
		return -ENOMEM;
	if (rec->ts > s->t1)
		return 0;
	if (rec->ts < s->t0)
		return replay(th, rec);
	if (!th->in_window && (err = enter_window(s, th)))
		return err;
	err = replay(th, rec);
	return err ?: copy_record(s, rec);
}

static int other_record(struct slicer *s, const struct ptg_record *rec)
{
	struct ptg_record r = *rec;

	if (r.kind == PTG_REC_THREAD) {
		/* a thread's name, from when it was first seen: keep it, inside the window */
		if (r.ts > s->t1)
			return 0;
		r.ts = r.ts < s->t0 ? s->t0 : r.ts;
		return trace_writer__record(s->w, &r);
	}
	if (r.ts < s->t0 || r.ts > s->t1)
		return 0;
	/* the next step's span starts where the window ends */
	if (r.kind == PTG_REC_SPAN && r.ts == s->t1 && s->t1 > s->t0)
		return 0;
	if (r.dur > s->t1 - r.ts)
		r.dur = s->t1 - r.ts;
	return copy_record(s, &r);
}

/* Frames still open at t1 end there; those of a thread idle all window long are in it too. */
static int close_window(struct slicer *s)
{
	int err = 0;

	for (size_t i = 0; !err && i < s->threads.len; i++) {
		struct slice_thread *th = threads__at(&s->threads, i);

		if (th->n && !th->in_window)
			err = enter_window(s, th);
		while (!err && th->n) {
			const struct ptg_record *e = &th->open[--th->n];
			struct ptg_record x = {
			    .kind = e->kind == PTG_REC_PY_ENTER ? PTG_REC_PY_EXIT : PTG_REC_OP_EXIT,
			    .flags = PTG_F_EXIT_STOP,
			    .pid = e->pid,
			    .tid = e->tid,
			    .ts = s->t1,
			};

			err = trace_writer__record(s->w, &x);
		}
	}
	return err;
}

static int copy_header(struct trace_reader *r, struct trace_writer *w,
		       const struct slice_meta *extra, size_t nextra)
{
	const char *k, *v;
	int err = 0;

	for (size_t i = 0; !err && trace_reader__meta_at(r, i, &k, &v); i++)
		err = trace_writer__meta(w, k, v);
	for (size_t i = 0; !err && i < nextra; i++)
		err = trace_writer__meta(w, extra[i].key, extra[i].value);
	/* every symbol, in order: ids stay what the records say */
	for (uint32_t id = 1; !err && id <= trace_reader__nsyms(r); id++) {
		const struct ptg_sym *sym = trace_reader__sym(r, id);

		if (!sym || trace_writer__sym(w, sym->kind, sym->name, sym->file, sym->line) != id)
			err = -EPROTO;
	}
	return err;
}

static int copy_losses(struct trace_reader *r, struct trace_writer *w)
{
	const struct ptg_loss *l;
	size_t n = 0;
	int err = 0;

	l = trace_reader__losses(r, &n);
	for (size_t i = 0; !err && i < n; i++)
		err = trace_writer__loss(w, l[i].what, l[i].cpu, l[i].count);
	return err;
}

static int copy_records(struct slicer *s, struct trace_reader *r)
{
	struct ptg_record rec;
	int ret;

	while ((ret = trace_reader__next(r, &rec)) > 0) {
		ret = is_enter(rec.kind) || is_exit(rec.kind) ? span_record(s, &rec)
							      : other_record(s, &rec);
		if (ret)
			return ret;
	}
	return ret ?: close_window(s);
}

int trace_slice(const char *in, const char *out, uint64_t t0, uint64_t t1,
		const struct slice_meta *extra, size_t nextra)
{
	struct slicer s = {.t0 = t0, .t1 = t1, .threads = THREADS_INIT(struct slice_thread)};
	struct trace_reader *r = NULL;
	int err;

	err = trace_open("slice", in, &r);
	if (err)
		return err;
	s.r = r;
	err = trace_writer__open(out, &s.w);
	err = err ?: copy_header(r, s.w, extra, nextra);
	err = err ?: copy_records(&s, r);
	err = err ?: copy_losses(r, s.w);
	if (!err) {
		err = trace_writer__close(s.w);
		s.w = NULL;
	} else if (err != -ENOMEM) {
		pr_err("slice: %s -> %s: %s", in, out,
		       err == -EPROTO ? "symbol table out of order" : strerror(-err));
	}
	trace_writer__abort(s.w);
	trace_reader__close(r);
	threads__free(&s.threads, slice_thread_fini);
	return err;
}

/* Every record of process pid: the recorder closed each frame, so there is no window to cut. */
static int copy_pid(struct trace_reader *r, struct trace_writer *w, uint32_t pid)
{
	struct ptg_record rec;
	const char *args;
	size_t len;
	int ret;

	while ((ret = trace_reader__next(r, &rec)) > 0) {
		if (rec.pid != pid)
			continue;
		len = 0;
		args = trace_reader__args(r, &len);
		ret = trace_writer__record_args(w, &rec, args, len);
		if (ret)
			return ret;
	}
	return ret;
}

int trace_slice_pid(const char *in, const char *out, uint32_t pid, const struct slice_meta *extra,
		    size_t nextra)
{
	struct trace_reader *r = NULL;
	struct trace_writer *w = NULL;
	int err;

	err = trace_open("slice", in, &r);
	if (err)
		return err;
	err = trace_writer__open(out, &w);
	err = err ?: copy_header(r, w, extra, nextra);
	err = err ?: copy_pid(r, w, pid);
	err = err ?: copy_losses(r, w);
	if (!err) {
		err = trace_writer__close(w);
		w = NULL;
	} else if (err != -ENOMEM) {
		pr_err("slice: %s -> %s: %s", in, out,
		       err == -EPROTO ? "symbol table out of order" : strerror(-err));
	}
	trace_writer__abort(w);
	trace_reader__close(r);
	return err;
}
