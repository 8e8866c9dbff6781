// SPDX-License-Identifier: MIT
/*
 * A sample_set as pprof (one Sample per row, labels pid, tid, comm, thread
 * and interpreter; Python frames as function + line, native frames as an
 * address in their object's mapping) or as a flame graph, weighted by the
 * rows' nanoseconds (on-CPU: samples x period; off-CPU: blocked time).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/outfile.h"
#include "model/stacks.h"
#include "output/pprof.h"
#include "output/stacks_svg.h"
#include "sample/sample_write.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);

	return ls >= lx && !strcmp(s + ls - lx, suffix);
}

enum sample_format sample_format_of(const char *path)
{
	if (ends_with(path, ".svg"))
		return SAMPLE_FMT_SVG;
	if (ends_with(path, ".folded") || ends_with(path, ".txt") || !strcmp(path, "-"))
		return SAMPLE_FMT_FOLDED;
	return SAMPLE_FMT_PPROF;
}

const char *sample_format_ext(enum sample_format f)
{
	return f == SAMPLE_FMT_SVG ? "svg" : f == SAMPLE_FMT_FOLDED ? "folded" : "pb.gz";
}

/*
 * Python frames have no address: they go in one mapping of their own, made
 * first so that pprof takes it for the main binary, which says that their
 * functions, files and lines are all in the profile (nothing to symbolize).
 */
#define PYTHON_MAPPING "[python]"

/* The pprof location of frame i, made on first use. */
static uint64_t location_of(struct pprof *p, const struct sample_set *set, uint64_t *locs,
			    uint32_t i)
{
	const struct sample_frame *fr = &set->frames[i];
	const struct sample_func *fn = &set->funcs[fr->func];
	uint64_t mapping = 0, func;
	bool mapped = true;

	if (locs[i])
		return locs[i];
	func = pprof__function(p, fn->name, fn->file, fn->start_line);
	if (fn->kind == SAMPLE_FUNC_NATIVE && fn->file[0])
		/* names come from the object's symbols; no file or line for them */
		mapping = pprof__mapping(p, fr->obj_start, fr->obj_limit, fr->obj_offset, fn->file,
					 PPROF_HAS_FUNCTIONS);
	else if (fn->kind == SAMPLE_FUNC_PYTHON)
		mapping = pprof__mapping(p, 0, 0, 0, PYTHON_MAPPING,
					 PPROF_HAS_FUNCTIONS | PPROF_HAS_FILENAMES |
					     PPROF_HAS_LINE_NUMBERS);
	else
		mapped = false; /* special frames and natives of no known object */
	if (mapped && !mapping)
		return 0;
	if (func)
		locs[i] = pprof__location(p, mapping, fr->addr, func, fr->line);
	return locs[i];
}

static int add_row(struct pprof *p, const struct sample_set *set, const struct sample_row *r,
		   uint64_t *locs, uint64_t *ids)
{
	const struct sample_proc *pr = &set->procs[r->proc];
	struct pprof_label labels[] = {
	    {.key = "pid", .num = pr->pid},
	    {.key = "tid", .num = r->tid},
	    {.key = "comm", .str = pr->comm},
	    {.key = "thread", .str = r->thread},
	    {.key = "interpreter", .str = pr->interp},
	    /* last: left out for a process that is not in a container */
	    {.key = "container_pid", .num = pr->ns_pid},
	};
	size_t nlabels = sizeof(labels) / sizeof(labels[0]) - (pr->ns_pid ? 0 : 1);
	int64_t values[2] = {(int64_t)r->count, (int64_t)r->ns};

	/* pprof lists the leaf first */
	for (uint32_t d = 0; d < r->depth; d++) {
		ids[d] = location_of(p, set, locs, r->frames[r->depth - 1 - d]);
		if (!ids[d])
			return -ENOMEM;
	}
	return pprof__add_sample(p, ids, r->depth, values, 2, labels, nlabels);
}

static int write_pprof(const struct sample_set *set, const char *path)
{
	bool cpu = set->kind == PTG_SAMPLE_CPU;
	const char *unit_type = cpu ? "cpu" : "off_cpu";
	uint64_t *locs = calloc(set->nframes + 1, sizeof(*locs));
	uint64_t *ids = NULL;
	struct pprof *p = NULL;
	uint32_t maxd = 1;
	int err;

	for (size_t i = 0; i < set->nrows; i++)
		maxd = set->rows[i].depth > maxd ? set->rows[i].depth : maxd;
	ids = calloc(maxd, sizeof(*ids));
	err = locs && ids ? pprof__new(&p) : -ENOMEM;
	err = err ?: pprof__add_sample_type(p, "samples", "count");
	err = err ?: pprof__add_sample_type(p, unit_type, "nanoseconds");
	if (!err &&
	    !pprof__mapping(p, 0, 0, 0, PYTHON_MAPPING,
			    PPROF_HAS_FUNCTIONS | PPROF_HAS_FILENAMES | PPROF_HAS_LINE_NUMBERS))
		err = -ENOMEM;
	for (size_t i = 0; i < set->nrows && !err; i++)
		err = add_row(p, set, &set->rows[i], locs, ids);
	if (!err) {
		pprof__set_period(p, unit_type, "nanoseconds", (int64_t)set->period_ns);
		pprof__set_time(p, (int64_t)set->start_realtime_ns, (int64_t)set->duration_ns);
		err = pprof__write(p, path);
	}
	pprof__free(p);
	free(ids);
	free(locs);
	return err;
}

