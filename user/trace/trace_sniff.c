// SPDX-License-Identifier: MIT
/* Names the kind of a file that is not a trace, from its first bytes. */
#include <string.h>
#include <zlib.h>

#include "trace/trace_sniff.h"

/* What the first bytes of a file that is not a trace look like, to say what it is. */
static const char *sniff_content(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	/* marshal's dict of cProfile's dump_stats(): '{' then a key tuple, with or
	 * without marshal's FLAG_REF bit */
	if (n >= 2 && p[0] == '{' && (p[1] == ')' || p[1] == (')' | 0x80)))
		return "a Python pstats file (cProfile): read it with Python's pstats or snakeviz";
	if (i < n && (p[i] == '{' || p[i] == '['))
		return "a JSON file (a Chrome/Kineto trace?): convert it with 'ptrace-gpu import'";
	if (i < n && p[i] == '<')
		return "an XML/SVG file (a flamegraph?), not a trace";
	/* a pprof Profile starts with field 1 (sample_type), length-delimited */
	if (n >= 2 && p[0] == 0x0a)
		return "a pprof profile (ptrace-gpu sample writes those): read it with pprof";
	return NULL;
}

/* The same for the start of a gzip file's contents, which pprof and .json.gz use. */
static const char *sniff_gzip(const uint8_t *p, size_t n)
{
	uint8_t out[64];
	z_stream zs = {.next_in = (uint8_t *)p, .avail_in = (uInt)n};
	const char *what = NULL;

	zs.next_out = out;
	zs.avail_out = sizeof(out);
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return "a gzip file that is not a ptrace-gpu trace";
	inflate(&zs, Z_SYNC_FLUSH);
	if (zs.total_out)
		what = sniff_content(out, zs.total_out);
	inflateEnd(&zs);
	if (what && strstr(what, "JSON"))
		return "a gzipped JSON file (a Chrome/Kineto trace?): convert it with 'ptrace-gpu "
		       "import'";
	if (what && strstr(what, "pprof"))
		return "a gzipped pprof profile (ptrace-gpu sample writes those): read it with "
		       "pprof";
	return "a gzip file that is not a ptrace-gpu trace";
}

const char *trace_sniff(const uint8_t *head, size_t n)
{
	if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
		return sniff_gzip(head, n);
	return sniff_content(head, n);
}
