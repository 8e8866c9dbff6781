// SPDX-License-Identifier: MIT
/*
 * What the Chrome exporter writes besides the events of the records: the
 * metadata events that name processes and tracks (thread_name,
 * thread_sort_index, process_name of a thread in a container) and the
 * trace's top-level keys, an imported trace's own kept in their order, a
 * recorded one's in Kineto's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "chrome/chrome_export.h"
#include "trace/kineto_args.h"
#include "trace/trace_kineto.h"

/* Whether key (a track) is seen here for the first time; on no memory, the error is kept. */
static bool first_sight(struct chrome *c, uint64_t key)
{
	if (u64map__get(&c->tracks, key))
		return false;
	if (u64map__put(&c->tracks, key, 1)) {
		c->b.err = -ENOMEM;
		return false;
	}
	return true;
}

/* thread_name and thread_sort_index of track pid/track, once per track. */
static void name_track(struct chrome *c, uint32_t pid, uint32_t track, const char *name,
		       uint64_t sort, uint64_t ts)
{
	struct jargs a = {&c->b};

	if (!first_sight(c, u64map_key((uint64_t)pid << 32 | track)))
		return;
	chrome_ev_new(c, true);
	jb_lit(&c->b, "{\"ph\": \"M\", \"name\": \"thread_name\"");
	chrome_ev_where(c, pid, track, ts);
	jarg_str(&a, "name", name);
	chrome_ev_end(c, &a, NULL);
	a.open = false;
	chrome_ev_new(c, true);
	jb_lit(&c->b, "{\"ph\": \"M\", \"name\": \"thread_sort_index\"");
	chrome_ev_where(c, pid, track, ts);
	jarg_int(&a, "sort_index", (int64_t)sort);
	chrome_ev_end(c, &a, NULL);
}

/* A track of thread tid, sorted by tid. */
void chrome_name_track(struct chrome *c, uint32_t pid, uint32_t tid, uint32_t track,
		       const char *what, uint64_t ts)
{
	char name[64];

	snprintf(name, sizeof(name), "thread %u %s", tid, what);
	name_track(c, pid, track, name, tid, ts);
}

/* A GPU stream's track, sorted by its track number: below the process's threads, as
 * Kineto's GPU rows come after its CPU ones. */
void chrome_name_gpu_track(struct chrome *c, uint32_t pid, uint32_t track, uint32_t device,
			   uint64_t stream, uint64_t ts)
{
	char name[64];

	snprintf(name, sizeof(name), "GPU %u stream %llu", device, (unsigned long long)stream);
	name_track(c, pid, track, name, track, ts);
}

/*
 * A recorded thread in a container (aux[2], aux[3]: its pid and tid there):
 * its process is named "pid 12345 (container pid 1)" once, as Perfetto shows
 * process_name beside the pid, and the thread's name says its container tid.
 */
static void name_ns_process(struct chrome *c, const struct ptg_record *rec)
{
	uint64_t key = u64map_key((uint64_t)rec->pid << 32 | PROCESS_TRACK);
	struct jargs a = {&c->b};
	char name[64];

	if (!first_sight(c, key))
		return;
	snprintf(name, sizeof(name), "pid %u (container pid %u)", rec->pid, (uint32_t)rec->aux[2]);
	chrome_ev_new(c, true);
	jb_lit(&c->b, "{\"ph\": \"M\", \"name\": \"process_name\"");
	chrome_ev_where(c, rec->pid, 0, rec->ts);
	jarg_str(&a, "name", name);
	chrome_ev_end(c, &a, NULL);
}

void chrome_write_thread(struct chrome *c, const struct ptg_record *rec)
{
	int64_t m = rec->aux[0] >= 0 && rec->aux[0] < KINETO_M_NR ? rec->aux[0] : 0;
	bool ns = !c->kineto && m == KINETO_M_THREAD_NAME && rec->aux[3] > 0;
	struct jargs a = {&c->b};
	char name[PTG_NAME_IN_NS_MAX];

	if (ns) {
		name_ns_process(c, rec);
		snprintf(name, sizeof(name), "%s (container tid %u)", chrome_sym_name(c, rec->sym),
			 (uint32_t)rec->aux[3]);
	}
	chrome_ev_new(c, true);
	jb_lit(&c->b, "{\"ph\": \"M\", \"name\": ");
	jb_json(&c->b, kineto_meta_names[m]);
	chrome_ev_where(c, rec->pid, rec->tid, rec->ts);
	if (m == KINETO_M_PROCESS_SORT_INDEX || m == KINETO_M_THREAD_SORT_INDEX)
		jarg_int(&a, "sort_index", rec->aux[1]);
	else
		jarg_str(&a, m == KINETO_M_PROCESS_LABELS ? "labels" : "name",
			 ns ? name : chrome_sym_name(c, rec->sym));
	chrome_ev_end(c, &a, c->args);
}

