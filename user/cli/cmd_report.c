// SPDX-License-Identifier: MIT
/*
 * ptrace-gpu report: a trace's header, then cProfile's print_stats table of
 * Python functions, or torch.profiler's key_averages() table of ops (--ops).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/cudacalls_report.h"
#include "analysis/offcpu_report.h"
#include "base/log.h"
#include "base/numarg.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "model/profile.h"
#include "output/pstats.h"
#include "output/ranks_out.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

#define WHO "ptrace-gpu report"

struct report_opts {
	const char *path;
	char *const *paths; /* several: one trace per rank */
	size_t npaths;
	struct profile_opts prof;
	struct pstats_list_opts list;
	bool sort_given;
	bool callers;
	bool callees;
};

static void report_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: ptrace-gpu report FILE [--sort cumtime|tottime|ncalls|name] [--limit N]\n"
	    "                         [--pid PID] [--tid TID] [--per-thread] [--callers]\n"
	    "                         [--callees] [--ops]\n"
	    "                         [--group-by-module | --group-by-stack N]\n"
	    "       ptrace-gpu report FILE FILE... | DIR  [options]\n"
	    "\n"
	    "Prints the trace's header (command, pid, interpreter, duration, calls, lost\n"
	    "events), then a table of Python functions like cProfile's print_stats: ncalls\n"
	    "(total/primitive when they differ), tottime, percall, cumtime, percall, in\n"
	    "seconds. Generator resumptions add time but are not calls.\n"
	    "\n"
	    "Given several traces (or a directory of .ptg files), one per rank of a\n"
	    "distributed job: first the cross-rank view of 'ptrace-gpu idle' with the\n"
	    "same arguments (idle per rank; per ProfilerStep#N the rank the others\n"
	    "waited for and how long; at most N steps with --limit, else 10), then each\n"
	    "rank's report under a '=== rank R: FILE ===' line.\n"
	    "\n"
	    "  --sort KEY     order of rows: cumtime (default), tottime, ncalls, name\n"
	    "  --limit N      print at most N rows\n"
	    "  --pid PID      only process PID, of a recording of several (record -p A,B,\n"
	    "                 --children; default: all processes together)\n"
	    "  --tid TID      only thread TID (default: all threads together)\n"
	    "  --per-thread   one table per thread, with its tid, pid and name\n"
	    "  --callers      also list each function's callers (pstats print_callers)\n"
	    "  --callees      also list each function's callees (pstats print_callees)\n"
	    "  --ops          PyTorch ops, CUDA runtime calls and annotations instead, as\n"
	    "                 torch.profiler's key_averages().table(); sorted by self CPU\n"
	    "                 unless --sort\n"
	    "  --group-by-module  ops per nn.Module path (TOP(Net)::forward.fc1(Linear)::\n"
	    "                 forward), in a Module Hierarchy column; implies --ops\n"
	    "  --group-by-stack N  ops per innermost N Python frames, in a Source\n"
	    "                 Location column (key_averages(group_by_stack_n=N)); implies --ops\n"
	    "  -h, --help     this text\n"
	    "\n"
	    "docs/reports.md describes every column exactly.\n");
}

