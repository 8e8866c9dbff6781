// SPDX-License-Identifier: MIT
/* The text tables of ptrace-gpu idle: one struct idle_report, rendered. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "output/idle_out.h"
#include "output/report_fmt.h"

const char *idle_sym_name(const struct trace_reader *r, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(r, id);

	return s ? s->name : "?";
}

/* The Python location "file:line(function)" of a sym, or the seed's phrase. */
const char *idle_py_location(char *buf, size_t len, const struct trace_reader *r, uint32_t id)
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

const char *idle_kind_name(uint16_t kind)
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
			n->count ? (double)n->qd_sum / n->count : 0, idle_kind_name(n->kind),
			idle_sym_name(out->r, n->sym));
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
			idle_kind_name(e->kind), idle_sym_name(out->r, e->sym),
			idle_py_location(loc, sizeof(loc), out->r, e->pysym));
	}
}

void idle_print_text(const struct idle_out *out)
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
