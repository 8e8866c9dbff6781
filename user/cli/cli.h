/* SPDX-License-Identifier: MIT */
/* What every command's argument parsing shares: getopt's errors in ptrace-gpu's words. */
#ifndef PTG_CLI_H
#define PTG_CLI_H

#include <getopt.h>

/*
 * getopt_long() for "ptrace-gpu CMD": returns what it returns, but for an
 * unknown option or a missing value prints one line with pr_usage()
 * ("ptrace-gpu CMD: unknown option '--x' (see ptrace-gpu CMD --help)") and
 * returns '?'. getopt's own messages are off: they name only CMD and went out
 * with the usage text glued after them.
 */
int cli_getopt(int argc, char **argv, const char *cmd, const char *shortopts,
	       const struct option *longopts);

#endif /* PTG_CLI_H */
