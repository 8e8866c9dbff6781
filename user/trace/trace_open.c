// SPDX-License-Identifier: MIT
/* Opening a command's input trace (trace_open.h). */
#include <inttypes.h>
#include <string.h>

#include "base/log.h"
#include "trace/trace_open.h"

int trace_open(const char *who, const char *path, struct trace_reader **out)
{
	uint64_t size, readable;
	char errbuf[256] = "";
	int err;

	err = trace_reader__open(path, out, errbuf, sizeof(errbuf));
	if (err) {
		const char *ctx = log_context(who);

		pr_err("%s%s%s: %s", ctx, *ctx ? ": " : "", path,
		       errbuf[0] ? errbuf : strerror(-err));
		return err;
	}
	/* the loss counters are written with the end marker: a cut trace has lost them */
	if (trace_reader__cut(*out, &size, &readable))
		pr_warn("%s is truncated at byte %" PRIu64 " (no end marker): read %" PRIu64
			" records of its complete chunks, to byte %" PRIu64
			"; frames still open at the cut have no exit, and its loss counters "
			"may be missing",
			path, size, trace_reader__nrecords(*out), readable);
	return 0;
}
