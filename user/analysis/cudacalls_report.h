/* SPDX-License-Identifier: MIT */
/* The report's CUDA-call section, from the PTG_REC_CUDA_CALL records of a trace. */
#ifndef PTG_CUDACALLS_REPORT_H
#define PTG_CUDACALLS_REPORT_H

#include <stdio.h>

#include "trace/trace.h"

/* CUDA call counts by class and by API, when the trace has any. */
int cudacalls_report(FILE *out, struct trace_reader *r);

#endif /* PTG_CUDACALLS_REPORT_H */
