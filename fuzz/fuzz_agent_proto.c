// SPDX-License-Identifier: MIT
/*
 * libFuzzer: bytes as the CUPTI agent's socket delivers them, into the
 * loader's decoder (cupti_decoder__stream), with the join to probed calls
 * on so that path runs too. Seeds: fuzz/corpus/agent_proto/, streams a real
 * agent sends, written by fuzz/gen_agent_proto.c.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu/cupti_decode.h"
#include "trace/trace.h"

/* Matches every other thread, as if half the calls had been probed (name: NULL where the agent sent
 * none). */
static int join(void *ctx, uint32_t pid, uint32_t tid, const char *name, bool driver, uint32_t corr,
		uint64_t start, uint64_t end, uint64_t *call_id, uint64_t *call_ts)
{
	if (!(tid & 1) || !name || !name[0] || !(corr & 3))
		return 0;
	*call_id = tid;
	*call_ts = start;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cupti_decoder *d = NULL;
	struct trace_writer *w;
	size_t used;

	/* a writer per input: symbols of one input must not pile up over the run */
	if (trace_writer__open("/dev/null", &w))
		abort();
	if (!cupti_decoder__new(w, 1, &d)) {
		cupti_decoder__set_join(d, join, NULL);
		cupti_decoder__stream(d, data, size, &used);
		cupti_decoder__losses(d);
		cupti_decoder__free(d);
	}
	trace_writer__abort(w);
	return 0;
}
