// SPDX-License-Identifier: MIT
/* The writers of a trace's flame graph: folded stacks and the SVG, named by the trace's symbols. */
#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "output/flamegraph_write.h"
#include "output/stacks_svg.h"

static int folded_line(void *ctx, const char *folded, uint64_t weight)
{
	fprintf(ctx, "%s %" PRIu64 "\n", folded, weight);
	return 0;
}

int flamegraph__write_folded(struct flamegraph *fg, const struct trace_reader *r, FILE *out)
{
	int err = stacks__foreach_folded(flamegraph__stacks(fg, r), folded_line, out);

	if (err)
		pr_err("flamegraph: out of memory");
	return err;
}

int flamegraph__write_svg(struct flamegraph *fg, const struct trace_reader *r, FILE *out,
			  const char *title)
{
	int err = stacks__write_svg(flamegraph__stacks(fg, r), out,
				    flamegraph_weight_name(flamegraph__weight(fg)), title);

	if (err)
		pr_err("flamegraph: out of memory");
	return err;
}
