// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu sample: sample the Python stacks of some (-p) or all (-a)
 * Python processes at a fixed rate, and write one profile at the end, or
 * one per interval into a directory that keeps only the newest N.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/numarg.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "model/stacks.h"
#include "proc/procfs.h"
#include "pyinterp/pyinterp.h"
#include "sample/sample.h"
#include "sample/sample_write.h"

#define MAX_PIDS    1024
#define MAX_FREQ    10000
#define MAX_OUTPUTS 8

struct sample_cmd {
	struct sample_opts so;
	pid_t pids[MAX_PIDS];
	double duration;
	const char *outputs[MAX_OUTPUTS];
	size_t noutputs;
	struct sample_write_opts wo;
	bool format_set;
	unsigned int every;
	const char *dir;
	unsigned int keep;
	bool quiet;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ptrace-gpu sample (-a | -p PID[,PID...]) [-F HZ] [-d SECS] [-o FILE]\n"
	    "       ptrace-gpu sample (-a | -p PID[,PID...]) --every SECS --dir DIR [--keep N]\n\n"
	    "Samples the Python stacks of running CPython processes at a fixed rate per CPU,\n"
	    "with no change in them, and writes a pprof profile, folded stacks or an SVG.\n\n"
	    "  -a, --all             every Python process on the host, including ones that\n"
	    "                        start while sampling (looked for each second)\n"
	    "  -p, --pid PID[,PID]   these processes (stops when all have exited)\n"
	    "  -F, --freq HZ         samples per second per CPU (default 99)\n"
	    "  -d, --duration SECS   stop after SECS seconds (default: Ctrl-C or SIGTERM)\n"
	    "  -o, --output FILE     FILE.pb.gz: pprof (default sample.pb.gz); FILE.folded or\n"
	    "                        FILE.txt: folded stacks; FILE.svg: a flame graph; -: folded\n"
	    "                        stacks on stdout. Repeat -o for several from one run.\n"
	    "                        Each FILE is a new file, mode 0600, that replaces FILE.\n"
	    "      --folded          folded stacks whatever the name (stdout without -o)\n"
	    "      --format FMT      pprof, folded or svg\n"
	    "      --threads         folded, SVG: one frame per thread under its process\n"
	    "      --max-stack N     folded, SVG: keep the outermost N frames of a stack and\n"
	    "                        fold the rest into one '[... K frames cut]' (default 1024)\n"
	    "      --native          also the native (C) stack, merged with the Python frames\n"
	    "      --off-cpu         blocked time instead of CPU time: where threads wait,\n"
	    "                        weighted by how long (from sched_switch)\n"
	    "      --every SECS      continuous: write one profile per SECS into --dir\n"
	    "      --dir DIR         where continuous profiles go (sample-<UTC time>.<ext>)\n"
	    "      --keep N          keep the newest N profiles in DIR (default 60)\n"
	    "  -v, --verbose         say when a process is found and when it ends (and debug\n"
	    "                        messages: the same as ptrace-gpu -v sample)\n"
	    "  -q, --quiet           no summary (the same as ptrace-gpu -q sample)\n"
	    "  -h, --help            this help\n\n"
	    "Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE). Supported Python: %s.\n",
	    py_supported_versions());
}

static int parse_uint_flag(const char *flag, const char *s, unsigned int min, unsigned int max,
			   unsigned int *out)
{
	uint64_t v;

	if (parse_u64_flag("ptrace-gpu: sample", flag, s, min, max, &v))
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

static int parse_pids(struct sample_cmd *c, char *arg)
{
	char *save = NULL;

	if (!*arg) {
		pr_err("sample: bad PID ''");
		return -EINVAL;
	}
	for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		pid_t pid;

		if (parse_pid(tok, &pid) || c->so.npids >= MAX_PIDS) {
			pr_err("sample: bad PID '%s'", tok);
			return -EINVAL;
		}
		c->pids[c->so.npids++] = pid;
	}
	return 0;
}

static int parse_format(struct sample_cmd *c, const char *s)
{
	static const char *const names[] = {"pprof", "folded", "svg"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			c->wo.format = (enum sample_format)i;
			c->format_set = true;
			return 0;
		}
	}
	pr_err("sample: --format is pprof, folded or svg");
	return -EINVAL;
}

enum {
	OPT_FOLDED = 256,
	OPT_FORMAT,
	OPT_THREADS,
	OPT_NATIVE,
	OPT_OFFCPU,
	OPT_EVERY,
	OPT_DIR,
	OPT_KEEP,
	OPT_MAX_STACK
};

