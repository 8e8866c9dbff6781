// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu export: a trace as files other tools read. --pstats writes what
 * cProfile's dump_stats() writes (pstats, snakeviz, gprof2dot); --chrome the
 * Chrome/Perfetto JSON that torch.profiler writes.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "chrome.h"
#include "commands.h"
#include "outfile.h"
#include "profile.h"
#include "pstats.h"
#include "trace.h"
#include "trace_open.h"

struct export_opts {
	const char *path;
	const char *pstats_out;
	const char *chrome_out;
	struct profile_opts prof;
};

static void export_usage(FILE *f)
{
	fprintf(f,
		"usage: ptrace-gpu export [--pstats OUT [--tid TID] [--ops]] [--chrome OUT] FILE\n"
		"\n"
		"  --pstats OUT   write Python functions as a cProfile stats file: load it with\n"
		"                 pstats.Stats(OUT), snakeviz OUT or gprof2dot -f pstats OUT\n"
		"  --tid TID      pstats: only thread TID (default: all threads)\n"
		"  --ops          pstats: PyTorch dispatcher ops instead of Python functions,\n"
		"                 keyed like cProfile's built-ins: ('~', 0, '<aten::addmm>')\n"
		"  --chrome OUT   write Chrome/Perfetto JSON in Kineto's schema (Perfetto UI,\n"
		"                 chrome://tracing, HTA); OUT ending in .gz is gzipped\n"
		"  -h, --help     this text\n"
		"\n"
		"Each OUT is a new file, mode 0600, that replaces OUT once complete.\n");
}

/* An output that replaces the trace, or the other output, loses it: refused. */
static int export_check_outputs(const struct export_opts *o)
{
	const char *outs[] = {o->chrome_out, o->pstats_out};

	for (size_t i = 0; i < 2; i++) {
		if (outs[i] && outfile_is_input(outs[i], o->path)) {
			fprintf(stderr, "ptrace-gpu export: output %s is the trace %s itself\n",
				outs[i], o->path);
			return -EINVAL;
		}
	}
	if (outs[0] && outs[1] && !strcmp(outs[0], outs[1])) {
		fprintf(stderr, "ptrace-gpu export: --chrome and --pstats both write %s\n",
			outs[0]);
		return -EINVAL;
	}
	return 0;
}

/* Returns 0, 1 for --help, or -EINVAL after printing why. */
static int export_parse(int argc, char **argv, struct export_opts *o)
{
	static const struct option longopts[] = {
	    {"pstats", required_argument, NULL, 'p'}, {"chrome", required_argument, NULL, 'c'},
	    {"tid", required_argument, NULL, 't'},    {"ops", no_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},	      {},
	};
	unsigned long v;
	char *end;
	int c;

	o->prof.kind = PTG_REC_PY_ENTER;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->pstats_out = optarg;
			break;
		case 'c':
			o->chrome_out = optarg;
			break;
		case 't':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || !*optarg || *end || *optarg == '-' || v > UINT32_MAX) {
				fprintf(stderr, "ptrace-gpu export: bad --tid '%s'\n", optarg);
				return -EINVAL;
			}
			o->prof.by_tid = true;
			o->prof.tid = (uint32_t)v;
			break;
		case 'o':
			o->prof.kind = PTG_REC_OP_ENTER;
			break;
		case 'h':
			export_usage(stdout);
			return 1;
		default:
			export_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc - 1 || (!o->pstats_out && !o->chrome_out)) {
		fprintf(stderr,
			"ptrace-gpu export: expected an output (--pstats OUT, --chrome OUT) "
			"and one trace FILE\n");
		export_usage(stderr);
		return -EINVAL;
	}
	o->path = argv[optind];
	return export_check_outputs(o);
}

static int export_pstats(const struct export_opts *o, struct trace_reader *r)
{
	struct profile_run *run = NULL;
	int err;

	err = profile_run__collect(r, &o->prof, &run);
	if (err) {
		if (err != -ENOMEM)
			fprintf(stderr, "ptrace-gpu export: %s: %s\n", o->path,
				trace_reader__error(r));
		return err;
	}
	err = pstats__write(run->all, r, o->pstats_out);
	profile_run__free(run);
	return err;
}

int cmd_export(int argc, char **argv)
{
	struct export_opts o = {};
	struct trace_reader *r = NULL;
	int err;

	err = export_parse(argc, argv, &o);
	if (err)
		return err > 0 ? 0 : 2;
	if (trace_open("ptrace-gpu export", o.path, &r))
		return 1;
	if (o.chrome_out)
		err = chrome_export(r, o.chrome_out);
	if (!err && o.pstats_out) {
		err = trace_reader__rewind(r);
		if (err)
			fprintf(stderr, "ptrace-gpu export: %s: %s\n", o.path,
				trace_reader__error(r));
		else
			err = export_pstats(&o, r);
	}
	trace_reader__close(r);
	return err ? 1 : 0;
}
