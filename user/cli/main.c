// SPDX-License-Identifier: MIT
/* ptrace-gpu: parse the subcommand and dispatch to cmd_<verb>(). */
#include <stdio.h>
#include <string.h>

#include "base/fdlimit.h"
#include "base/log.h"
#include "cli/commands.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
    {"record", cmd_record, "trace a running process (-p PID) or a command (-- CMD)"},
    {"report", cmd_report, "cProfile-style table of Python functions (or ops) of a trace"},
    {"idle", cmd_idle, "GPU idle time, launch-queue depth and optimizable events"},
    {"flamegraph", cmd_flamegraph, "folded stacks, or an interactive SVG with -o FILE.svg"},
    {"export", cmd_export, "write pstats (--pstats) or Chrome/Perfetto JSON (--chrome)"},
    {"import", cmd_import, "convert a torch.profiler/Kineto Chrome trace into a .ptg trace"},
    {"dump", cmd_dump, "print every record of a trace as text"},
    {"sample", cmd_sample, "sample Python stacks of some (-p) or all (-a) processes into pprof"},
    {"inject", cmd_inject, "diagnostic: load a shared library into a running process"},
    {"check", cmd_check, "whether record works here (kernel, privileges, agents; -p: a process)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ptrace-gpu [-v|-q] COMMAND [ARGS]\n\n"
		   "Exact tracing of Python and PyTorch GPU workloads with eBPF.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"\n'ptrace-gpu COMMAND --help' describes each command.\n"
		"\noptions (before COMMAND):\n"
		"  -v, --verbose  debug messages too, and libbpf's own messages as they come\n"
		"  -q, --quiet    no informational log lines (the same as record -q, sample -q)\n");
}

/* The global options before COMMAND: how much goes to stderr (log.h). */
static int global_options(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			log_set_verbosity(PTG_VERBOSE);
		else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
			log_set_verbosity(PTG_QUIET);
		else
			break;
	}
	return i - 1;
}

int main(int argc, char **argv)
{
	int skip;

	log_init();
	fdlimit_raise();
	skip = global_options(argc, argv);
	argc -= skip;
	argv += skip;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
#ifdef PTG_HAVE_CUPTI
		printf("ptrace-gpu %s (CUPTI agent: $PTG_CUPTI_AGENT, else libptg_cupti.so next to "
		       "this executable, else in ../lib/ptrace-gpu from it)\n",
		       PTG_VERSION);
#else
		printf("ptrace-gpu %s (no CUPTI agent: GPU activity is not recorded)\n",
		       PTG_VERSION);
#endif
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[1], commands[i].name)) {
			int ret = commands[i].fn(argc - 1, argv + 1);

			/*
			 * A failure whose path did not flush libbpf's kept warnings
			 * still shows them, after its error line: libbpf printed
			 * them before the log callback, so this is never more.
			 */
			if (ret)
				log_libbpf_flush();
			return ret;
		}
	}
	pr_err("unknown command '%s' (see ptrace-gpu --help)", argv[1]);
	return 2;
}
