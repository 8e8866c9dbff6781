// SPDX-License-Identifier: MIT
/* ptrace-gpu idle --json: one struct idle_report as one JSON object. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "base/utf8.h"
#include "output/idle_out.h"
#include "output/report_fmt.h"

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

		jset(o, "name", jstr(idle_sym_name(out->r, n->sym)));
		jset(o, "kind", json_object_new_string(idle_kind_name(n->kind)));
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

		jset(v, "name", jstr(idle_sym_name(out->r, e->sym)));
		jset(v, "kind", json_object_new_string(idle_kind_name(e->kind)));
		jset(v, "location", jstr(idle_py_location(loc, sizeof(loc), out->r, e->pysym)));
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

int idle_print_json(const struct idle_out *out)
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
