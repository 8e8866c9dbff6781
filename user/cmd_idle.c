// SPDX-License-Identifier: MIT
/* ptrace-gpu idle: why the GPU is idle, as text tables or JSON. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"
#include "commands.h"
#include "idle.h"
#include "numarg.h"
#include "ranks_out.h"
#include "report_fmt.h"
#include "utf8.h"
#include "trace_open.h"

struct idle_out {
	FILE *f;
	const struct idle_report *rep;
	const struct trace_reader *r;
	const struct idle_opts *o;
	const char *path;
};

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

static const char *sym_name(const struct trace_reader *r, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(r, id);

	return s ? s->name : "?";
}

/* The Python location "file:line(function)" of a sym, or the seed's phrase. */
static const char *py_location(char *buf, size_t len, const struct trace_reader *r, uint32_t id)
{
	const struct ptg_sym *s = id ? trace_reader__sym(r, id) : NULL;

	if (!s)
		return "No source code location found";
	if (s->file && s->file[0])
		snprintf(buf, len, "%s:%u(%s)", s->file, s->line, s->name);
	else
		snprintf(buf, len, "%s", s->name);
	return buf;
}

static const char *kind_name(uint16_t kind)
{
	switch (kind) {
	case PTG_REC_PY_ENTER:
		return "python";
	case PTG_REC_OP_ENTER:
		return "op";
	case PTG_REC_CUDA_CALL:
		return "cuda";
	default:
		return "?";
	}
}

static void text_devices(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	char a[32], b[32], c[32], d[32];
	size_t i;

	fprintf(out->f, "\nGPU time breakdown (HTA temporal breakdown)\n");
	fprintf(out->f, "  %-6s %12s %12s %7s %12s %7s %12s %7s %8s %7s %7s\n", "device", "span",
		"idle", "%", "compute", "%", "non-compute", "%", "kernels", "memcpy", "memset");
	for (i = 0; i < rep->ndevices; i++) {
		const struct idle_device *v = &rep->devices[i];
		uint64_t span = v->last - v->first;

		fprintf(out->f,
			"  %-6u %12s %12s %6.2f%% %12s %6.2f%% %12s %6.2f%% %8" PRIu64 " %7" PRIu64
			" %7" PRIu64 "\n",
			v->device, fmt_ns(a, sizeof(a), span), fmt_ns(b, sizeof(b), v->idle_ns),
			pct(v->idle_ns, span), fmt_ns(c, sizeof(c), v->compute_ns),
			pct(v->compute_ns, span), fmt_ns(d, sizeof(d), v->non_compute_ns),
			pct(v->non_compute_ns, span), v->kernels, v->memcpys, v->memsets);
	}
}

static void text_gaps(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	uint64_t span = rep->gpu_last - rep->gpu_first;
	char a[32], b[32];
	size_t i;

	fprintf(out->f, "\nGPU idle intervals\n");
	fprintf(out->f, "  no GPU busy for %s of %s (%.2f%%); %" PRIu64 " gaps between GPU ops\n",
		fmt_ns(a, sizeof(a), rep->gpu_idle_ns), fmt_ns(b, sizeof(b), span),
		pct(rep->gpu_idle_ns, span), rep->gap_count);
	if (!rep->ngaps)
		return;
	fprintf(out->f, "  %-6s %14s %12s   (longest %zu, start from trace start)\n", "device",
		"start", "duration", rep->ngaps);
	for (i = 0; i < rep->ngaps; i++) {
		const struct idle_gap *g = &rep->gaps[i];

		fprintf(out->f, "  %-6u %14s %12s\n", g->device,
			fmt_ns(a, sizeof(a), g->start - rep->first_ts),
			fmt_ns(b, sizeof(b), g->end - g->start));
	}
}

