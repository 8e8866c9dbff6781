// SPDX-License-Identifier: MIT
/*
 * model__walk's MODEL_WALK_* flags, which the Chrome exporter walks with: the
 * ENTER args blob and aux[1] of each span, imported EVENT records handed on,
 * and spans still open at the end closed at the trace's last timestamp. Each
 * trace is walked with and without the flags: without, nothing changes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/model.h"
#include "test.h"
#include "trace/trace.h"

#define MAX_SEEN 16

struct seen {
	bool is_span;
	struct model_span span;
	char args[64]; /* copy of span.args: it lives only during the callback */
	bool has_args;
	struct ptg_record rec;
	unsigned int depth;
};

struct walk {
	struct seen seen[MAX_SEEN];
	int n;
	struct model_stats stats;
};

static char path[256];
static struct trace_writer *writer;

static void on_span(void *ctx, const struct model_span *sp, const struct model_frame *stack,
		    unsigned int depth)
{
	struct walk *w = ctx;
	struct seen *s;

	(void)stack;
	if (w->n == MAX_SEEN)
		return;
	s = &w->seen[w->n++];
	s->is_span = true;
	s->span = *sp;
	s->has_args = sp->args != NULL;
	if (sp->args)
		snprintf(s->args, sizeof(s->args), "%s", sp->args);
	s->depth = depth;
}

static void on_record(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		      unsigned int depth)
{
	struct walk *w = ctx;
	struct seen *s;

	(void)stack;
	if (w->n == MAX_SEEN)
		return;
	s = &w->seen[w->n++];
	s->rec = *rec;
	s->depth = depth;
}

static void put(uint16_t kind, uint32_t tid, uint32_t sym, uint64_t ts, uint64_t dur, int64_t aux1,
		const char *args)
{
	struct ptg_record r = {
	    .kind = kind, .pid = 1, .tid = tid, .sym = sym, .ts = ts, .dur = dur};

	r.aux[1] = aux1;
	ASSERT_EQ(trace_writer__record_args(writer, &r, args, args ? strlen(args) : 0), 0,
		  "write record");
}

/* Walks the trace at path with flags into w. */
static int walk(unsigned int flags, struct walk *w)
{
	const struct model_visitor v = {.span = on_span, .record = on_record, .flags = flags};
	struct trace_reader *r;
	char err[256];
	int ret;

	memset(w, 0, sizeof(*w));
	if (!ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "reader open")) {
		fprintf(stderr, "%s\n", err);
		return -EIO;
	}
	ret = model__walk(r, &v, w, &w->stats);
	ASSERT_EQ(ret, 0, "walk");
	trace_reader__close(r);
	return ret;
}

/*
 * Thread 10: A(100..) > B(110..150, args {"x": 1}, aux1 7); an EVENT at 120
 * lasting 400 (ends at 520, past every other record); A never exits.
 * Thread 11: C(130..) never exits, and D(140..160) closes.
 */
static void write_trace(uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
	ASSERT_EQ(trace_writer__open(path, &writer), 0, "writer open");
	*a = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "A", "m.py", 1);
	*b = trace_writer__sym(writer, PTG_SYM_OP, "aten::mm", "", 0);
	*c = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "C", "m.py", 9);
	*d = trace_writer__sym(writer, PTG_SYM_PY_FUNC, "D", "m.py", 12);
	put(PTG_REC_PY_ENTER, 10, *a, 100, 0, 0, NULL);
	put(PTG_REC_OP_ENTER, 10, *b, 110, 0, 7, "{\"x\": 1}");
	put(PTG_REC_EVENT, 10, 0, 120, 400, 0, "{\"ph\": \"i\"}");
	put(PTG_REC_PY_ENTER, 11, *c, 130, 0, 0, NULL);
	put(PTG_REC_PY_ENTER, 11, *d, 140, 0, 0, NULL);
	put(PTG_REC_PY_EXIT, 11, 0, 160, 0, 0, NULL);
	put(PTG_REC_OP_EXIT, 10, 0, 150, 0, 0, NULL);
	ASSERT_EQ(trace_writer__close(writer), 0, "writer close");
}

static void test_default(void)
{
	uint32_t a, b, c, d;
	struct walk w;

	write_trace(&a, &b, &c, &d);
	if (walk(0, &w) || !ASSERT_EQ(w.n, 2, "callbacks without flags"))
		return;
	/* D closes first, then B; the EVENT is no part of the timeline; A and C stay open */
	ASSERT_TRUE(w.seen[0].is_span && w.seen[0].span.sym == d, "D");
	ASSERT_TRUE(w.seen[1].is_span && w.seen[1].span.sym == b, "B");
	ASSERT_TRUE(!w.seen[1].has_args, "no args kept without MODEL_WALK_ARGS");
	ASSERT_EQ(w.seen[1].span.aux1, 7, "aux1");
	ASSERT_EQ(w.stats.records, 6, "records without the EVENT");
	ASSERT_EQ(w.stats.last_ts, 160, "last ts without the EVENT");
	ASSERT_EQ(w.stats.spans, 2, "spans");
}

static void test_flags(void)
{
	unsigned int all = MODEL_WALK_ARGS | MODEL_WALK_EVENTS | MODEL_WALK_CLOSE;
	uint32_t a, b, c, d;
	struct walk w;

	write_trace(&a, &b, &c, &d);
	if (walk(all, &w) || !ASSERT_EQ(w.n, 5, "callbacks with every flag"))
		return;
	ASSERT_TRUE(!w.seen[0].is_span && w.seen[0].rec.kind == PTG_REC_EVENT, "EVENT handed on");
	ASSERT_EQ(w.seen[0].depth, 2, "EVENT under A and B");
	ASSERT_TRUE(w.seen[1].is_span && w.seen[1].span.sym == d, "D");
	ASSERT_TRUE(!w.seen[1].has_args, "D has no args");
	ASSERT_TRUE(w.seen[2].is_span && w.seen[2].span.sym == b, "B");
	ASSERT_TRUE(w.seen[2].has_args, "B's args");
	ASSERT_STREQ(w.seen[2].args, "{\"x\": 1}", "B's args blob");
	ASSERT_EQ(w.seen[2].span.aux1, 7, "B's aux1");
	ASSERT_EQ(w.seen[2].span.end, 150, "B's end");
	/* the EVENT's end is the trace's last timestamp; A and C close there */
	ASSERT_EQ(w.stats.last_ts, 520, "last ts with the EVENT");
	ASSERT_EQ(w.stats.records, 7, "records with the EVENT");
	ASSERT_EQ(w.stats.spans, 4, "spans, those closed at the end included");
	for (int i = 3; i < 5; i++) {
		const struct model_span *s = &w.seen[i].span;

		ASSERT_TRUE(w.seen[i].is_span && (s->sym == a || s->sym == c), "closed at the end");
		ASSERT_EQ(s->end, 520, "closed at last ts");
		ASSERT_EQ(s->exit_flags, PTG_F_EXIT_STOP, "closed as stopped");
		ASSERT_EQ(s->self_ns, s->sym == a ? 420 - 40 : 390 - 20, "self time");
		ASSERT_EQ(w.seen[i].depth, 0, "outermost");
	}
	ASSERT_TRUE(w.seen[3].span.sym != w.seen[4].span.sym, "A and C once each");
}

int main(void)
{
	const char *dir = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ptg-model-flags-%d.ptg", dir ? dir : "/tmp", getpid());
	test_default();
	unlink(path);
	test_flags();
	unlink(path);
	return TEST_DONE();
}
