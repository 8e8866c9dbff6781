// SPDX-License-Identifier: MIT
/* ptrace-gpu inject: the diagnostic face of user/inject/inject.c (what record -p does with the
 * agent). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/numarg.h"
#include "base/trusted.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "inject/inject.h"
#include "proc/procfs.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ptrace-gpu inject -p PID LIBRARY [--call SYMBOL [--arg TEXT]] [--timeout "
		"SECS]\n\n"
		"Diagnostic: loads the shared library LIBRARY into the running process PID with\n"
		"dlopen(), through ptrace, the way `record -p` loads the CUPTI agent. One thread\n"
		"of PID is borrowed for a few milliseconds at a safe point; its registers and\n"
		"the stack bytes written are put back and it goes on where it was. A library\n"
		"already loaded is not loaded twice (its constructors do not run again).\n"
		"LIBRARY must be a file only root can have written (owned by root, and it and\n"
		"every directory above it writable by no one else). The target loads its bytes\n"
		"from a sealed memfd of its own (/proc/self/fd/N), or, where its /proc is not\n"
		"procfs, from a copy made in its own /tmp, /dev/shm or /var/tmp, removed once\n"
		"loaded.\n\n"
		"  -p, --pid PID        the process\n"
		"  -c, --call SYMBOL    then call `int SYMBOL(const char *TEXT)` of LIBRARY\n"
		"  -a, --arg TEXT       the argument of --call (default \"\")\n"
		"  -t, --timeout SECS   longest wait for each step (default 10)\n"
		"  -h, --help           this help\n\n"
		"Prints how it was loaded and its load bias (and what SYMBOL returned); exits\n"
		"1 with the reason if anything failed, the process running on unchanged.\n"
		"Needs CAP_SYS_PTRACE.\n");
}

struct inject_args {
	pid_t pid;
	char lib[PATH_MAX];
	struct inject_opts opts;
};

#define WHO "ptrace-gpu: inject"

static int parse_args(int argc, char **argv, struct inject_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'}, {"call", required_argument, NULL, 'c'},
	    {"arg", required_argument, NULL, 'a'}, {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	   {},
	};
	double secs;
	int c;

	while ((c = cli_getopt(argc, argv, "inject", "p:c:a:t:h", longopts)) != -1) {
		switch (c) {
		case 'p':
			if (parse_pid(optarg, &a->pid)) {
				pr_err("inject: bad PID '%s'", optarg);
				return -EINVAL;
			}
			break;
		case 'c':
			a->opts.entry = optarg;
			break;
		case 'a':
			a->opts.arg = optarg;
			break;
		case 't':
			if (parse_double_flag(WHO, "--timeout", "seconds", optarg, ARG_SECONDS_MIN,
					      ARG_SECONDS_MAX, &secs))
				return -EINVAL;
			a->opts.timeout_ms = (unsigned int)(secs * 1000);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (!a->pid || optind != argc - 1)
		goto bad;
	/* the target resolves the path from its own working directory: make it absolute */
	if (!realpath(argv[optind], a->lib)) {
		int err = errno;

		pr_err("inject: %s: %s", argv[optind], strerror(err));
		return -err;
	}
	return 0;
bad:
	pr_usage("inject", "expected -p PID and one LIBRARY");
	return -EINVAL;
}

int cmd_inject(int argc, char **argv)
{
	struct inject_args a = {};
	struct inject_result res;
	char err[PATH_MAX + 640];
	int fd, ret;

	ret = parse_args(argc, argv, &a);
	if (ret)
		return ret == -EINVAL ? 2 : 1;
	/*
	 * As record does with the CUPTI agent: only a file that root alone can
	 * have written, and the target loads the bytes of the descriptor
	 * checked, from a memfd of its own (or a copy in its own file system),
	 * so that no path swap in between (nor another file at that path in its
	 * mount namespace) is what it runs.
	 */
	if (!proc_exists(a.pid)) {
		pr_err("inject: no process %d", a.pid);
		return 1;
	}
	fd = trusted_open(a.lib, err, sizeof(err));
	if (fd < 0) {
		pr_err("inject: %s", err);
		return 1;
	}
	ret = inject_library_fd(a.pid, fd, basename(a.lib), &a.opts, &res, err, sizeof(err));
	close(fd);
	if (ret) {
		pr_err("inject: %s", err);
		return 1;
	}
	printf("loaded %s into pid %d (%s, load bias %#llx)\n", a.lib, a.pid,
	       res.via_copy ? "from a copy in its file system"
	       : res.handle ? "from a memfd of its own"
			    : "found loaded from a memfd",
	       (unsigned long long)res.bias);
	if (a.opts.entry)
		printf("%s returned %d\n", a.opts.entry, res.entry_ret);
	return 0;
}
