/* SPDX-License-Identifier: MIT */
/*
 * The cross-rank report (ranks.h) as text tables or one JSON object, for
 * idle and report given several traces. Both list at most o->top_n steps:
 * those with the longest wait, in step order.
 */
#ifndef PTG_RANKS_OUT_H
#define PTG_RANKS_OUT_H

#include <stdio.h>

#include "analysis/idle.h"
#include "analysis/ranks.h"

void ranks_print_text(FILE *f, const struct ranks_report *rep, const struct idle_opts *o);
/* Returns 0 or -ENOMEM. */
int ranks_print_json(FILE *f, const struct ranks_report *rep, const struct idle_opts *o);

#endif /* PTG_RANKS_OUT_H */
