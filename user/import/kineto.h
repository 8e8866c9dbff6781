/* SPDX-License-Identifier: MIT */
/*
 * torch.profiler / Kineto Chrome traces -> .ptg (kineto.c), and the field
 * conventions the Chrome exporter (chrome.c) uses to write them back, so that
 * export -> import -> export is byte-identical.
 * The record conventions that import and export share are in trace_kineto.h.
 */
#ifndef PTG_KINETO_H
#define PTG_KINETO_H

#include <stdint.h>

#include "import/kineto_types.h"
#include "trace/trace.h"
#include "trace/trace_kineto.h"

/*
 * Converts a Kineto JSON trace (plain or gzip) at json_path into a .ptg at
 * out_path. Returns 0 or a negative errno after one line on stderr. stats may
 * be NULL.
 */
int kineto_import(const char *json_path, const char *out_path, struct kineto_stats *stats);

/* The same from JSON text in memory; name is stored as the source file name. */
int kineto_import_buf(const char *json, size_t len, const char *name, const char *out_path,
		      struct kineto_stats *stats);

/* Kineto ts/dur text (microseconds, maybe fractional) -> ns, rounded; -EINVAL if not a number >= 0.
 */
int kineto_us_to_ns(const char *text, uint64_t *ns);

/* Splits "path/file.py(123): func" into its parts; false when name has another shape. */
bool kineto_parse_pyname(const char *name, char *file, size_t file_len, uint32_t *line,
			 const char **func);

#endif /* PTG_KINETO_H */
