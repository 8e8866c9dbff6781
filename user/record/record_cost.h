/* SPDX-License-Identifier: MIT */
/*
 * What tracing costs on this machine, said at start: a uprobe hit's price
 * (tracer/trapcost.h), measured once where Python calls are taken by
 * uprobes, and a warning when a recorded call would cost more than 2 us,
 * with what avoids it.
 */
#ifndef PTG_RECORD_COST_H
#define PTG_RECORD_COST_H

#include "record/record.h"

/*
 * Measures a uprobe hit (a few ms, once per run) unless rc takes Python
 * calls in-process or records with -q; says its cost under -v, and warns when a Python call's two
 * hits come to more than RECORD_COST_WARN_NS.
 */
void record_say_trap_cost(const struct recording *rc);

#define RECORD_COST_WARN_NS 2000.0

#endif /* PTG_RECORD_COST_H */