/* Returns 0, 1 for --help, or -EINVAL after printing why. */
static int report_parse(int argc, char **argv, struct report_opts *o)
{
	static const struct option longopts[] = {
	    {"sort", required_argument, NULL, 's'},
	    {"limit", required_argument, NULL, 'l'},
	    {"tid", required_argument, NULL, 't'},
	    {"pid", required_argument, NULL, 'P'},
	    {"per-thread", no_argument, NULL, 'p'},
	    {"callers", no_argument, NULL, 'c'},
	    {"callees", no_argument, NULL, 'e'},
	    {"ops", no_argument, NULL, 'o'},
	    {"group-by-module", no_argument, NULL, 'M'},
	    {"group-by-stack", required_argument, NULL, 'G'},
	    {"help", no_argument, NULL, 'h'},
	    {},
	};
	uint64_t v;
	int c;

	o->prof.kind = PTG_REC_PY_ENTER;
	o->list.sort = PSTATS_SORT_CUMTIME;
	o->list.limit = -1;
	optind = 1;
	while ((c = cli_getopt(argc, argv, "report", "h", longopts)) != -1) {
		switch (c) {
		case 's':
			if (pstats_sort_parse(optarg, &o->list.sort))
				goto bad_value;
			o->sort_given = true;
			break;
		case 'l':
			if (parse_u64(optarg, 0, LONG_MAX, &v))
				goto bad_value;
			o->list.limit = (long)v;
			break;
		case 't':
			if (parse_u64(optarg, 0, UINT32_MAX, &v))
				goto bad_value;
			o->prof.by_tid = true;
			o->prof.tid = (uint32_t)v;
			break;
		case 'P':
			if (parse_u64(optarg, 0, UINT32_MAX, &v))
				goto bad_value;
			o->prof.by_pid = true;
			o->prof.pid = (uint32_t)v;
			break;
		case 'p':
			o->prof.per_thread = true;
			break;
		case 'c':
			o->callers = true;
			break;
		case 'e':
			o->callees = true;
			break;
		case 'o':
			o->prof.kind = PTG_REC_OP_ENTER;
			break;
		case 'M':
			o->prof.kind = PTG_REC_OP_ENTER;
			o->prof.group = PROFILE_GROUP_MODULE;
			break;
		case 'G':
			if (parse_u64(optarg, 1, 64, &v))
				goto bad_value;
			o->prof.kind = PTG_REC_OP_ENTER;
			o->prof.group = PROFILE_GROUP_STACK;
			o->prof.stack_n = (unsigned int)v;
			break;
		case 'h':
			report_usage(stdout);
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (optind >= argc) {
		pr_usage("report", "expected a trace FILE, several, or a directory");
		return -EINVAL;
	}
	o->path = argv[optind];
	o->paths = argv + optind;
	o->npaths = argc - optind;
	if (o->prof.kind == PTG_REC_OP_ENTER && !o->sort_given)
		o->list.sort = PSTATS_SORT_TOTTIME;
	/* key_averages() has CUDA runtime calls and annotations as rows, and an
	 * op's self time does not hold the cudaLaunchKernel it made */
	o->prof.host_calls = o->prof.kind == PTG_REC_OP_ENTER;
	return 0;
bad_value:
	pr_err("report: bad value '%s' for --%s", optarg,
	       c == 's'	  ? "sort"
	       : c == 'l' ? "limit"
	       : c == 'G' ? "group-by-stack (1 to 64)"
			  : "tid");
	return -EINVAL;
}

/* The value of key, or NULL when the trace has none or an empty one. */
static const char *meta(const struct trace_reader *r, const char *key)
{
	const char *v = trace_reader__meta(r, key);

	return v && *v ? v : NULL;
}

static void print_losses(FILE *out, const struct trace_reader *r)
{
	const struct ptg_loss *l;
	size_t n = 0, shown = 0;
	uint64_t total = 0;

	l = trace_reader__losses(r, &n);
	for (size_t i = 0; i < n; i++)
		total += l[i].count;
	if (!total) {
		fprintf(out, "no events lost\n");
		return;
	}
	fprintf(out, "lost events: %" PRIu64 " (", total);
	for (size_t i = 0; i < n; i++) {
		if (!l[i].count)
			continue;
		fprintf(out, "%s%s %" PRIu64, shown++ ? ", " : "", ptg_loss_name(&l[i]),
			l[i].count);
		if (l[i].cpu != UINT32_MAX)
			fprintf(out, " on cpu %u", l[i].cpu);
	}
	fprintf(out, ")\n");
}

/* Metadata keys are those that record and import write. */
static void print_header(FILE *out, const struct report_opts *o, const struct trace_reader *r,
			 const struct profile_run *run)
{
	const struct model_stats *st = &run->stats;
	uint64_t ncalls, pcalls, tt_ns;
	const char *v;

	fprintf(out, "trace: %s\n", o->path);
	if ((v = meta(r, "source"))) {
		fprintf(out, "source: %s", v);
		if ((v = meta(r, "import.file")))
			fprintf(out, " (%s)", v);
		fprintf(out, "\n");
	}
	if ((v = meta(r, "cmdline")))
		fprintf(out, "command: %s\n", v);
	if ((v = meta(r, "pid"))) {
		fprintf(out, "pid: %s", v);
		/* the container's own number: the last of the chain */
		if ((v = meta(r, "nspid")) && strrchr(v, ' '))
			fprintf(out, " (container pid %s)", strrchr(v, ' ') + 1);
		fprintf(out, "\n");
	}
	if ((v = meta(r, "python.path"))) {
		fprintf(out, "interpreter: %s", v);
		if ((v = meta(r, "python.version")))
			fprintf(out, " (Python %s)", v);
		fprintf(out, "\n");
	} else if ((v = meta(r, "python")) && !strcmp(v, "none")) {
		fprintf(out, "interpreter: none (no Python in the process)\n");
	}
	fprintf(out, "duration: %.3f s\n",
		st->first_ts <= st->last_ts ? (st->last_ts - st->first_ts) / 1e9 : 0.0);
	profile__totals(run->all, &ncalls, &pcalls, &tt_ns);
	fprintf(out, "%s: %" PRIu64,
		o->prof.kind == PTG_REC_OP_ENTER ? "op, CUDA call and annotation calls"
						 : "function calls",
		ncalls);
	if (o->prof.by_tid)
		fprintf(out, " in thread %u\n", o->prof.tid);
	else if (o->prof.by_pid)
		fprintf(out, " in process %u\n", o->prof.pid);
	else
		fprintf(out, " in %u thread%s\n", st->threads, st->threads == 1 ? "" : "s");
	print_losses(out, r);
	fprintf(out, "\n");
}

/* torch.autograd.profiler_util._format_time(), from ns */
static void format_time(char *buf, size_t len, uint64_t ns)
{
	double us = ns / 1e3;

	if (us >= 1e6)
		snprintf(buf, len, "%.3fs", us / 1e6);
	else if (us >= 1e3)
		snprintf(buf, len, "%.3fms", us / 1e3);
	else
		snprintf(buf, len, "%.3fus", us);
}

static void format_share(char *buf, size_t len, uint64_t ns, uint64_t total_ns)
{
	if (!total_ns)
		snprintf(buf, len, "NaN");
	else
		snprintf(buf, len, "%.2f%%", ns * 100.0 / total_ns);
}

#define OPS_COL	     12
#define OPS_MAX_NAME 55 /* key_averages().table()'s max_name_column_width */

static const char *sym_name(const struct trace_reader *r, uint32_t sym)
{
	const struct ptg_sym *s = trace_reader__sym(r, sym);

	return s ? s->name : "?";
}

#define OPS_MAX_SRC   75 /* max_src_column_width */
#define OPS_MAX_STACK 5	 /* MAX_STACK_ENTRY: stack lines shown per row */

/* The last column of a grouped table: each row's module path or Python frames. */
struct ops_group {
	enum profile_group kind;
	const char *title; /* "Module Hierarchy", "Source Location"; NULL when not grouped */
	int width;
	const struct profile_run *run;
	const struct trace_reader *r;
};

/* Line i of a group's column ("file(line): function" for a stack); false past the last. */
static bool group_entry(const struct ops_group *g, uint32_t group, unsigned int i, char *buf,
			size_t len)
{
	const struct profile_run *run = g->run;
	const struct ptg_sym *s;
	uint32_t sym;

	if (g->kind == PROFILE_GROUP_MODULE) {
		snprintf(buf, len, "%s", i || !group ? "" : sym_name(g->r, group));
		return i == 0;
	}
	if (g->kind != PROFILE_GROUP_STACK || !group || i >= run->stack_n || i >= OPS_MAX_STACK)
		return false;
	sym = run->stacks[(size_t)(group - 1) * run->stack_n + i];
	s = sym ? trace_reader__sym(g->r, sym) : NULL;
	if (!s)
		return false;
	/* torch prints the line of the call; a trace knows the function's first line */
	snprintf(buf, len, "%s(%u): %s", s->file, s->line, s->name);
	return true;
}

/* torch's trim_path(): the end of a long entry, "..." in front */
static const char *trim_entry(char *buf, int width)
{
	int len = (int)strlen(buf);

	if (len <= width)
		return buf;
	buf += len - width;
	if (width > 3)
		memcpy(buf, "...", 3);
	return buf;
}

static void ops_separator(FILE *out, int name_w, const struct ops_group *g)
{
	for (int c = 0; c < (g->title ? 8 : 7); c++) {
		for (int i = 0; i < (c == 7 ? g->width : c ? OPS_COL : name_w); i++)
			fputc('-', out);
		fputs("  ", out);
	}
	fputc('\n', out);
}

/* One line: seven right-aligned columns, then the group's left-aligned one. */
static void ops_line(FILE *out, int name_w, const char *const col[7], const struct ops_group *g,
		     const char *group)
{
	fprintf(out, "%*s  ", name_w, col[0]);
	for (int i = 1; i < 7; i++)
		fprintf(out, "%*s  ", OPS_COL, col[i]);
	if (g->title)
		fprintf(out, "%-*s  ", g->width, group);
	fputc('\n', out);
}

static void ops_title(FILE *out, int name_w, const struct ops_group *g)
{
	static const char *const titles[7] = {"Name",	     "Self CPU %", "Self CPU",
					      "CPU total %", "CPU total",  "CPU time avg",
					      "# of Calls"};

	ops_separator(out, name_w, g);
	ops_line(out, name_w, titles, g, g->title);
	ops_separator(out, name_w, g);
}

/* The rest of a row's stack, one entry a line, then an empty line. */
static void ops_group_lines(FILE *out, int name_w, const struct ops_group *g, uint32_t group)
{
	static const char *const empty[7] = {"", "", "", "", "", "", ""};
	char entry[1024];

	/* one line per row for module paths; a stack's block ends with an empty line */
	if (g->kind != PROFILE_GROUP_STACK)
		return;
	for (unsigned int i = 1; group_entry(g, group, i, entry, sizeof(entry)); i++)
		ops_line(out, name_w, empty, g, trim_entry(entry, g->width));
	ops_line(out, name_w, empty, g, "");
}

static void ops_row(FILE *out, const struct profile_func *f, const char *name, int name_w,
		    uint64_t total_self, const struct ops_group *g)
{
	char self_pct[32], self_t[32], tot_pct[32], tot_t[32], avg[32], shown[OPS_MAX_NAME + 1];
	char calls[32], entry[1024] = "";
	const char *col[7];

	/* names that do not fit are cut to max - 3 characters plus "..." */
	if (strlen(name) >= OPS_MAX_NAME - 3) {
		snprintf(shown, sizeof(shown), "%.*s...", OPS_MAX_NAME - 3, name);
		name = shown;
	}
	format_share(self_pct, sizeof(self_pct), f->tt_ns, total_self);
	format_time(self_t, sizeof(self_t), f->tt_ns);
	format_share(tot_pct, sizeof(tot_pct), f->ct_ns, total_self);
	format_time(tot_t, sizeof(tot_t), f->ct_ns);
	format_time(avg, sizeof(avg), f->ncalls ? f->ct_ns / f->ncalls : 0);
	snprintf(calls, sizeof(calls), "%" PRIu64, f->ncalls);
	col[0] = name, col[1] = self_pct, col[2] = self_t, col[3] = tot_pct, col[4] = tot_t;
	col[5] = avg, col[6] = calls;
	group_entry(g, f->group, 0, entry, sizeof(entry));
	ops_line(out, name_w, col, g, trim_entry(entry, g->width));
	ops_group_lines(out, name_w, g, f->group);
}

/* Width of the group column: its longest entry + 4, at most OPS_MAX_SRC. */
static int group_width(const struct ops_group *g, const struct profile_func *funcs, size_t n)
{
	char entry[1024];
	int w = (int)strlen(g->title) + 4;

	for (size_t i = 0; i < n; i++) {
		for (unsigned int k = 0; group_entry(g, funcs[i].group, k, entry, sizeof(entry));
		     k++)
			w = (int)strlen(entry) + 4 > w ? (int)strlen(entry) + 4 : w;
	}
	return w < OPS_MAX_SRC ? w : OPS_MAX_SRC;
}

struct ops_sort {
	const struct trace_reader *r;
	enum pstats_sort sort;
};

static int cmp_ops(const void *pa, const void *pb, void *arg)
{
	const struct profile_func *a = *(const struct profile_func *const *)pa;
	const struct profile_func *b = *(const struct profile_func *const *)pb;
	const struct ops_sort *c = arg;
	uint64_t x = 0, y = 0;
	int d;

	switch (c->sort) {
	case PSTATS_SORT_NAME:
		d = strcmp(sym_name(c->r, a->sym), sym_name(c->r, b->sym));
		if (d)
			return d;
		break;
	case PSTATS_SORT_CUMTIME:
		x = a->ct_ns, y = b->ct_ns;
		break;
	case PSTATS_SORT_TOTTIME:
		x = a->tt_ns, y = b->tt_ns;
		break;
	case PSTATS_SORT_NCALLS:
		x = a->ncalls, y = b->ncalls;
		break;
	}
	if (x != y)
		return x < y ? 1 : -1;
	return (a > b) - (a < b);
}

/* key_averages().table(): one row per op (and group), Self CPU total under it. */
static int print_ops(FILE *out, const struct profile *p, const struct trace_reader *r,
		     const struct pstats_list_opts *o, const struct ops_group *g)
{
	struct ops_sort c = {.r = r, .sort = o->sort};
	const struct profile_func *funcs, **rows;
	uint64_t ncalls, pcalls, total_self;
	size_t n, shown;
	int name_w = 0;
	char total[32];

	funcs = profile__funcs(p, &n);
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows) {
		pr_err("report: out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		rows[i] = &funcs[i];
	qsort_r(rows, n, sizeof(*rows), cmp_ops, &c);
	shown = o->limit >= 0 && (size_t)o->limit < n ? (size_t)o->limit : n;
	for (size_t i = 0; i < n; i++) {
		int len = (int)strlen(sym_name(r, funcs[i].sym)) + 4;

		name_w = len > name_w ? len : name_w;
	}
	name_w = name_w < OPS_MAX_NAME ? name_w : OPS_MAX_NAME;
	profile__totals(p, &ncalls, &pcalls, &total_self);
	ops_title(out, name_w, g);
	for (size_t i = 0; i < shown; i++)
		ops_row(out, rows[i], sym_name(r, rows[i]->sym), name_w, total_self, g);
	ops_separator(out, name_w, g);
	format_time(total, sizeof(total), total_self);
	fprintf(out, "Self CPU time total: %s\n\n", total);
	free(rows);
	return 0;
}

static int print_profile(FILE *out, const struct report_opts *o, const struct profile_run *run,
			 const struct profile *p, const struct trace_reader *r)
{
	struct ops_group g = {.kind = o->prof.group, .run = run, .r = r};
	const struct profile_func *funcs;
	size_t n;
	int err;

	if (g.kind == PROFILE_GROUP_MODULE)
		g.title = "Module Hierarchy";
	else if (g.kind == PROFILE_GROUP_STACK)
		g.title = "Source Location";
	if (g.title) {
		funcs = profile__funcs(p, &n);
		g.width = group_width(&g, funcs, n);
	}
	if (o->prof.kind == PTG_REC_OP_ENTER)
		err = print_ops(out, p, r, &o->list, &g);
	else
		err = pstats__print_stats(out, p, r, &o->list);
	if (!err && o->callers)
		err = pstats__print_callers(out, p, r, &o->list);
	if (!err && o->callees)
		err = pstats__print_callees(out, p, r, &o->list);
	return err;
}

static int print_threads(FILE *out, const struct report_opts *o, const struct profile_run *run,
			 const struct trace_reader *r)
{
	int err = 0;

	for (size_t i = 0; i < run->nthreads && !err; i++) {
		const struct profile_thread *t = &run->threads[i];
		size_t n;

		if (!t->prof || !profile__funcs(t->prof, &n) || !n)
			continue;
		fprintf(out, "thread %u (pid %u", t->tid, t->pid);
		if (t->ns_tid)
			fprintf(out, "; container tid %u, pid %u", t->ns_tid, t->ns_pid);
		fprintf(out, ")");
		if (t->name_sym)
			fprintf(out, " \"%s\"", sym_name(r, t->name_sym));
		fprintf(out, "\n\n");
		err = print_profile(out, o, run, t->prof, r);
	}
	return err;
}

static int report_run(const struct report_opts *o, struct trace_reader *r)
{
	struct profile_run *run = NULL;
	size_t nfuncs;
	int err;

	err = profile_run__collect(r, &o->prof, &run);
	if (err) {
		if (err != -ENOMEM)
			pr_err("report: %s: %s", o->path, trace_reader__error(r));
		return err;
	}
	print_header(stdout, o, r, run);
	/* off-CPU time per thread and CUDA call counts, when the trace has them */
	err = offcpu_report(stdout, r) ?: cudacalls_report(stdout, r);
	profile__funcs(run->all, &nfuncs);
	if (err)
		pr_err("report: %s: %s", o->path,
		       err == -ENOMEM ? strerror(ENOMEM) : trace_reader__error(r));
	else if (!nfuncs && o->prof.kind == PTG_REC_OP_ENTER)
		printf("no PyTorch dispatcher ops in this trace (the process had no libtorch "
		       "mapped)\n");
	else if (!nfuncs)
		printf("no Python function calls in this trace%s\n",
		       o->prof.by_tid	? " for this thread"
		       : o->prof.by_pid ? " for this process"
					: "");
	else if (o->prof.per_thread)
		err = print_threads(stdout, o, run, r);
	else
		err = print_profile(stdout, o, run, run->all, r);
	profile_run__free(run);
	return err;
}

/* Several traces: the cross-rank view, then each rank's own report. */
static int report_ranks(struct report_opts *o)
{
	struct ranks_report *rep = NULL;
	struct trace_reader *r = NULL;
	struct idle_opts io;
	char **paths = NULL;
	size_t n = 0;
	int err;

	idle_opts__defaults(&io);
	if (o->list.limit >= 0)
		io.top_n = o->list.limit < UINT_MAX ? (unsigned int)o->list.limit : UINT_MAX;
	err = ranks_paths(WHO, o->paths, o->npaths, &paths, &n)
		  ?: ranks_analyze(WHO, paths, n, &io, &rep);
	if (err)
		goto cleanup;
	ranks_print_text(stdout, rep, &io);
	for (size_t i = 0; i < rep->nranks && !err; i++) {
		o->path = rep->ranks[i].path;
		printf("\n=== rank %u: %s ===\n\n", rep->ranks[i].rank, o->path);
		err = trace_open(WHO, o->path, &r);
		if (!err)
			err = report_run(o, r);
		trace_reader__close(r);
		r = NULL;
	}
cleanup:
	ranks_report__free(rep);
	ranks_paths_free(paths, n);
	return err;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = {};
	struct trace_reader *r = NULL;
	int err;

	err = report_parse(argc, argv, &o);
	if (err)
		return err > 0 ? 0 : 2;
	if (ranks_wanted(o.paths, o.npaths))
		err = report_ranks(&o);
	else if (trace_open("ptrace-gpu report", o.path, &r))
		return 1;
	else
		err = report_run(&o, r);
	trace_reader__close(r);
	if (fflush(stdout) && !err) {
		pr_err("report: writing output: %s", strerror(errno));
		err = -EIO;
	}
	return err ? 1 : 0;
}
