/* SPDX-License-Identifier: MIT */
/*
 * Loss counters keyed by (what, cpu), as the trace writer collects them and
 * the reader adds up those of several LOSS chunks: a hash finds a counter,
 * so a file with many of them costs no scan per counter.
 */
#ifndef PTG_LOSSES_H
#define PTG_LOSSES_H

#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "trace/trace.h"

struct loss_table {
	struct ptg_loss *v; /* in order of first appearance */
	size_t n, cap;
	struct u64map idx; /* hash of (what, cpu), probed on -> index */
};

/*
 * Adds count to (what, cpu), a new counter if need be, its kind that of the
 * name (ptg_lost_parse()). what: shorter than ptg_loss.what.
 */
int loss_table__add(struct loss_table *t, const char *what, uint32_t cpu, uint64_t count);
void loss_table__free(struct loss_table *t);

#endif /* PTG_LOSSES_H */
