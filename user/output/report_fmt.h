/* SPDX-License-Identifier: MIT */
/* What the text and JSON reports share: times in µs/ms/s, percentages, JSON numbers. */
#ifndef PTG_REPORT_FMT_H
#define PTG_REPORT_FMT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* ns -> "12.3 µs", "4.56 ms" or "7.890 s" in buf. Returns buf. */
const char *fmt_ns(char *buf, size_t len, double ns);
/* 100 * part / whole, 0 when whole is 0. */
double pct(uint64_t part, uint64_t whole);
/* A JSON double printed with 4 decimals. */
json_object *jdouble(double v);
void jset(json_object *o, const char *key, json_object *v);
void jset_u64(json_object *o, const char *key, uint64_t v);

#endif /* PTG_REPORT_FMT_H */
