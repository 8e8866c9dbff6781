/* SPDX-License-Identifier: MIT */
/*
 * Chrome / Perfetto JSON in Kineto's schema (what torch.profiler writes), for
 * Perfetto (ui.perfetto.dev) and HTA. One pass over the records; the events
 * are written sorted, parents before children, through sorted runs spilled
 * beside the output when they outgrow a few MiB (chrome_sort.c).
 */
#ifndef PTG_CHROME_H
#define PTG_CHROME_H

#include "trace/trace.h"

/*
 * Writes every record of r (from its start) to out_path; a path ending in
 * ".gz" is gzip-compressed. out_path appears (mode 0600) once complete,
 * replacing what was there, a symlink included (outfile.h). For a trace
 * imported from Kineto the output is a fixed point: importing it and
 * exporting again gives the same bytes. Returns 0 or a negative errno after
 * one line on stderr.
 */
int chrome_export(struct trace_reader *r, const char *out_path);

#endif /* PTG_CHROME_H */
