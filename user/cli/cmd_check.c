// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu check: can record work here, and what does it miss (like
 * `bpftrace --info` and `perf check feature`). The lines come from
 * check_system.c and check_process.c, through the same probes the loaders use.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/utsname.h>

#include "base/log.h"
#include "cli/check.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "proc/procfs.h"
#include "proc/syscheck.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: ptrace-gpu check [-p PID] [--no-trap]\n\n"
		   "Says whether `ptrace-gpu record` can work on this machine, and what it would\n"
		   "do without: one line a thing, `ok`, `degraded` (record runs, with less),\n"
		   "`missing` or `unknown` (not looked at without the privileges), each with what\n"
		   "it costs. The kernel and the BPF features the probes use (the same probes\n"
		   "the loaders run, so the lines agree with what record picks), lockdown,\n"
		   "perf_event_paranoid, unprivileged_bpf_disabled, YAMA's ptrace_scope, the\n"
		   "capabilities held, where the in-process agents are and whether they are\n"
		   "trusted, and what one uprobe hit costs here (measured on this process).\n\n"
		   "  -p, --pid PID   also the process PID: its Python (version, layout source),\n"
		   "                  the PyTorch and CUDA libraries it maps, and how record -p\n"
		   "                  would record it (uprobes, in-process, or refused, and why)\n"
		   "      --no-trap   skip the measure of a uprobe hit (a few milliseconds)\n"
		   "  -h, --help      this help\n\n"
		   "Exits 0 when record would work in full, 1 when it would miss something it\n"
		   "needs (a line `degraded`, `missing` or `unknown` whose cost is not nothing),\n"
		   "2 on a usage error. Run it as the user that will record (sudo).\n");
}

struct check_args {
	pid_t pid;
	bool no_trap;
};

static int parse_args(int argc, char **argv, struct check_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"no-trap", no_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	int c;

	while ((c = cli_getopt(argc, argv, "check", "p:h", longopts)) != -1) {
		switch (c) {
		case 'p':
			if (parse_pid(optarg, &a->pid)) {
				pr_usage("check", "bad PID '%s'", optarg);
				return -EINVAL;
			}
			break;
		case 'T':
			a->no_trap = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind != argc) {
		pr_usage("check", "unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int cmd_check(int argc, char **argv)
{
	struct check_args a = {};
	struct check c = {};
	struct utsname u;

	if (parse_args(argc, argv, &a))
		return 2;
	/* a PID that is no process is the whole answer: one line */
	if (a.pid && !proc_exists(a.pid)) {
		pr_err("check: no such process: %d", a.pid);
		return 1;
	}
	if (syscheck_caps(&c.caps))
		c.caps = 0;
	c.tracing = syscheck_tracing(c.tracing_err, sizeof(c.tracing_err));
	c.privileged = c.tracing != -EPERM;
	if (uname(&u))
		u.release[0] = u.machine[0] = '\0';
	printf("ptrace-gpu %s on Linux %s %s\n", PTG_VERSION, u.release, u.machine);
	check_system(&c);
	if (!a.no_trap)
		check_trap_cost(&c);
	if (a.pid)
		check_process(&c, a.pid);
	/* libbpf's warnings of the probes that failed: each failure is a line above */
	log_libbpf_discard();
	fflush(stdout);
	if (c.shortfalls)
		printf("record would not work in full here: %u line%s above\n", c.shortfalls,
		       c.shortfalls == 1 ? "" : "s");
	else
		printf("record would work in full here\n");
	return c.shortfalls ? 1 : 0;
}
