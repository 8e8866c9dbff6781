// SPDX-License-Identifier: MIT
/* Number formats of the reports (report_fmt.h). */
#include <stdio.h>

#include "output/report_fmt.h"

const char *fmt_ns(char *buf, size_t len, double ns)
{
	if (ns < 1e6)
		snprintf(buf, len, "%.1f µs", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", ns / 1e9);
	return buf;
}

double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0;
}

json_object *jdouble(double v)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%.4f", v);
	return json_object_new_double_s(v, buf);
}

void jset(json_object *o, const char *key, json_object *v)
{
	json_object_object_add(o, key, v);
}

void jset_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}
