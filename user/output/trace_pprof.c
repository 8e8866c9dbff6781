// SPDX-License-Identifier: MIT
/*
 * One Sample per distinct stack of the flame graph (its trie has each stack
 * once), leaf first. Python functions sit in the "[python]" mapping, made
 * first so that pprof takes it for the main binary, with their file and
 * first line (a trace records functions, not the line executing); ops and
 * CUDA names in "[pytorch]", kernels in "[gpu]". Every mapping says its
 * functions are in the profile: pprof has nothing to symbolize.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "output/pprof.h"
#include "output/trace_pprof.h"

#define PY_FLAGS (PPROF_HAS_FUNCTIONS | PPROF_HAS_FILENAMES | PPROF_HAS_LINE_NUMBERS)

struct tp_ctx {
	struct pprof *p;
	const struct trace_reader *r;
	uint64_t *locs; /* per stack level, leaf first */
	size_t cap;
};

/* The location of a frame: one per symbol, made on first use; 0 when out of memory. */
static uint64_t tp_location(struct tp_ctx *c, uint32_t frame)
{
	const struct ptg_sym *s = frame ? trace_reader__sym(c->r, frame) : NULL;
	uint64_t mapping = 0, func;
	int64_t line = 0;

	if (!s) {
		func = pprof__function(c->p, "[unknown]", "", 0);
	} else if (s->kind == PTG_SYM_PY_FUNC) {
		func = pprof__function(c->p, s->name, s->file ? s->file : "", s->line);
		mapping = pprof__mapping(c->p, 0, 0, 0, "[python]", PY_FLAGS);
		line = s->line;
	} else {
		func = pprof__function(c->p, s->name, "", 0);
		mapping =
		    pprof__mapping(c->p, 0, 0, 0, s->kind == PTG_SYM_KERNEL ? "[gpu]" : "[pytorch]",
				   PPROF_HAS_FUNCTIONS);
		if (!mapping)
			return 0;
	}
	if (!func || (s && !mapping))
		return 0;
	return pprof__location(c->p, mapping, 0, func, line);
}

static int tp_stack(void *ctx, const uint32_t *frames, unsigned int depth, uint64_t weight)
{
	struct tp_ctx *c = ctx;
	int64_t value = (int64_t)weight;

	if (depth > c->cap) {
		uint64_t *l = realloc(c->locs, depth * sizeof(*l));

		if (!l)
			return -ENOMEM;
		c->locs = l;
		c->cap = depth;
	}
	for (unsigned int i = 0; i < depth; i++) {
		c->locs[i] = tp_location(c, frames[depth - 1 - i]);
		if (!c->locs[i])
			return -ENOMEM;
	}
	return pprof__add_sample(c->p, c->locs, depth, &value, 1, NULL, 0);
}

static const char *tp_type(enum flamegraph_weight w)
{
	switch (w) {
	case FG_WEIGHT_CPU:
		return "cpu";
	case FG_WEIGHT_GPU:
		return "gpu";
	case FG_WEIGHT_OFFCPU:
		return "off_cpu";
	default:
		return "wall";
	}
}

int trace_pprof__write(struct trace_reader *r, const struct flamegraph_opts *o, const char *path)
{
	struct flamegraph *fg = NULL;
	struct tp_ctx c = {.r = r};
	int err;

	err = flamegraph__collect(r, o, &fg);
	if (err)
		return err;
	if (!flamegraph__total(fg)) {
		flamegraph__free(fg);
		return -ENODATA;
	}
	err = pprof__new(&c.p);
	err = err ?: pprof__add_sample_type(c.p, tp_type(o->weight), "nanoseconds");
	if (!err && !pprof__mapping(c.p, 0, 0, 0, "[python]", PY_FLAGS))
		err = -ENOMEM;
	/* the trie itself: frame ids are the trace's symbol ids, named by tp_stack */
	err = err ?: stacks__foreach_stack(flamegraph__stacks(fg, r), tp_stack, &c);
	if (err == -ENOMEM)
		pr_err("pprof: out of memory");
	if (!err) {
		pprof__set_period(c.p, tp_type(o->weight), "nanoseconds", 0);
		err = pprof__write(c.p, path);
		if (err)
			pr_err("pprof: cannot write %s: %s", path, strerror(-err));
	}
	pprof__free(c.p);
	free(c.locs);
	flamegraph__free(fg);
	return err;
}
