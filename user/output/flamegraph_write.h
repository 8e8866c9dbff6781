/* SPDX-License-Identifier: MIT */
/* The writers of a flame graph collected from a trace (analysis/flamegraph.h). */
#ifndef PTG_FLAMEGRAPH_WRITE_H
#define PTG_FLAMEGRAPH_WRITE_H

#include <stdio.h>

#include "analysis/flamegraph.h"

/* One "frame;frame;frame N" line per distinct stack with weight, sorted. */
int flamegraph__write_folded(struct flamegraph *fg, const struct trace_reader *r, FILE *out);
/* The interactive SVG; title heads the image. */
int flamegraph__write_svg(struct flamegraph *fg, const struct trace_reader *r, FILE *out,
			  const char *title);

#endif /* PTG_FLAMEGRAPH_WRITE_H */