static int parse_opt(struct sample_cmd *c, int opt, char *arg)
{
	switch (opt) {
	case 'a':
		c->so.all = true;
		return 0;
	case 'p':
		return parse_pids(c, arg);
	case 'F':
		return parse_uint_flag("-F", arg, 1, MAX_FREQ, &c->so.freq);
	case 'd':
		return parse_double_flag("ptrace-gpu: sample", "--duration", "seconds", arg,
					 ARG_SECONDS_MIN, ARG_SECONDS_MAX, &c->duration);
	case 'o':
		if (c->noutputs < MAX_OUTPUTS) {
			c->outputs[c->noutputs++] = arg;
			return 0;
		}
		pr_err("sample: at most %d -o", MAX_OUTPUTS);
		return -EINVAL;
	case 'v':
		c->so.verbose = true;
		log_set_verbosity(PTG_VERBOSE);
		return 0;
	case 'q':
		c->quiet = true;
		log_set_verbosity(PTG_QUIET);
		return 0;
	case OPT_FOLDED:
		c->wo.format = SAMPLE_FMT_FOLDED;
		c->format_set = true;
		return 0;
	case OPT_FORMAT:
		return parse_format(c, arg);
	case OPT_THREADS:
		c->wo.threads = true;
		return 0;
	case OPT_MAX_STACK:
		return parse_uint_flag("--max-stack", arg, 1, STACKS_MAX_STACK_MAX,
				       &c->wo.max_stack);
	case OPT_NATIVE:
		c->so.native = true;
		return 0;
	case OPT_OFFCPU:
		c->so.offcpu = true;
		return 0;
	case OPT_EVERY:
		return parse_uint_flag("--every", arg, 1, 86400, &c->every);
	case OPT_DIR:
		c->dir = arg;
		return 0;
	case OPT_KEEP:
		return parse_uint_flag("--keep", arg, 1, 1000000, &c->keep);
	}
	return -EINVAL;
}

/* --format and --folded hold for every output; otherwise the name tells. */
static enum sample_format output_format(const struct sample_cmd *c, const char *path)
{
	return c->format_set ? c->wo.format : sample_format_of(path);
}

