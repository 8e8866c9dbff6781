// SPDX-License-Identifier: MIT
/*
 * The Python stack engine (user/python/pystack.c) without BPF: hand-built frame
 * events of include/ptrace_gpu/events.h go through it into a real trace
 * file, and the records read back must be exactly those expected.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "python/pystack.h"
#include "test.h"
#include "trace/trace.h"
#include "tracer/tracer.h"

/* Above the kernel's PID_MAX_LIMIT: no /proc entry, so no THREAD records. */
#define PID 4999999u

/* Frame addresses and code objects of the scenarios. */
enum { FA = 0x1000, FB = 0x2000, FC = 0x3000, FD = 0x4000, FH = 0x9000 };
enum { CA = 0xa0, CB = 0xb0, CC = 0xc0, CD = 0xd0, CX = 0xe0 };

struct code_name {
	uint64_t code;
	const char *name;
};

/* What the target's memory would say: CX is not there (freed). */
static const struct code_name codes[] = {
    {CA, "a"},
    {CB, "b"},
    {CC, "c"},
    {CD, "d"},
};

static int fake_open(void *ctx, uint32_t pid)
{
	(void)ctx;
	return pid == PID ? 7 : -ESRCH;
}

static void fake_close(void *ctx, int handle)
{
	(*(int *)ctx)++;
	(void)handle;
}

static int fake_read(void *ctx, int handle, uint64_t code, struct py_code_info *out)
{
	(void)ctx;
	if (handle != 7)
		return -EBADF;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		if (codes[i].code != code)
			continue;
		memset(out, 0, sizeof(*out));
		snprintf(out->qualname, sizeof(out->qualname), "%s", codes[i].name);
		snprintf(out->filename, sizeof(out->filename), "t.py");
		out->firstlineno = (uint32_t)code;
		out->fingerprint = (uint32_t)code * 3;
		return 0;
	}
	return -EFAULT;
}

static struct ptg_event ev(uint16_t kind, uint32_t tid, uint64_t ts, uint64_t frame, uint64_t code,
			   uint64_t caller)
{
	return (struct ptg_event){.kind = kind,
				  .pid = PID,
				  .tid = tid,
				  .ts = ts,
				  .a = frame,
				  .b = code,
				  .aux = (uint32_t)code * 3,
				  .d = caller};
}

/* A record as expected: name of its symbol ("" for none). */
struct want {
	uint16_t kind;
	uint16_t flags;
	uint32_t tid;
	uint64_t ts;
	const char *name;
};

#define ENTER(tid, ts, name, fl)                                                                   \
	{                                                                                          \
		PTG_REC_PY_ENTER, fl, tid, ts, name                                                \
	}
#define EXIT(tid, ts, fl)                                                                          \
	{                                                                                          \
		PTG_REC_PY_EXIT, fl, tid, ts, ""                                                   \
	}

struct run {
	char path[256];
	struct trace_writer *w;
	struct tracer *t;
	struct pystack *ps;
	int closed;
};

static int run_open(struct run *r, const char *name)
{
	struct pystack_resolver res = {.ctx = &r->closed,
				       .open_proc = fake_open,
				       .close_proc = fake_close,
				       .read_code = fake_read};
	const char *dir = getenv("TMPDIR");

	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s/ptg-pystack-%s-%d.ptg", dir ? dir : "/tmp", name,
		 getpid());
	if (trace_writer__open(r->path, &r->w) || tracer__new(r->w, 0, 100, &r->t) ||
	    pystack__new(r->t, &res, &r->ps))
		return -1;
	return 0;
}

static void feed(struct run *r, const struct ptg_event *e, size_t size)
{
	ASSERT_EQ(pystack__handle(r->ps, e, size), 0, "pystack__handle");
}

static void feed_ev(struct run *r, struct ptg_event e)
{
	feed(r, &e, sizeof(e));
}

