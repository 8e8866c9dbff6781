// SPDX-License-Identifier: MIT
/*
 * The Kineto / Chrome JSON importer on any bytes (plain or gzip, as import
 * takes them). What it accepts it must write as a trace that the reader opens
 * and reads to the end: import -> report is the path users take.
 */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "import/kineto.h"
#include "trace/trace.h"

static void read_back(const char *path)
{
	struct trace_reader *r;
	struct ptg_record rec;
	char err[256];
	int ret;

	if (trace_reader__open(path, &r, err, sizeof(err))) {
		fprintf(stderr, "fuzz: import wrote an unreadable trace: %s\n", err);
		abort();
	}
	while ((ret = trace_reader__next(r, &rec)) > 0)
		;
	if (ret < 0) {
		fprintf(stderr, "fuzz: import wrote a corrupt trace: %s\n", trace_reader__error(r));
		abort();
	}
	trace_reader__close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = fuzz_write("in.json", data, size);
	const char *out = fuzz_path("out.ptg");
	struct kineto_stats st;

	if (kineto_import(in, out, &st) == 0)
		read_back(out);
	unlink(out);
	return 0;
}
