// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/numarg.h"

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	/* strtoull() skips spaces and takes a sign: "-1" would be ULLONG_MAX */
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_double(const char *s, double min, double max, double *out)
{
	double v;
	char *end;

	/* strtod() also reads "nan", "inf", "0x1p3" and leading spaces */
	if ((*s < '0' || *s > '9') && *s != '.' && *s != '-')
		return -EINVAL;
	if (strpbrk(s, "xXnNiI"))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_u64_flag(const char *who, const char *flag, const char *s, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	const char *ctx;

	if (!parse_u64(s, min, max, out))
		return 0;
	ctx = log_context(who);
	pr_err("%s%sbad %s '%s': want an integer from %" PRIu64 " to %" PRIu64, ctx,
	       *ctx ? ": " : "", flag, s, min, max);
	return -EINVAL;
}

int parse_double_flag(const char *who, const char *flag, const char *unit, const char *s,
		      double min, double max, double *out)
{
	const char *ctx;

	if (!parse_double(s, min, max, out))
		return 0;
	ctx = log_context(who);
	pr_err("%s%sbad %s '%s': want %s from %.15g to %.15g", ctx, *ctx ? ": " : "", flag, s, unit,
	       min, max);
	return -EINVAL;
}