/* Ends the recording at stop, writes the trace and compares its records with want. */
static void run_check(struct run *r, uint64_t stop, const struct want *want, size_t n,
		      const char *name)
{
	struct trace_reader *rd = NULL;
	struct pystack_stats st;
	const struct ptg_loss *l;
	struct ptg_record rec;
	uint64_t unmatched = 0, unresolved = 0;
	size_t i = 0, nl;
	int ret;

	ASSERT_EQ(tracer__finish(r->t, stop), 0, "tracer__finish");
	ASSERT_EQ(pystack__write_losses(r->ps, r->w), 0, "pystack__write_losses");
	pystack__stats(r->ps, &st);
	pystack__free(r->ps);
	ASSERT_EQ(r->closed, 1, "resolver handle closed once");
	tracer__free(r->t);
	if (!ASSERT_EQ(trace_writer__close(r->w), 0, "trace_writer__close"))
		return;
	if (!ASSERT_EQ(trace_reader__open(r->path, &rd, NULL, 0), 0, "trace_reader__open"))
		return;
	while ((ret = trace_reader__next(rd, &rec)) == 1) {
		const struct ptg_sym *s = trace_reader__sym(rd, rec.sym);

		if (!ASSERT_TRUE(i < n, name)) {
			fprintf(stderr, "  extra record kind %u ts %llu\n", rec.kind,
				(unsigned long long)rec.ts);
			break;
		}
		ASSERT_EQ(rec.kind, want[i].kind, name);
		ASSERT_EQ(rec.flags, want[i].flags, name);
		ASSERT_EQ(rec.tid, want[i].tid, name);
		ASSERT_EQ(rec.pid, PID, name);
		ASSERT_EQ(rec.ts, want[i].ts, name);
		ASSERT_STREQ(s ? s->name : "", want[i].name, name);
		i++;
	}
	ASSERT_EQ(ret, 0, "trace_reader__next end");
	ASSERT_EQ(i, n, name);
	/* the replay's own losses are stored in the trace, as counted */
	l = trace_reader__losses(rd, &nl);
	for (size_t j = 0; j < nl; j++) {
		if (!strcmp(l[j].what, "py_unmatched_exit"))
			unmatched += l[j].count;
		else if (!strcmp(l[j].what, "py_code_unresolved"))
			unresolved += l[j].count;
	}
	ASSERT_EQ(unmatched, st.unmatched, "py_unmatched_exit loss");
	ASSERT_EQ(unresolved, st.unresolved, "py_code_unresolved loss");
	trace_reader__close(rd);
	unlink(r->path);
}

/* a() calls b() calls c(); the probe sees returns from the leaving frame and from its caller. */
static void test_nested(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "a", PTG_F_ENTER_CALL), ENTER(1, 20, "b", PTG_F_ENTER_CALL),
	    ENTER(1, 30, "c", PTG_F_ENTER_CALL), EXIT(1, 40, PTG_F_EXIT_RETURN),
	    EXIT(1, 50, PTG_F_EXIT_RETURN),	 EXIT(1, 60, PTG_F_EXIT_RETURN),
	};
	struct pystack_stats st;
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "nested"), 0, "nested: open"))
		return;
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 20, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 30, FC, CC, FB));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 40, FC, 0, 0)); /* the leaving frame named */
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 50, FA, 0, 0)); /* its caller named: b leaves */
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 60, 0, 0, 0));  /* a C-stack shim: the innermost */
	pystack__stats(r.ps, &st);
	ASSERT_EQ(st.unmatched, 0, "nested: unmatched");
	ASSERT_EQ(st.unresolved, 0, "nested: unresolved");
	run_check(&r, 100, want, sizeof(want) / sizeof(want[0]), "nested");
}

/*
 * Attached mid-stack: the first snapshot opens what was running at the
 * recording's start; returns of frames never seen are counted, not written.
 */
static void test_attach_mid_stack(void)
{
	static const struct want want[] = {
	    ENTER(1, 100, "a", PTG_F_ENTER_PREEXISTING),
	    ENTER(1, 100, "b", PTG_F_ENTER_PREEXISTING),
	    ENTER(1, 210, "c", PTG_F_ENTER_CALL),
	    EXIT(1, 220, PTG_F_EXIT_RETURN),
	    EXIT(1, 230, PTG_F_EXIT_RETURN),
	    EXIT(1, 500, PTG_F_EXIT_STOP),
	};
	struct ptg_stack_event snap = {.hdr = ev(PTG_EV_PY_STACK, 1, 200, 2, 0, 0)};
	struct pystack_stats st;
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "mid"), 0, "mid: open"))
		return;
	/* a return before any snapshot, of a frame not on the (empty) stack */
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 150, FD, 0, 0));
	snap.hdr.aux = PTG_SNAP_FIRST;
	/* innermost first */
	snap.frames[0] = (struct ptg_frame_ref){.frame = FB, .code = CB, .fingerprint = CB * 3};
	snap.frames[1] = (struct ptg_frame_ref){.frame = FA, .code = CA, .fingerprint = CA * 3};
	feed(&r, &snap.hdr, sizeof(snap));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 210, FC, CC, FB));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 220, FC, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 230, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 240, FB, 0, 0)); /* b again: unmatched */
	pystack__stats(r.ps, &st);
	ASSERT_EQ(st.unmatched, 2, "mid: unmatched");
	run_check(&r, 500, want, sizeof(want) / sizeof(want[0]), "mid");
}

