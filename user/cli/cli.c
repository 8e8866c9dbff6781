// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cli/cli.h"

int cli_getopt(int argc, char **argv, const char *cmd, const char *shortopts,
	       const struct option *longopts)
{
	char opts[64];
	const char *arg;
	int c;

	/* a leading ':' (after getopt's '+' or '-') makes a missing value ':' */
	if (shortopts[0] == '+' || shortopts[0] == '-')
		snprintf(opts, sizeof(opts), "%c:%s", shortopts[0], shortopts + 1);
	else
		snprintf(opts, sizeof(opts), ":%s", shortopts);
	opterr = 0;
	c = getopt_long(argc, argv, opts, longopts, NULL);
	if (c != '?' && c != ':')
		return c;
	arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	if (c == ':')
		pr_usage(cmd, "option '%s' needs a value", arg);
	else if (optopt && strncmp(arg, "--", 2))
		pr_usage(cmd, "unknown option '-%c'", optopt);
	else
		pr_usage(cmd, "unknown option '%s'", arg);
	return '?';
}
