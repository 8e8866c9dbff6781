/* SPDX-License-Identifier: MIT */
/*
 * The Kineto importer's working state, shared by its files: kineto.c maps
 * JSON events to records, kineto_order.c nests and sorts them. Not for use
 * outside the importer (kineto.h is its interface).
 */
#ifndef PTG_KINETO_IMPORT_H
#define PTG_KINETO_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/array.h"
#include "import/kineto_types.h"
#include "trace/kineto_args.h"
#include "trace/trace.h"

/* A record to write, with the strings that order records of equal ts. */
struct kev {
	struct ptg_record rec;
	const char *name;
	const char *cat;
	const char *extra;
	const char *args; /* args blob (kineto_args.h), NULL for none */
	size_t args_len;
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
	const char *args;
	size_t args_len;
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
	struct kineto_args ka;
	struct kineto_stats st;
};

/* A new zeroed record at the end of im->evs, or NULL when out of memory. */
static inline struct kev *kineto_kev_new(struct importer *im)
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

/*
 * Sorts the X events of each thread, clips those that overhang their parent,
 * turns them into ENTER/EXIT records and sorts all records into an order that
 * depends only on their content. Returns 0 or -ENOMEM.
 */
int kineto_order(struct importer *im);

#endif /* PTG_KINETO_IMPORT_H */
