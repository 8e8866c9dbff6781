/* SPDX-License-Identifier: MIT */
/*
 * What Python's pstats does with a profile: the marshal'ed stats file that
 * pstats.Stats(path), snakeviz and gprof2dot load, and the print_stats,
 * print_callers and print_callees listings, character for character.
 */
#ifndef PTG_PSTATS_H
#define PTG_PSTATS_H

#include <stdio.h>

#include "model/profile.h"
#include "trace/trace.h"

enum pstats_sort {
	PSTATS_SORT_CUMTIME, /* "cumulative time", descending */
	PSTATS_SORT_TOTTIME, /* "internal time", descending */
	PSTATS_SORT_NCALLS,  /* "call count", descending */
	PSTATS_SORT_NAME,    /* "function name", ascending */
};

/* Parses cumtime|cumulative, tottime|time, ncalls|calls, name; -EINVAL otherwise. */
int pstats_sort_parse(const char *s, enum pstats_sort *out);

/*
 * The key pstats uses for a function: (file, line, name). Python functions
 * use their symbol's file, first line and name; ops, like cProfile's built-in
 * functions, ("~", 0, "<aten::addmm>"). Returns the name, to free(), or NULL
 * when out of memory.
 */
char *pstats_key(const struct trace_reader *r, uint32_t sym, const char **file, uint32_t *line);

/* Writes the stats dict of p to path. Returns 0 or a negative errno. */
int pstats__write(const struct profile *p, const struct trace_reader *r, const char *path);

/* Listing options: what to sort by and at most limit rows (< 0: all). */
struct pstats_list_opts {
	enum pstats_sort sort;
	long limit;
};

/* Stats.print_stats(): totals line, "Ordered by", the table. */
int pstats__print_stats(FILE *out, const struct profile *p, const struct trace_reader *r,
			const struct pstats_list_opts *o);
/* Stats.print_callers() / print_callees(). */
int pstats__print_callers(FILE *out, const struct profile *p, const struct trace_reader *r,
			  const struct pstats_list_opts *o);
int pstats__print_callees(FILE *out, const struct profile *p, const struct trace_reader *r,
			  const struct pstats_list_opts *o);

#endif /* PTG_PSTATS_H */