static int check_opts(struct sample_cmd *c)
{
	/* ptrace-gpu -q/-v sample is sample -q/-v */
	c->quiet = c->quiet || log_verbosity() == PTG_QUIET;
	c->so.verbose = c->so.verbose || log_verbosity() == PTG_VERBOSE;
	if (!c->so.all == !c->so.npids) {
		pr_err("sample: give either -a or -p PID[,PID...]");
		return -EINVAL;
	}
	if (!c->every != !c->dir) {
		pr_err("sample: --every and --dir go together");
		return -EINVAL;
	}
	if (c->every && c->noutputs) {
		pr_err("sample: -o and --dir exclude each other");
		return -EINVAL;
	}
	if (!c->noutputs && !c->every)
		c->outputs[c->noutputs++] =
		    c->wo.format == SAMPLE_FMT_FOLDED && c->format_set ? "-" : "sample.pb.gz";
	for (size_t i = 0; i < c->noutputs; i++) {
		if (!strcmp(c->outputs[i], "-") &&
		    output_format(c, c->outputs[i]) == SAMPLE_FMT_PPROF) {
			pr_err("sample: pprof goes to a file, not stdout");
			return -EINVAL;
		}
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct sample_cmd *c)
{
	static const struct option longopts[] = {
	    {"all", no_argument, NULL, 'a'},
	    {"pid", required_argument, NULL, 'p'},
	    {"freq", required_argument, NULL, 'F'},
	    {"duration", required_argument, NULL, 'd'},
	    {"output", required_argument, NULL, 'o'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {"folded", no_argument, NULL, OPT_FOLDED},
	    {"format", required_argument, NULL, OPT_FORMAT},
	    {"threads", no_argument, NULL, OPT_THREADS},
	    {"max-stack", required_argument, NULL, OPT_MAX_STACK},
	    {"native", no_argument, NULL, OPT_NATIVE},
	    {"off-cpu", no_argument, NULL, OPT_OFFCPU},
	    {"every", required_argument, NULL, OPT_EVERY},
	    {"dir", required_argument, NULL, OPT_DIR},
	    {"keep", required_argument, NULL, OPT_KEEP},
	    {},
	};
	int opt, err;

	*c = (struct sample_cmd){.so = {.freq = 99}, .keep = 60};
	c->so.pids = c->pids;
	while ((opt = cli_getopt(argc, argv, "sample", "ap:F:d:o:vqh", longopts)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			exit(0);
		}
		err = parse_opt(c, opt, optarg);
		if (err)
			return err;
	}
	if (optind < argc) {
		pr_err("sample: unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return check_opts(c);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_profile_name(const char *name)
{
	static const char *const exts[] = {".pb.gz", ".folded", ".svg"};
	size_t n = strlen(name);

	if (strncmp(name, "sample-", 7))
		return false;
	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);

		if (n > e && !strcmp(name + n - e, exts[i]))
			return true;
	}
	return false;
}

/* Deletes the oldest profiles of dir beyond keep: names sort by time. */
static int prune_dir(const char *dir, unsigned int keep)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL, path[4096];
	size_t n = 0, cap = 0;
	int err = 0;

	if (!d)
		return -errno;
	while (!err && (de = readdir(d))) {
		char **nn;

		if (!is_profile_name(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				err = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name)))
			err = -ENOMEM;
		else
			n++;
	}
	closedir(d);
	if (n)
		array_sort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i + keep < n && !err; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (unlink(path) && errno != ENOENT)
			err = -errno;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return err;
}

static uint64_t set_samples(const struct sample_set *set)
{
	uint64_t n = 0;

	for (size_t i = 0; i < set->nrows; i++)
		n += set->rows[i].count;
	return n;
}

static int write_set(struct sample_cmd *c, const struct sample_set *set, const char *path)
{
	struct sample_write_opts wo = c->wo;
	int err;

	wo.format = output_format(c, path);
	err = sample_write(set, &wo, path);

	if (err)
		pr_err("sample: cannot write %s: %s", path, strerror(-err));
	else if (!c->quiet && strcmp(path, "-"))
		pr_info("sample: wrote %s (%llu samples of %zu processes)", path,
			(unsigned long long)set_samples(set), set->nprocs);
	return err;
}

/* Continuous mode: DIR/sample-<UTC start of the interval>.<ext>, then the oldest go. */
static int write_interval(struct sample_cmd *c, struct sampler *s)
{
	const struct sample_set *set;
	char path[4096], stamp[32];
	struct tm tm;
	time_t t;
	int err;

	err = sampler__take(s, &set);
	if (err)
		return err;
	t = (time_t)(set->start_realtime_ns / 1000000000ull);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(path, sizeof(path), "%s/sample-%s.%s", c->dir, stamp,
		 sample_format_ext(c->wo.format));
	err = write_set(c, set, path);
	if (!err)
		err = prune_dir(c->dir, c->keep);
	if (err == -ENOMEM)
		pr_err("sample: out of memory");
	return err;
}

static const char *run_loop(struct sample_cmd *c, struct sampler *s, int *err)
{
	uint64_t start = now_ns(CLOCK_MONOTONIC), now;
	uint64_t next = start + (uint64_t)c->every * 1000000000ull;
	uint64_t limit = c->duration > 0 ? (uint64_t)(c->duration * 1e9) : 0;

	for (;;) {
		*err = sampler__poll(s, 100);
		if (*err)
			return "error";
		now = now_ns(CLOCK_MONOTONIC);
		if (stop_signal)
			return stop_signal == SIGINT ? "interrupted" : "terminated";
		if (limit && now - start >= limit)
			return "duration elapsed";
		if (!c->so.all && !sampler__live(s))
			return "all targets exited";
		if (c->every && now >= next) {
			next += (uint64_t)c->every * 1000000000ull;
			*err = write_interval(c, s);
			if (*err)
				return "error";
		}
	}
}

/* Before sampling: a profile that cannot be written is better known now than at the end. */
static int check_outputs(struct sample_cmd *c)
{
	char dir[4096], *slash;
	int err;

	if (c->dir) {
		err = prune_dir(c->dir, c->keep);
		if (!err && access(c->dir, W_OK))
			err = -errno;
		if (err)
			pr_err("sample: --dir %s: %s", c->dir, strerror(-err));
		return err;
	}
	for (size_t i = 0; i < c->noutputs; i++) {
		if (!strcmp(c->outputs[i], "-"))
			continue;
		snprintf(dir, sizeof(dir), "%s", c->outputs[i]);
		slash = strrchr(dir, '/');
		if (slash)
			*(slash == dir ? slash + 1 : slash) = '\0';
		if (access(slash ? dir : ".", W_OK)) {
			err = -errno;
			pr_err("sample: cannot write %s: %s", c->outputs[i], strerror(errno));
			return err;
		}
	}
	return 0;
}

static int sample_run(struct sample_cmd *c)
{
	struct sigaction sa = {.sa_handler = on_signal};
	const struct sample_set *set;
	struct sampler *s = NULL;
	const char *why;
	int err;

	err = sampler__open(&c->so, &s);
	if (!err)
		err = check_outputs(c);
	if (err) {
		sampler__free(s);
		return err;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (!c->quiet && c->so.offcpu)
		pr_info("sampling %zu Python process%s%s (off-CPU time)", sampler__live(s),
			sampler__live(s) == 1 ? "" : "es", c->so.all ? " and any that start" : "");
	else if (!c->quiet)
		pr_info("sampling %zu Python process%s%s at %u Hz (CPU time)", sampler__live(s),
			sampler__live(s) == 1 ? "" : "es", c->so.all ? " and any that start" : "",
			c->so.freq);
	why = run_loop(c, s, &err);
	if (!err && c->every)
		err = write_interval(c, s);
	else if (!err && !(err = sampler__take(s, &set)))
		for (size_t i = 0; i < c->noutputs && !err; i++)
			err = write_set(c, set, c->outputs[i]);
	if (!c->quiet) {
		pr_info("sample: stopped: %s", why);
		sampler__print_stats(s);
	}
	sampler__free(s);
	return err;
}

int cmd_sample(int argc, char **argv)
{
	struct sample_cmd c;

	if (parse_opts(argc, argv, &c))
		return 2;
	return sample_run(&c) ? 1 : 0;
}