static void text_streams(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	char a[32], b[32], c[32], d[32];
	size_t i;

	fprintf(out->f, "\nIdle time per stream (HTA: kernel wait = gap under %.1f µs)\n",
		out->o->kernel_wait_ns / 1e3);
	fprintf(out->f, "  %-6s %-7s %8s %12s %12s %7s %12s %7s %12s %7s\n", "device", "stream",
		"ops", "idle", "host wait", "%", "kernel wait", "%", "other", "%");
	for (i = 0; i < rep->nstreams; i++) {
		const struct idle_stream *s = &rep->streams[i];
		uint64_t idle = s->host_wait_ns + s->kernel_wait_ns + s->other_wait_ns;

		fprintf(out->f,
			"  %-6u %-7u %8" PRIu64 " %12s %12s %6.2f%% %12s %6.2f%% %12s %6.2f%%\n",
			s->device, s->stream, s->ops, fmt_ns(a, sizeof(a), idle),
			fmt_ns(b, sizeof(b), s->host_wait_ns), pct(s->host_wait_ns, idle),
			fmt_ns(c, sizeof(c), s->kernel_wait_ns), pct(s->kernel_wait_ns, idle),
			fmt_ns(d, sizeof(d), s->other_wait_ns), pct(s->other_wait_ns, idle));
	}
}

