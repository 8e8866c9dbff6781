// SPDX-License-Identifier: MIT
/* Opening a command's input trace (trace_open.h). */
#include <stdio.h>
#include <string.h>

#include "trace_open.h"

int trace_open(const char *who, const char *path, struct trace_reader **out)
{
	char errbuf[256] = "";
	int err;

	err = trace_reader__open(path, out, errbuf, sizeof(errbuf));
	if (err)
		fprintf(stderr, "%s: %s: %s\n", who, path, errbuf[0] ? errbuf : strerror(-err));
	return err;
}
