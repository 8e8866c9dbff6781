// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu export: a trace as files other tools read. --pstats writes what
 * cProfile's dump_stats() writes (pstats, snakeviz, gprof2dot); --chrome the
 * Chrome/Perfetto JSON that torch.profiler writes; --pprof the flame graph's
 * stacks as a pprof profile.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/numarg.h"
#include "base/outfile.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "model/profile.h"
#include "chrome/chrome.h"
#include "output/pstats.h"
#include "output/trace_pprof.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

struct export_opts {
	const char *path;
	const char *pstats_out;
	const char *chrome_out;
	const char *pprof_out;
	struct profile_opts prof;
	struct flamegraph_opts fg;
};

static void export_usage(FILE *f)
{
	fprintf(f,
		"usage: ptrace-gpu export [--pstats OUT [--ops]] [--chrome OUT]\n"
		"                         [--pprof OUT [--weight W]] [--tid TID] FILE\n"
		"\n"
		"  --pstats OUT   write Python functions as a cProfile stats file: load it with\n"
		"                 pstats.Stats(OUT), snakeviz OUT or gprof2dot -f pstats OUT\n"
		"  --tid TID      pstats, pprof: only thread TID (default: all threads)\n"
		"  --ops          pstats: PyTorch ops, CUDA runtime calls and annotations\n"
		"                 (ProfilerStep#N, record_function) instead of Python\n"
		"                 functions, keyed like cProfile's built-ins:\n"
		"                 ('~', 0, '<aten::addmm>'); the default for a trace with no\n"
		"                 Python frames\n"
		"  --chrome OUT   write Chrome/Perfetto JSON in Kineto's schema: open it in\n"
		"                 Perfetto (https://ui.perfetto.dev), or HTA; OUT ending in .gz\n"
		"                 is gzipped\n"
		"  --pprof OUT    write the stacks of flamegraph (Python functions, ops, GPU\n"
		"                 kernels) as a pprof profile: pprof, Pyroscope, Parca\n"
		"  --weight W     pprof: wall (default), cpu, gpu or offcpu nanoseconds\n"
		"  -h, --help     this text\n"
		"\n"
		"Each OUT is a new file, mode 0600, that replaces OUT once complete.\n");
}

/* An output that replaces the trace, or another output, loses it: refused. */
static int export_check_outputs(const struct export_opts *o)
{
	const char *outs[] = {o->chrome_out, o->pstats_out, o->pprof_out};
	const size_t n = sizeof(outs) / sizeof(outs[0]);

	for (size_t i = 0; i < n; i++) {
		if (outs[i] && outfile_is_input(outs[i], o->path)) {
			pr_err("export: output %s is the trace %s itself", outs[i], o->path);
			return -EINVAL;
		}
		for (size_t k = 0; k < i; k++) {
			if (outs[i] && outs[k] && !strcmp(outs[i], outs[k])) {
				pr_err("export: two outputs write %s", outs[i]);
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* Returns 0, 1 for --help, or -EINVAL after printing why. */
static int export_parse(int argc, char **argv, struct export_opts *o)
{
	static const struct option longopts[] = {
	    {"pstats", required_argument, NULL, 'p'}, {"chrome", required_argument, NULL, 'c'},
	    {"pprof", required_argument, NULL, 'P'},  {"weight", required_argument, NULL, 'w'},
	    {"tid", required_argument, NULL, 't'},    {"ops", no_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},	      {},
	};
	uint64_t v;
	int c;

	o->prof.kind = PTG_REC_PY_ENTER;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "export", "h", longopts)) != -1) {
		switch (c) {
		case 'p':
			o->pstats_out = optarg;
			break;
		case 'c':
			o->chrome_out = optarg;
			break;
		case 'P':
			o->pprof_out = optarg;
			break;
		case 'w':
			if (flamegraph_weight_parse(optarg, &o->fg.weight)) {
				pr_err("export: bad --weight '%s' (wall, cpu, "
				       "gpu or offcpu)",
				       optarg);
				return -EINVAL;
			}
			break;
		case 't':
			if (parse_u64_flag("ptrace-gpu export", "--tid", optarg, 0, UINT32_MAX, &v))
				return -EINVAL;
			o->prof.by_tid = o->fg.by_tid = true;
			o->prof.tid = o->fg.tid = (uint32_t)v;
			break;
		case 'o':
			o->prof.kind = PTG_REC_OP_ENTER;
			break;
		case 'h':
			export_usage(stdout);
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind != argc - 1 || (!o->pstats_out && !o->chrome_out && !o->pprof_out)) {
		pr_usage("export", "expected an output (--pstats, --chrome, --pprof OUT) and one "
				   "trace FILE");
		return -EINVAL;
	}
	o->path = argv[optind];
	return export_check_outputs(o);
}

static int export_collect(const struct export_opts *o, const struct profile_opts *po,
			  struct trace_reader *r, struct profile_run **run)
{
	int err = trace_reader__rewind(r);

	if (!err)
		err = profile_run__collect(r, po, run);
	if (err && err != -ENOMEM)
		pr_err("export: %s: %s", o->path, trace_reader__error(r));
	return err;
}

/*
 * Python functions, or with --ops the host side of PyTorch: ops, CUDA calls
 * and annotations, keyed as cProfile keys built-ins. A trace with no Python
 * frames (every Kineto trace recorded without with_stack) gets the latter:
 * an empty stats file loads in pstats but shows nothing.
 */
static int export_pstats(const struct export_opts *o, struct trace_reader *r)
{
	struct profile_opts po = o->prof;
	struct profile_run *run = NULL;
	size_t n = 0;
	int err;

	if (po.kind == PTG_REC_OP_ENTER)
		po.host_calls = true;
	err = export_collect(o, &po, r, &run);
	if (err)
		return err;
	profile__funcs(run->all, &n);
	if (!n && !po.host_calls) {
		profile_run__free(run);
		run = NULL;
		po.kind = PTG_REC_OP_ENTER;
		po.host_calls = true;
		err = export_collect(o, &po, r, &run);
		if (err)
			return err;
		profile__funcs(run->all, &n);
		if (n)
			pr_err("export: %s has no Python frames: pstats has its "
			       "ops, CUDA calls and annotations",
			       o->path);
	}
	if (!n) {
		pr_err("export: %s: nothing to write to pstats: no Python functions, "
		       "ops, CUDA calls or annotations%s",
		       o->path, o->prof.by_tid ? " on that --tid" : "");
		err = -ENODATA;
	} else {
		err = pstats__write(run->all, r, o->pstats_out);
	}
	profile_run__free(run);
	return err;
}

static int export_pprof(const struct export_opts *o, struct trace_reader *r)
{
	int err = trace_reader__rewind(r);

	if (!err)
		err = trace_pprof__write(r, &o->fg, o->pprof_out);
	if (err == -ENODATA)
		pr_err("export: %s: nothing to write to pprof: no %s in it%s", o->path,
		       flamegraph_weight_name(o->fg.weight), o->fg.by_tid ? " on that --tid" : "");
	else if (err && err != -ENOMEM && err != -EIO && trace_reader__error(r)[0])
		pr_err("export: %s: %s", o->path, trace_reader__error(r));
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
	if (!err && o.pstats_out)
		err = export_pstats(&o, r);
	if (!err && o.pprof_out)
		err = export_pprof(&o, r);
	trace_reader__close(r);
	return err ? 1 : 0;
}
