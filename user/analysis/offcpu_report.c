// SPDX-License-Identifier: MIT
/*
 * Off-CPU time by thread: the report of the PTG_REC_SCHED records that
 * user/sched/sched.c writes (docs/cuda-sched.md), read back through the trace
 * reader only, so that the report needs nothing of the capture side.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/offcpu_report.h"
#include "base/threads.h"

struct thread_off {
	uint32_t pid;
	uint32_t tid;
	uint32_t name;
	uint32_t ns_tid; /* in its container (THREAD aux[3]), 0 when none */
	uint64_t intervals;
	uint64_t ns[3]; /* by reason: [0] unknown, PTG_SCHED_PREEMPTED, PTG_SCHED_BLOCKED */
	uint64_t runq_ns;
};

struct off_totals {
	struct threads threads; /* of struct thread_off, printed in order of first record */
};

static struct thread_off *thread_get(struct off_totals *o, uint32_t pid, uint32_t tid)
{
	bool added;
	struct thread_off *t = threads__get(&o->threads, pid, tid, &added);

	if (t && added) {
		t->pid = pid;
		t->tid = tid;
	}
	return t;
}

static int totals_add(struct off_totals *o, const struct ptg_record *rec)
{
	struct thread_off *t;
	int64_t reason;

	if (rec->kind != PTG_REC_SCHED && rec->kind != PTG_REC_THREAD)
		return 0;
	t = thread_get(o, rec->pid, rec->tid);
	if (!t)
		return -ENOMEM;
	if (rec->kind == PTG_REC_THREAD) {
		t->name = rec->sym;
		t->ns_tid = (uint32_t)rec->aux[3];
		return 0;
	}
	reason = rec->aux[0];
	t->intervals++;
	t->ns[reason == PTG_SCHED_PREEMPTED || reason == PTG_SCHED_BLOCKED ? reason : 0] +=
	    rec->dur;
	t->runq_ns += (uint64_t)rec->aux[1];
	return 0;
}

static void totals_print(FILE *out, const struct off_totals *o, const struct trace_reader *r)
{
	fprintf(out, "off-CPU time by thread:\n");
	for (size_t i = 0; i < o->threads.len; i++) {
		const struct thread_off *t = threads__at(&o->threads, i);
		const struct ptg_sym *name = trace_reader__sym(r, t->name);

		if (!t->intervals)
			continue;
		fprintf(out, "  tid %u", t->tid);
		if (t->ns_tid)
			fprintf(out, " (container tid %u)", t->ns_tid);
		if (name)
			fprintf(out, " \"%s\"", name->name);
		fprintf(out,
			": %.3f s off-CPU in %" PRIu64 " intervals (blocked %.3f s, preempted "
			"%.3f s; run-queue wait %.3f s)\n",
			(t->ns[0] + t->ns[1] + t->ns[2]) / 1e9, t->intervals,
			t->ns[PTG_SCHED_BLOCKED] / 1e9, t->ns[PTG_SCHED_PREEMPTED] / 1e9,
			t->runq_ns / 1e9);
	}
	fprintf(out, "\n");
}

int offcpu_report(FILE *out, struct trace_reader *r)
{
	struct off_totals o = {.threads = THREADS_INIT(struct thread_off)};
	struct ptg_record rec;
	uint64_t intervals = 0;
	int err;

	err = trace_reader__rewind(r);
	while (!err && (err = trace_reader__next(r, &rec)) > 0) {
		intervals += rec.kind == PTG_REC_SCHED;
		err = totals_add(&o, &rec);
	}
	if (!err && intervals)
		totals_print(out, &o, r);
	threads__free(&o.threads, NULL);
	return err;
}