/*
 * Events were lost: the resync snapshot keeps the common outer frames,
 * closes the rest as lost and opens what it found at its own time.
 */
static void test_lost_events(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "a", PTG_F_ENTER_CALL),
	    ENTER(1, 20, "b", PTG_F_ENTER_CALL),
	    ENTER(1, 30, "c", PTG_F_ENTER_CALL),
	    EXIT(1, 80, PTG_F_EXIT_LOST),
	    EXIT(1, 80, PTG_F_EXIT_LOST),
	    ENTER(1, 80, "d", PTG_F_ENTER_PREEXISTING),
	    ENTER(1, 80, "c", PTG_F_ENTER_PREEXISTING),
	    EXIT(1, 90, PTG_F_EXIT_RETURN),
	    EXIT(1, 95, PTG_F_EXIT_RETURN),
	    EXIT(1, 99, PTG_F_EXIT_STOP),
	};
	struct ptg_stack_event snap = {.hdr = ev(PTG_EV_PY_STACK, 1, 80, 3, 0, 0)};
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "lost"), 0, "lost: open"))
		return;
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 20, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 30, FC, CC, FB));
	/* c returned, b returned, d and a new c were called: all dropped */
	snap.hdr.aux = PTG_SNAP_RESYNC;
	snap.frames[0] = (struct ptg_frame_ref){.frame = FC, .code = CC, .fingerprint = CC * 3};
	snap.frames[1] = (struct ptg_frame_ref){.frame = FD, .code = CD, .fingerprint = CD * 3};
	snap.frames[2] = (struct ptg_frame_ref){.frame = FA, .code = CA, .fingerprint = CA * 3};
	feed(&r, &snap.hdr, sizeof(snap));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 90, FC, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 95, FD, 0, 0));
	run_check(&r, 99, want, sizeof(want) / sizeof(want[0]), "lost");
}

/* Two threads of one process, their events interleaved: each its own stack. */
static void test_two_threads(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "a", PTG_F_ENTER_CALL), ENTER(2, 11, "a", PTG_F_ENTER_CALL),
	    ENTER(1, 12, "b", PTG_F_ENTER_CALL), ENTER(2, 13, "c", PTG_F_ENTER_CALL),
	    EXIT(1, 14, PTG_F_EXIT_RETURN),	 EXIT(2, 15, PTG_F_EXIT_RETURN),
	    EXIT(2, 16, PTG_F_EXIT_RETURN),	 EXIT(1, 17, PTG_F_EXIT_RETURN),
	};
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "threads"), 0, "threads: open"))
		return;
	/* the same frame addresses on both threads: stacks are per thread */
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 2, 11, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 12, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_START, 2, 13, FB, CC, FA));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 14, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 2, 15, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 2, 16, FA, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 17, FA, 0, 0));
	run_check(&r, 99, want, sizeof(want) / sizeof(want[0]), "threads");
}

/* A generator: yield suspends, resume is not a new call; a re-dispatched RESUME is one. */
static void test_generator(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "a", PTG_F_ENTER_CALL), ENTER(1, 20, "b", PTG_F_ENTER_CALL),
	    EXIT(1, 30, PTG_F_EXIT_YIELD),	 ENTER(1, 40, "b", PTG_F_ENTER_RESUME),
	    EXIT(1, 50, PTG_F_EXIT_YIELD),	 ENTER(1, 60, "b", PTG_F_ENTER_RESUME),
	    EXIT(1, 70, PTG_F_EXIT_RETURN),	 EXIT(1, 80, PTG_F_EXIT_RETURN),
	};
	struct pystack_stats st;
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "gen"), 0, "gen: open"))
		return;
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 20, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_YIELD, 1, 30, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RESUME, 1, 40, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_RESUME, 1, 41, FB, CB, FA)); /* dispatched again */
	feed_ev(&r, ev(PTG_EV_PY_YIELD, 1, 50, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RESUME, 1, 60, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 70, FB, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 80, FA, 0, 0));
	pystack__stats(r.ps, &st);
	ASSERT_EQ(st.redispatched, 1, "gen: redispatched");
	run_check(&r, 99, want, sizeof(want) / sizeof(want[0]), "gen");
}

