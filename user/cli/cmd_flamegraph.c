// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu flamegraph: folded stacks (stdout or -o FILE) or, when FILE
 * ends in .svg, an interactive SVG written by ptrace-gpu itself.
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
#include "output/flamegraph_write.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

struct fg_cmd_opts {
	const char *path;
	const char *out;
	struct flamegraph_opts fg;
};

static void flamegraph_usage(FILE *f)
{
	fprintf(f,
		"usage: ptrace-gpu flamegraph FILE [-o OUT] [--weight wall|cpu|gpu|offcpu] [--tid "
		"TID]\n"
		"                             [--max-stack N]\n"
		"\n"
		"Writes folded stacks, one 'frame;frame;frame N' line per distinct stack, for\n"
		"flamegraph.pl, inferno or speedscope: Python frames as 'func (file:line)', ops\n"
		"by name, GPU kernels as '[gpu] name' leaves. N is in nanoseconds.\n"
		"\n"
		"  -o, --output OUT  write to OUT (a new file, mode 0600, that replaces OUT)\n"
		"                    instead of stdout; OUT ending in .svg gets an\n"
		"                    interactive SVG (hover, click to zoom, search)\n"
		"  --weight W        wall: self time of each span (default)\n"
		"                    cpu: self time minus the off-CPU intervals inside it\n"
		"                    gpu: kernel time, under the stack that launched it\n"
		"                    offcpu: off-CPU intervals, under the stack they stopped\n"
		"  --tid TID         only thread TID (default: all threads)\n"
		"  --max-stack N     keep the outermost N frames of a stack, fold the rest into\n"
		"                    one '[... K frames cut]' frame (default %d)\n"
		"  -h, --help        this text\n",
		FLAMEGRAPH_MAX_STACK);
}

/* Returns 0, 1 for --help, or -EINVAL after printing why. */
static int flamegraph_parse(int argc, char **argv, struct fg_cmd_opts *o)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'}, {"weight", required_argument, NULL, 'w'},
	    {"tid", required_argument, NULL, 't'},    {"max-stack", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},	      {},
	};
	uint64_t v;
	int c;

	optind = 1;
	while ((c = cli_getopt(argc, argv, "flamegraph", "o:h", longopts)) != -1) {
		switch (c) {
		case 'o':
			o->out = optarg;
			break;
		case 'w':
			if (flamegraph_weight_parse(optarg, &o->fg.weight)) {
				pr_err("flamegraph: bad --weight '%s'", optarg);
				return -EINVAL;
			}
			break;
		case 't':
			if (parse_u64_flag("ptrace-gpu flamegraph", "--tid", optarg, 0, UINT32_MAX,
					   &v))
				return -EINVAL;
			o->fg.by_tid = true;
			o->fg.tid = (uint32_t)v;
			break;
		case 'm':
			if (parse_u64_flag("ptrace-gpu flamegraph", "--max-stack", optarg, 1,
					   FLAMEGRAPH_MAX_STACK_MAX, &v))
				return -EINVAL;
			o->fg.max_stack = (unsigned int)v;
			break;
		case 'h':
			flamegraph_usage(stdout);
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind != argc - 1) {
		pr_usage("flamegraph", "expected one trace FILE");
		return -EINVAL;
	}
	o->path = argv[optind];
	if (o->out && outfile_is_input(o->out, o->path)) {
		pr_err("flamegraph: output %s is the trace %s itself", o->out, o->path);
		return -EINVAL;
	}
	return 0;
}

static bool is_svg(const char *path)
{
	size_t len = path ? strlen(path) : 0;

	return len >= 4 && !strcasecmp(path + len - 4, ".svg");
}

static int flamegraph_write(const struct fg_cmd_opts *o, struct flamegraph *fg,
			    const struct trace_reader *r)
{
	struct outfile *of = NULL;
	FILE *out = stdout;
	int err = 0;

	if (o->out) {
		err = outfile__open(o->out, &of);
		out = err ? NULL : outfile__stream(of);
	}
	if (!out) {
		err = err ?: -ENOMEM;
		pr_err("flamegraph: cannot create %s: %s", o->out, strerror(-err));
		outfile__abort(of);
		return err;
	}
	if (is_svg(o->out))
		err = flamegraph__write_svg(fg, r, out, o->path);
	else
		err = flamegraph__write_folded(fg, r, out);
	if (of && !err) {
		err = outfile__commit(of);
		of = NULL;
	} else if (!of && (fflush(out) || ferror(out)) && !err) {
		err = errno ? -errno : -EIO;
	}
	if (err && err != -ENOMEM)
		pr_err("flamegraph: writing %s: %s", o->out ? o->out : "output", strerror(-err));
	outfile__abort(of);
	return err;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct fg_cmd_opts o = {};
	struct trace_reader *r = NULL;
	struct flamegraph *fg = NULL;
	int err;

	err = flamegraph_parse(argc, argv, &o);
	if (err)
		return err > 0 ? 0 : 2;
	if (trace_open("ptrace-gpu flamegraph", o.path, &r))
		return 1;
	err = flamegraph__collect(r, &o.fg, &fg);
	if (err == -ENOMEM)
		goto cleanup;
	if (err) {
		pr_err("flamegraph: %s: %s", o.path, trace_reader__error(r));
		goto cleanup;
	}
	err = flamegraph_write(&o, fg, r);
cleanup:
	flamegraph__free(fg);
	trace_reader__close(r);
	return err ? 1 : 0;
}