/* A frame's name as flamegraph.c names Python functions of traces. */
static char *frame_name(const struct sample_set *set, uint32_t i)
{
	const struct sample_func *fn = &set->funcs[set->frames[i].func];
	char *s = NULL;

	if (fn->kind == SAMPLE_FUNC_PYTHON)
		return asprintf(&s, "%s (%s:%u)", fn->name, fn->file, fn->start_line) < 0 ? NULL
											  : s;
	return strdup(fn->name);
}

static int add_stack(struct stacks *st, const struct sample_set *set,
		     const struct sample_write_opts *o, const struct sample_row *r, char **names)
{
	const struct sample_proc *pr = &set->procs[r->proc];
	const char *stack[2 + PTG_SAMPLE_MAX_DEPTH + 128];
	char proc[96], thread[96];
	unsigned int n = 0;

	if (pr->ns_pid)
		snprintf(proc, sizeof(proc), "%s [%u, container pid %u]", pr->comm, pr->pid,
			 pr->ns_pid);
	else
		snprintf(proc, sizeof(proc), "%s [%u]", pr->comm, pr->pid);
	stack[n++] = proc;
	if (o->threads) {
		snprintf(thread, sizeof(thread), "%s [%u]", r->thread, r->tid);
		stack[n++] = thread;
	}
	for (uint32_t d = 0; d < r->depth && n < sizeof(stack) / sizeof(stack[0]); d++) {
		uint32_t f = r->frames[d];

		if (!names[f] && !(names[f] = frame_name(set, f)))
			return -ENOMEM;
		stack[n++] = names[f];
	}
	return stacks__add_named(st, stack, n, r->ns);
}

/* The stacks of set in st, which the caller stacks__fini()s. */
static int collect(const struct sample_set *set, const struct sample_write_opts *o,
		   struct stacks *st)
{
	char **names = calloc(set->nframes + 1, sizeof(*names));
	int err;

	err = stacks__init(st);
	if (!err && !names)
		err = -ENOMEM;
	if (!err && o->max_stack)
		stacks__set_max_stack(st, o->max_stack);
	for (size_t i = 0; i < set->nrows && !err; i++)
		err = add_stack(st, set, o, &set->rows[i], names);
	for (size_t i = 0; names && i < set->nframes; i++)
		free(names[i]);
	free(names);
	return err;
}

static int folded_line(void *ctx, const char *folded, uint64_t weight)
{
	fprintf(ctx, "%s %" PRIu64 "\n", folded, weight);
	return 0;
}

int sample_write_folded(const struct sample_set *set, const struct sample_write_opts *o, FILE *f)
{
	struct stacks st;
	int err = collect(set, o, &st);

	if (!err) {
		err = stacks__foreach_folded(&st, folded_line, f);
		if (err)
			pr_err("flamegraph: out of memory");
	}
	stacks__fini(&st);
	return err;
}

static int write_svg(const struct sample_set *set, const struct sample_write_opts *o, FILE *f)
{
	struct stacks st;
	char title[160];
	size_t procs = set->nprocs;
	int err = collect(set, o, &st);

	if (!err) {
		snprintf(title, sizeof(title), "ptrace-gpu sample: %zu process%s, %.1f s%s", procs,
			 procs == 1 ? "" : "es", set->duration_ns / 1e9,
			 set->kind == PTG_SAMPLE_CPU ? "" : ", blocked time");
		err = stacks__write_svg(
		    &st, f, set->kind == PTG_SAMPLE_CPU ? "on-CPU time" : "off-CPU time", title);
		if (err)
			pr_err("flamegraph: out of memory");
	}
	stacks__fini(&st);
	return err;
}

int sample_write(const struct sample_set *set, const struct sample_write_opts *o, const char *path)
{
	struct outfile *of;
	FILE *f;
	int err;

	if (o->format == SAMPLE_FMT_PPROF)
		return write_pprof(set, path);
	if (!strcmp(path, "-")) {
		err = o->format == SAMPLE_FMT_SVG ? write_svg(set, o, stdout)
						  : sample_write_folded(set, o, stdout);
		return err ?: (fflush(stdout) ? -errno : 0);
	}
	err = outfile__open(path, &of);
	if (err)
		return err;
	f = outfile__stream(of);
	if (!f) {
		outfile__abort(of);
		return -ENOMEM;
	}
	err = o->format == SAMPLE_FMT_SVG ? write_svg(set, o, f) : sample_write_folded(set, o, f);
	if (err) {
		outfile__abort(of);
		return err;
	}
	return outfile__commit(of);
}
