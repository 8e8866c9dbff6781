/* SPDX-License-Identifier: MIT */
/* The report's off-CPU section, from the PTG_REC_SCHED records of a trace. */
#ifndef PTG_OFFCPU_REPORT_H
#define PTG_OFFCPU_REPORT_H

#include <stdio.h>

#include "trace/trace.h"

/* One line per thread with its off-CPU time, when the trace has any. */
int offcpu_report(FILE *out, struct trace_reader *r);

#endif /* PTG_OFFCPU_REPORT_H */
