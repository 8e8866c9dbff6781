/* SPDX-License-Identifier: MIT */
/*
 * Numbers given on the command line. Every numeric flag of every command goes
 * through these, so that "nan", "inf", "-1", "1e30", "12abc" and "" get the
 * same one-line error instead of wrapping, truncating or meaning forever.
 */
#ifndef PTG_NUMARG_H
#define PTG_NUMARG_H

#include <stdint.h>

/* What a pid_t holds; whether such a process exists is the kernel's to say */
#define ARG_PID_MAX INT32_MAX
/* A duration on the command line: from a millisecond to a year */
#define ARG_SECONDS_MIN 1e-3
#define ARG_SECONDS_MAX (365 * 86400.0)

/*
 * A plain decimal integer from min to max: digits only, no sign, space,
 * exponent or suffix. Returns 0 or -EINVAL.
 */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A finite decimal number from min to max (no "nan", "inf" or hex). Returns 0 or -EINVAL. */
int parse_double(const char *s, double min, double max, double *out);

/*
 * Both, for flag of command who ("ptrace-gpu: record"): on a bad value they
 * print "ptrace-gpu: record: bad FLAG 'S': want UNIT from MIN to MAX" (who's
 * context word, log_context()) and return -EINVAL.
 */
int parse_u64_flag(const char *who, const char *flag, const char *s, uint64_t min, uint64_t max,
		   uint64_t *out);
int parse_double_flag(const char *who, const char *flag, const char *unit, const char *s,
		      double min, double max, double *out);

#endif /* PTG_NUMARG_H */