/* The timeline as one line: the maximum depth of each 1/50 of the span, scaled to 8 levels. */
static void text_sparkline(const struct idle_out *out)
{
	static const char *const bars[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	const struct idle_report *rep = out->rep;
	size_t i;

	if (!rep->qd_max)
		return;
	fprintf(out->f, "\n  timeline of max depth (0..%u): |", rep->qd_max);
	for (i = 0; i < IDLE_TIMELINE_BUCKETS; i++) {
		uint64_t m = rep->qd_timeline_max[i];

		fputs(bars[m ? 1 + (m * 7 + rep->qd_max - 1) / rep->qd_max : 0], out->f);
	}
	fputs("|", out->f);
}

static void text_queue(const struct idle_out *out)
{
	static const char *const labels[IDLE_QD_BUCKETS] = {"0",    "1",     "2-3",   "4-7",
							    "8-15", "16-31", "32-63", "64+"};
	const struct idle_report *rep = out->rep;
	uint64_t span = rep->qd_last - rep->qd_first, trace = rep->last_ts - rep->first_ts;
	char a[32], b[32];
	size_t i;

	fprintf(out->f, "\nLaunch queue depth (kernels launched and not yet started)\n");
	fprintf(out->f, "  max %u, time-weighted mean %.2f over %s\n  time at depth:", rep->qd_max,
		rep->qd_mean, fmt_ns(a, sizeof(a), span));
	for (i = 0; i < IDLE_QD_BUCKETS; i++)
		fprintf(out->f, "  %s: %.1f%%", labels[i], pct(rep->qd_hist_ns[i], span));
	text_sparkline(out);
	fprintf(out->f, "\n  %-6s %-7s %10s %10s %14s %8s   (HTA queue length; full = %u)\n",
		"device", "stream", "max", "mean", "time full", "%", out->o->max_queue_len);
	for (i = 0; i < rep->nstreams; i++) {
		const struct idle_stream *s = &rep->streams[i];

		fprintf(out->f, "  %-6u %-7u %10u %10.2f %14s %7.2f%%\n", s->device, s->stream,
			s->max_queue, s->mean_queue, fmt_ns(b, sizeof(b), s->full_queue_ns),
			pct(s->full_queue_ns, trace));
	}
}

static void text_delay(const struct idle_out *out)
{
	const struct idle_delay *d = &out->rep->launch_delay;
	char a[32], b[32], c[32], e[32];

	fprintf(out->f, "\nKernel launch delay (GPU start - launching call start)\n");
	if (!d->count) {
		fprintf(out->f, "  no kernel linked to its launching call\n");
		return;
	}
	fprintf(out->f, "  %8s %12s %12s %12s %12s\n", "kernels", "mean", "p50", "p95", "max");
	fprintf(out->f, "  %8" PRIu64 " %12s %12s %12s %12s\n", d->count,
		fmt_ns(a, sizeof(a), d->mean_ns), fmt_ns(b, sizeof(b), d->p50_ns),
		fmt_ns(c, sizeof(c), d->p95_ns), fmt_ns(e, sizeof(e), d->max_ns));
}

static void text_names(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	char a[32], b[32];
	size_t i;

	fprintf(out->f, "\nCPU self time (top %zu of %" PRIu64 " names, %" PRIu64 " events)\n",
		rep->nnames, rep->nnames_total, rep->cpu_events);
	fprintf(out->f, "  %12s %12s %9s %7s %7s %-6s %s\n", "self", "total", "count", "idle%",
		"avg qd", "kind", "name");
	for (i = 0; i < rep->nnames; i++) {
		const struct idle_name *n = &rep->names[i];

		fprintf(out->f, "  %12s %12s %9" PRIu64 " %6.2f%% %7.2f %-6s %s\n",
			fmt_ns(a, sizeof(a), n->self_ns), fmt_ns(b, sizeof(b), n->total_ns),
			n->count, pct(n->idle_ns, n->total_ns),
			n->count ? (double)n->qd_sum / n->count : 0, kind_name(n->kind),
			sym_name(out->r, n->sym));
	}
}

static void text_ranked(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	char a[32], loc[1024];
	size_t i;

	fprintf(out->f,
		"\nOptimizable events (torch.profiler heuristic: %" PRIu64
		" falling queue phases, %" PRIu64 " events in them)\n",
		rep->decreases, rep->candidates);
	if (!rep->nranked) {
		fprintf(out->f, "  No events to optimize\n");
		return;
	}
	fprintf(out->f, "  %7s %7s %12s %5s %-6s %s\n", "score", "idle%", "self", "qd", "kind",
		"event  @ source location");
	for (i = 0; i < rep->nranked; i++) {
		const struct idle_event *e = &rep->ranked[i];

		fprintf(out->f, "  %7.3f %6.2f%% %12s %5u %-6s %s  @ %s\n", e->score,
			pct(e->idle_ns, e->dur), fmt_ns(a, sizeof(a), e->self_ns), e->queue_depth,
			kind_name(e->kind), sym_name(out->r, e->sym),
			py_location(loc, sizeof(loc), out->r, e->pysym));
	}
}

static void print_text(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	char a[32];

	fprintf(out->f, "%s: %s, %" PRIu64 " CPU events, %" PRIu64 " GPU ops\n", out->path,
		fmt_ns(a, sizeof(a), rep->last_ts - rep->first_ts), rep->cpu_events, rep->gpu_ops);
	if (!rep->gpu_ops) {
		fprintf(out->f, "no GPU activity in this trace\n");
	} else {
		text_devices(out);
		text_gaps(out);
		text_streams(out);
		text_queue(out);
		text_delay(out);
	}
	text_names(out);
	text_ranked(out);
}

static json_object *json_devices(const struct idle_report *rep)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < rep->ndevices; i++) {
		const struct idle_device *v = &rep->devices[i];
		uint64_t span = v->last - v->first;
		json_object *o = json_object_new_object();

		jset_u64(o, "device", v->device);
		jset_u64(o, "span_ns", span);
		jset_u64(o, "idle_ns", v->idle_ns);
		jset(o, "idle_pct", jdouble(pct(v->idle_ns, span)));
		jset_u64(o, "compute_ns", v->compute_ns);
		jset(o, "compute_pct", jdouble(pct(v->compute_ns, span)));
		jset_u64(o, "non_compute_ns", v->non_compute_ns);
		jset(o, "non_compute_pct", jdouble(pct(v->non_compute_ns, span)));
		jset_u64(o, "kernels", v->kernels);
		jset_u64(o, "memcpys", v->memcpys);
		jset_u64(o, "memsets", v->memsets);
		jset_u64(o, "kernel_ns", v->kernel_ns);
		jset_u64(o, "idle_intervals", v->gaps);
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *json_gpu(const struct idle_report *rep)
{
	json_object *o = json_object_new_object(), *gaps = json_object_new_array();
	uint64_t span = rep->gpu_last - rep->gpu_first;
	size_t i;

	jset_u64(o, "first_ns", rep->gpu_first);
	jset_u64(o, "last_ns", rep->gpu_last);
	jset_u64(o, "span_ns", span);
	jset_u64(o, "idle_ns", rep->gpu_idle_ns);
	jset(o, "idle_pct", jdouble(pct(rep->gpu_idle_ns, span)));
	jset_u64(o, "idle_intervals", rep->gap_count);
	for (i = 0; i < rep->ngaps; i++) {
		json_object *g = json_object_new_object();

		jset_u64(g, "device", rep->gaps[i].device);
		jset_u64(g, "start_ns", rep->gaps[i].start);
		jset_u64(g, "dur_ns", rep->gaps[i].end - rep->gaps[i].start);
		json_object_array_add(gaps, g);
	}
	jset(o, "longest_idle_intervals", gaps);
	return o;
}

static json_object *json_streams(const struct idle_report *rep)
{
	json_object *a = json_object_new_array();
	uint64_t trace = rep->last_ts - rep->first_ts;
	size_t i;

	for (i = 0; i < rep->nstreams; i++) {
		const struct idle_stream *s = &rep->streams[i];
		json_object *o = json_object_new_object();

		jset_u64(o, "device", s->device);
		jset_u64(o, "stream", s->stream);
		jset_u64(o, "ops", s->ops);
		jset_u64(o, "idle_ns", s->host_wait_ns + s->kernel_wait_ns + s->other_wait_ns);
		jset_u64(o, "host_wait_ns", s->host_wait_ns);
		jset_u64(o, "kernel_wait_ns", s->kernel_wait_ns);
		jset_u64(o, "other_wait_ns", s->other_wait_ns);
		jset_u64(o, "max_queue_length", s->max_queue);
		jset(o, "mean_queue_length", jdouble(s->mean_queue));
		jset_u64(o, "full_queue_ns", s->full_queue_ns);
		jset(o, "full_queue_pct", jdouble(pct(s->full_queue_ns, trace)));
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *json_queue(const struct idle_report *rep)
{
	json_object *o = json_object_new_object(), *h = json_object_new_array();
	json_object *t = json_object_new_array();
	uint64_t span = rep->qd_last - rep->qd_first;
	size_t i;

	jset_u64(o, "max", rep->qd_max);
	jset(o, "mean", jdouble(rep->qd_mean));
	jset_u64(o, "first_ns", rep->qd_first);
	jset_u64(o, "last_ns", rep->qd_last);
	for (i = 0; i < IDLE_QD_BUCKETS; i++) {
		json_object *b = json_object_new_object();

		jset_u64(b, "min_depth", i ? 1u << (i - 1) : 0);
		jset_u64(b, "ns", rep->qd_hist_ns[i]);
		json_object_array_add(h, b);
	}
	jset(o, "histogram", h);
	for (i = 0; i < IDLE_TIMELINE_BUCKETS && span; i++) {
		json_object *b = json_object_new_object();

		jset_u64(b, "start_ns", rep->qd_first + span * i / IDLE_TIMELINE_BUCKETS);
		jset_u64(b, "max", rep->qd_timeline_max[i]);
		jset(b, "mean", jdouble(rep->qd_timeline_mean[i]));
		json_object_array_add(t, b);
	}
	jset(o, "timeline", t);
	return o;
}

static json_object *json_delay(const struct idle_delay *d)
{
	json_object *o = json_object_new_object();

	jset_u64(o, "count", d->count);
	jset(o, "mean_ns", jdouble(d->mean_ns));
	jset_u64(o, "p50_ns", d->p50_ns);
	jset_u64(o, "p95_ns", d->p95_ns);
	jset_u64(o, "max_ns", d->max_ns);
	return o;
}

/*
 * Names and paths come from the trace: json-c would pass invalid UTF-8
 * through, and no JSON reader takes that.
 */
static json_object *jstr(const char *s)
{
	char *valid = utf8_valid_dup(s);
	json_object *o = valid ? json_object_new_string(valid) : NULL;

	free(valid);
	return o;
}

static json_object *json_names(const struct idle_out *out)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < out->rep->nnames; i++) {
		const struct idle_name *n = &out->rep->names[i];
		json_object *o = json_object_new_object();

		jset(o, "name", jstr(sym_name(out->r, n->sym)));
		jset(o, "kind", json_object_new_string(kind_name(n->kind)));
		jset_u64(o, "count", n->count);
		jset_u64(o, "total_ns", n->total_ns);
		jset_u64(o, "self_ns", n->self_ns);
		jset_u64(o, "idle_ns", n->idle_ns);
		jset(o, "mean_queue_depth", jdouble(n->count ? (double)n->qd_sum / n->count : 0));
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *json_ranked(const struct idle_out *out)
{
	json_object *o = json_object_new_object(), *a = json_object_new_array();
	char loc[1024];
	size_t i;

	jset_u64(o, "falling_phases", out->rep->decreases);
	jset_u64(o, "candidates", out->rep->candidates);
	for (i = 0; i < out->rep->nranked; i++) {
		const struct idle_event *e = &out->rep->ranked[i];
		json_object *v = json_object_new_object();

		jset(v, "name", jstr(sym_name(out->r, e->sym)));
		jset(v, "kind", json_object_new_string(kind_name(e->kind)));
		jset(v, "location", jstr(py_location(loc, sizeof(loc), out->r, e->pysym)));
		jset_u64(v, "start_ns", e->start);
		jset_u64(v, "dur_ns", e->dur);
		jset_u64(v, "self_ns", e->self_ns);
		jset_u64(v, "idle_ns", e->idle_ns);
		jset(v, "idle_pct", jdouble(pct(e->idle_ns, e->dur)));
		jset_u64(v, "queue_depth", e->queue_depth);
		jset(v, "score", jdouble(e->score));
		json_object_array_add(a, v);
	}
	jset(o, "events", a);
	return o;
}

static int print_json(const struct idle_out *out)
{
	const struct idle_report *rep = out->rep;
	json_object *root = json_object_new_object(), *t = json_object_new_object();
	json_object *opts = json_object_new_object();

	jset(t, "file", jstr(out->path));
	jset_u64(t, "first_ns", rep->first_ts);
	jset_u64(t, "last_ns", rep->last_ts);
	jset_u64(t, "cpu_events", rep->cpu_events);
	jset_u64(t, "gpu_ops", rep->gpu_ops);
	jset(root, "trace", t);
	jset_u64(opts, "top_n", out->o->top_n);
	jset_u64(opts, "kernel_wait_ns", out->o->kernel_wait_ns);
	jset_u64(opts, "max_queue_length", out->o->max_queue_len);
	jset(root, "options", opts);
	jset(root, "gpu", rep->gpu_ops ? json_gpu(rep) : NULL);
	jset(root, "devices", json_devices(rep));
	jset(root, "streams", json_streams(rep));
	jset(root, "queue_depth", json_queue(rep));
	jset(root, "launch_delay", json_delay(&rep->launch_delay));
	jset(root, "self_time", json_names(out));
	jset(root, "optimizable_events", json_ranked(out));
	fprintf(out->f, "%s\n",
		json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
							 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(root);
	return ferror(out->f) ? -EIO : 0;
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
		fprintf(stderr, "ptrace-gpu idle: expected a trace FILE, several, or a directory "
				"(see ptrace-gpu idle --help)\n");
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
		fprintf(stderr, "%s: %s\n", WHO, strerror(ENOMEM));
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
		err = print_json(&out);
	else
		print_text(&out);
flush:
	if (fflush(stdout) && !err) {
		err = -errno;
		fprintf(stderr, "ptrace-gpu: idle: writing output: %s\n", strerror(-err));
	}
cleanup:
	idle_report__free(rep);
	trace_reader__close(r);
	return err ? 1 : 0;
}