/*
 * An exception unwinds to a(); a call whose caller is deeper than the top
 * closes the frames left unseen; a caller never seen (a frame that runs no
 * RESUME) stays hidden, and its return pops it alone.
 */
static void test_unwind_hidden(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "a", PTG_F_ENTER_CALL),
	    ENTER(1, 20, "b", PTG_F_ENTER_CALL),
	    ENTER(1, 30, "c", PTG_F_ENTER_CALL),
	    EXIT(1, 40, PTG_F_EXIT_UNWIND),
	    EXIT(1, 40, PTG_F_EXIT_UNWIND),
	    ENTER(1, 50, "b", PTG_F_ENTER_CALL),
	    EXIT(1, 60, PTG_F_EXIT_UNWIND),
	    ENTER(1, 60, "c", PTG_F_ENTER_CALL),
	    ENTER(1, 70, "<unknown code 0xe0>", PTG_F_ENTER_CALL),
	    EXIT(1, 80, PTG_F_EXIT_RETURN),
	    EXIT(1, 90, PTG_F_EXIT_RETURN),
	    EXIT(1, 95, PTG_F_EXIT_RETURN),
	};
	struct pystack_stats st;
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "unwind"), 0, "unwind: open"))
		return;
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CA, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 20, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 30, FC, CC, FB));
	feed_ev(&r, ev(PTG_EV_PY_UNWIND, 1, 40, FA, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 50, FB, CB, FA));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 60, FC, CC, FA)); /* b left unseen */
	/* called from frame FH that never ran a RESUME; its code is gone */
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 70, FD, CX, FH));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 80, FD, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 85, FH, 0, 0)); /* the hidden frame: no record */
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 90, FC, 0, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 95, FA, 0, 0));
	pystack__stats(r.ps, &st);
	ASSERT_EQ(st.hidden, 1, "unwind: hidden");
	ASSERT_EQ(st.unresolved, 1, "unwind: unresolved");
	run_check(&r, 99, want, sizeof(want) / sizeof(want[0]), "unwind");
}

/* Names sent with the events (PY_CODE) win over the resolver, which knows none for CX. */
static void test_code_event(void)
{
	static const struct want want[] = {
	    ENTER(1, 10, "gen\xc3\xa9", PTG_F_ENTER_CALL),
	    EXIT(1, 20, PTG_F_EXIT_RETURN),
	};
	struct ptg_code_event c = {.hdr = ev(PTG_EV_PY_CODE, 1, 5, CX, 0, 0)};
	struct pystack_stats st;
	struct run r;

	if (!ASSERT_EQ(run_open(&r, "code"), 0, "code: open"))
		return;
	c.hdr.aux = CX * 3;
	c.hdr.b = 7;
	c.name_width = 1;
	c.name_chars = 4;
	memcpy(c.name, "gen\xe9", 4); /* Latin-1 in a width-1 str */
	c.file_width = 1;
	c.file_chars = 4;
	memcpy(c.file, "g.py", 4);
	feed(&r, &c.hdr, sizeof(c));
	feed_ev(&r, ev(PTG_EV_PY_START, 1, 10, FA, CX, 0));
	feed_ev(&r, ev(PTG_EV_PY_RETURN, 1, 20, FA, 0, 0));
	pystack__stats(r.ps, &st);
	ASSERT_EQ(st.unresolved, 0, "code: unresolved");
	run_check(&r, 99, want, sizeof(want) / sizeof(want[0]), "code");
}

int main(void)
{
	test_nested();
	test_attach_mid_stack();
	test_lost_events();
	test_two_threads();
	test_generator();
	test_unwind_hidden();
	test_code_event();
	return TEST_DONE();
}
