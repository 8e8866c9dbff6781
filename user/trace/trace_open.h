/* SPDX-License-Identifier: MIT */
/*
 * How a command opens the trace it reads: one error line when it cannot,
 * and one warning line when the trace is cut short but readable.
 */
#ifndef PTG_TRACE_OPEN_H
#define PTG_TRACE_OPEN_H

#include "trace/trace.h"

/*
 * Opens path; who names the command in the error message ("ptrace-gpu
 * report" prints "ptrace-gpu: report: PATH: WHY", log_context()). Returns 0
 * or a negative errno.
 */
int trace_open(const char *who, const char *path, struct trace_reader **out);

#endif /* PTG_TRACE_OPEN_H */
