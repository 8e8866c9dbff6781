/* SPDX-License-Identifier: MIT */
/* Writers of a sample_set: pprof (gzip), folded stacks and SVG (through stacks.h, stacks_svg.h). */
#ifndef PTG_SAMPLE_WRITE_H
#define PTG_SAMPLE_WRITE_H

#include <stdbool.h>
#include <stdio.h>

#include "sample/sample.h"

enum sample_format {
	SAMPLE_FMT_PPROF,
	SAMPLE_FMT_FOLDED,
	SAMPLE_FMT_SVG,
};

struct sample_write_opts {
	enum sample_format format;
	bool threads;		/* folded, SVG: a frame per thread under its process */
	unsigned int max_stack; /* folded, SVG: frames kept per stack; 0: STACKS_MAX_STACK */
};

/* From a file name: *.svg, *.folded / *.txt, else pprof. */
enum sample_format sample_format_of(const char *path);
const char *sample_format_ext(enum sample_format f);
/* Writes set to path ("-": stdout, not for pprof). Returns 0 or a negative errno. */
int sample_write(const struct sample_set *set, const struct sample_write_opts *o, const char *path);
/* Folded stacks: "process;frame;...;frame weight", weight in ns. */
int sample_write_folded(const struct sample_set *set, const struct sample_write_opts *o, FILE *f);

#endif /* PTG_SAMPLE_WRITE_H */
