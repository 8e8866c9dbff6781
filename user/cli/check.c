// SPDX-License-Identifier: MIT
/* check's lines, for cmd_check.c, check_system.c and check_process.c alike. */
#include <stdarg.h>
#include <stdio.h>

#include "cli/check.h"

static const char *const status_words[] = {
    [CHECK_OK] = "ok",
    [CHECK_DEGRADED] = "degraded",
    [CHECK_MISSING] = "missing",
    [CHECK_UNKNOWN] = "unknown",
};

void check_line(struct check *c, enum check_status st, bool needed, const char *fmt, ...)
{
	va_list ap;

	if (st != CHECK_OK && needed)
		c->shortfalls++;
	printf("%-9s ", status_words[st]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

bool check_has_cap(const struct check *c, int cap)
{
	return c->caps >> cap & 1;
}
