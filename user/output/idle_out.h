/* SPDX-License-Identifier: MIT */
/* The renderers of an idle report: text tables (idle_text.c) and JSON (idle_json.c). */
#ifndef PTG_IDLE_OUT_H
#define PTG_IDLE_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "analysis/idle.h"
#include "trace/trace.h"

struct idle_out {
	FILE *f;
	const struct idle_report *rep;
	const struct trace_reader *r;
	const struct idle_opts *o;
	const char *path;
};

/* The tables of out->rep, named by out->r's symbols, to out->f. */
void idle_print_text(const struct idle_out *out);
/* One JSON object; 0 or -EIO when out->f failed. */
int idle_print_json(const struct idle_out *out);

/* Shared by both: a symbol's name, "?" when it has none. */
const char *idle_sym_name(const struct trace_reader *r, uint32_t id);
/* The Python location "file:line(function)" of a sym, or the seed's phrase. */
const char *idle_py_location(char *buf, size_t len, const struct trace_reader *r, uint32_t id);
/* python, op or cuda. */
const char *idle_kind_name(uint16_t kind);

#endif /* PTG_IDLE_OUT_H */
