// SPDX-License-Identifier: MIT
/* ptrace-gpu idle: why the GPU is idle, as text tables or JSON (idle_out.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/idle.h"
#include "base/log.h"
#include "base/numarg.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "output/idle_out.h"
#include "output/ranks_out.h"
#include "trace/trace_open.h"

static void idle_usage(FILE *f)
{
	fprintf(f, "usage: ptrace-gpu idle TRACE.ptg [-n N] [--json] [--kernel-wait-us US]\n"
		   "                         [--max-queue LEN]\n"
		   "       ptrace-gpu idle TRACE.ptg TRACE.ptg... | DIR  [options]\n\n"
		   "GPU idle time and where it comes from: HTA's temporal breakdown, idle time\n"
		   "per stream, launch delay and launch-queue length, and torch.profiler's\n"
		   "queue depth and optimizable events (see docs/idle.md).\n\n"
		   "Given several traces (or a directory of .ptg files), one per rank of a\n"
		   "distributed job: one idle row per rank, and per ProfilerStep#N each rank's\n"
		   "step time and NCCL kernel time, the rank the others waited for and how\n"
		   "long. Ranks come from each trace's rank (record: RANK; import:\n"
		   "distributedInfo), else from the order of the files.\n\n"
		   "  -n N               events, names, gaps and steps to list (default 10)\n"
		   "  --json             one JSON object instead of tables\n"
		   "  --kernel-wait-us   a gap shorter than this between two ops of a stream is\n"
		   "                     kernel wait (default 30)\n"
		   "  --max-queue LEN    launch-queue length counted as full (default 1024)\n");
}

#define WHO "ptrace-gpu idle"
/* -n sizes arrays of gaps and names: a million is more than any screen */
#define TOP_N_MAX 1000000

static int parse_args(int argc, char **argv, struct idle_opts *o, bool *json)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"kernel-wait-us", required_argument, NULL, 'k'},
	    {"max-queue", required_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	uint64_t v;
	double us;
	int c;

	optind = 1;
	while ((c = cli_getopt(argc, argv, "idle", "n:h", opts)) != -1) {
		switch (c) {
		case 'n':
			if (parse_u64_flag(WHO, "-n", optarg, 0, TOP_N_MAX, &v))
				return -EINVAL;
			o->top_n = (unsigned int)v;
			break;
		case 'j':
			*json = true;
			break;
		case 'k':
			if (parse_double_flag(WHO, "--kernel-wait-us", "microseconds", optarg, 0,
					      ARG_SECONDS_MAX * 1e6, &us))
				return -EINVAL;
			o->kernel_wait_ns = (uint64_t)(us * 1000);
			break;
		case 'q':
			if (parse_u64_flag(WHO, "--max-queue", optarg, 1, UINT32_MAX, &v))
				return -EINVAL;
			o->max_queue_len = (uint32_t)v;
			break;
		case 'h':
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		pr_usage("idle", "expected a trace FILE, several, or a directory");
		return -EINVAL;
	}
	return 0;
}

/* Several traces, one per rank: the cross-rank view (ranks.h). */
static int idle_ranks(char *const *args, size_t nargs, const struct idle_opts *o, bool json)
{
	struct ranks_report *rep = NULL;
	char **paths = NULL;
	size_t n = 0;
	int err;

	err = ranks_paths(WHO, args, nargs, &paths, &n) ?: ranks_analyze(WHO, paths, n, o, &rep);
	if (!err && json)
		err = ranks_print_json(stdout, rep, o);
	else if (!err)
		ranks_print_text(stdout, rep, o);
	if (err == -ENOMEM && rep)
		pr_err("%s: %s", log_context(WHO), strerror(ENOMEM));
	ranks_report__free(rep);
	ranks_paths_free(paths, n);
	return err;
}

int cmd_idle(int argc, char **argv)
{
	struct idle_report *rep = NULL;
	struct trace_reader *r = NULL;
	struct idle_out out = {.f = stdout};
	struct idle_opts o;
	bool json = false;
	int err;

	idle_opts__defaults(&o);
	err = parse_args(argc, argv, &o, &json);
	if (err > 0)
		idle_usage(stdout);
	if (err)
		return err > 0 ? 0 : 2;
	if (ranks_wanted(argv + optind, argc - optind)) {
		err = idle_ranks(argv + optind, argc - optind, &o, json);
		goto flush;
	}
	out.path = argv[optind];
	if (trace_open("ptrace-gpu: idle", out.path, &r))
		return 1;
	err = idle_analyze(r, &o, &rep);
	if (err)
		goto cleanup;
	out.rep = rep;
	out.r = r;
	out.o = &o;
	if (json)
		err = idle_print_json(&out);
	else
		idle_print_text(&out);
flush:
	if (fflush(stdout) && !err) {
		err = -errno;
		pr_err("idle: writing output: %s", strerror(-err));
	}
cleanup:
	idle_report__free(rep);
	trace_reader__close(r);
	return err ? 1 : 0;
}