static bool is_kineto_key(const char *key)
{
	return !strncmp(key, KINETO_META_PREFIX, strlen(KINETO_META_PREFIX));
}

/* One top-level member on its own line, its value spaced as Kineto writes it. */
static void top_key(struct chrome *c, const char *key, const char *val)
{
	char *spaced = kineto_json_respace(val);
	char *valid = spaced ? utf8_valid_dup(spaced) : NULL;

	buf__puts(&c->b, c->nkeys++ ? ",\n  " : "\n  ");
	jb_json(&c->b, key);
	jb_lit(&c->b, ": ");
	/* any .ptg can hold any text there: what is no JSON is written as a string */
	if (valid)
		buf__puts(&c->b, valid);
	else
		jb_json_value(&c->b, val);
	free(spaced);
	free(valid);
}

/*
 * The imported trace's own top-level keys that came before its events (after
 * = false) or after them. import.events_at says how many came before; a trace
 * imported before that existed has them all before but displayTimeUnit.
 */
static void kineto_keys(struct chrome *c, bool after)
{
	const char *at = trace_reader__meta(c->r, "import.events_at"), *key, *val;
	size_t i, n = 0, nr_before = at ? strtoull(at, NULL, 10) : 0;
	bool is_after;

	/* such an older import also had these added, and keeps them */
	if (!at && !after && !trace_reader__meta(c->r, KINETO_META_PREFIX "schemaVersion"))
		top_key(c, "schemaVersion", "1");
	for (i = 0; trace_reader__meta_at(c->r, i, &key, &val); i++) {
		if (!is_kineto_key(key))
			continue;
		key += strlen(KINETO_META_PREFIX);
		is_after = at ? n++ >= nr_before : !strcmp(key, "displayTimeUnit");
		if (is_after == after)
			top_key(c, key, val);
	}
	if (!at && after && !trace_reader__meta(c->r, KINETO_META_PREFIX "displayTimeUnit"))
		top_key(c, "displayTimeUnit", "\"ms\"");
}

static bool meta_u64(const struct chrome *c, const char *key, uint64_t *v)
{
	const char *s = trace_reader__meta(c->r, key);
	char *end;

	if (!s || !*s)
		return false;
	*v = strtoull(s, &end, 10);
	return !*end;
}

/*
 * A recorded trace's keys in Kineto's order: what HTA and Perfetto look for.
 * Its ts are CLOCK_MONOTONIC, so the base that turns them into wall-clock
 * time is the two clocks' difference at the start.
 */
static void recorded_keys(struct chrome *c)
{
	uint64_t real, mono, rank, world;
	char buf[96];

	top_key(c, "schemaVersion", "1");
	top_key(c, "deviceProperties", "[]");
	/* only when record found the job's rank in the target's environment */
	if (meta_u64(c, "dist.rank", &rank) && meta_u64(c, "dist.world_size", &world)) {
		snprintf(buf, sizeof(buf), "{\"rank\": %" PRIu64 ", \"world_size\": %" PRIu64 "}",
			 rank, world);
		top_key(c, "distributedInfo", buf);
	}
	top_key(c, "displayTimeUnit", "\"ms\"");
	if (meta_u64(c, "start.realtime_ns", &real) && meta_u64(c, "start.monotonic_ns", &mono)) {
		snprintf(buf, sizeof(buf), "%" PRIu64, real - mono);
		top_key(c, "baseTimeNanoseconds", buf);
	}
}

void chrome_write_header(struct chrome *c)
{
	jb_lit(&c->b, "{");
	if (c->kineto)
		kineto_keys(c, false);
	else
		recorded_keys(c);
	buf__puts(&c->b, c->nkeys ? ",\n  \"traceEvents\": [" : "\n  \"traceEvents\": [");
}

void chrome_write_footer(struct chrome *c)
{
	jb_lit(&c->b, "\n  ]");
	c->nkeys = 1; /* the events' array came first */
	if (c->kineto) {
		kineto_keys(c, true);
	} else {
		jb_lit(&c->b, ",\n  \"traceName\": ");
		jb_json(&c->b, c->path);
	}
	jb_lit(&c->b, "\n}\n");
}
