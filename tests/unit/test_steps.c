// SPDX-License-Identifier: MIT
/*
 * Steps without a target: --schedule parsing, torch.profiler.schedule()'s
 * actions (the expected tables are what torch 1.13's schedule_fn returns),
 * and trace_slice() on a hand-built trace: frames open at the window's start
 * begin there, those open at its end stop there, records outside are gone,
 * symbol ids stay, ops keep their module path in aux[0]; and the grouped op
 * profile (--group-by-module, --group-by-stack) on it.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "model/profile.h"
#include "record/steps.h"
#include "test.h"
#include "trace/slice.h"
#include "trace/trace.h"

static char in_path[256], out_path[256];

static void test_parse(void)
{
	struct steps_opts o = {};

	ASSERT_EQ(steps_parse_schedule("wait=1,warmup=1,active=3,repeat=2", &o), 0, "parse");
	ASSERT_TRUE(o.schedule && o.wait == 1 && o.warmup == 1 && o.active == 3 && o.repeat == 2,
		    "values");
	ASSERT_EQ(steps_parse_schedule("active=2,skip_first=3", &o), 0, "defaults");
	ASSERT_TRUE(o.wait == 0 && o.warmup == 0 && o.skip_first == 3, "zeros and skip_first");
	ASSERT_EQ(steps_parse_schedule("wait=1,warmup=1", &o), -EINVAL, "active is required");
	ASSERT_EQ(steps_parse_schedule("active=0", &o), -EINVAL, "active > 0");
	ASSERT_EQ(steps_parse_schedule("active=2,active=3", &o), -EINVAL, "twice");
	ASSERT_EQ(steps_parse_schedule("active=-1", &o), -EINVAL, "negative");
	ASSERT_EQ(steps_parse_schedule("activ=2", &o), -EINVAL, "unknown key");
	ASSERT_EQ(steps_parse_schedule("active=2,", &o), 0, "trailing comma");
	ASSERT_EQ(steps_check_function("train:Trainer.step"), 0, "module:qualname");
	ASSERT_EQ(steps_check_function("Trainer.step"), -EINVAL, "no module");
	ASSERT_EQ(steps_check_function("a:b:c"), -EINVAL, "two colons");
}

static void test_actions(void)
{
	/* [schedule(wait=1, warmup=1, active=2, repeat=2)(k).value for k in range(10)] */
	static const int two[] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 0};
	/* schedule(wait=0, warmup=0, active=1, skip_first=2): NONE, NONE, then SAVE forever */
	static const int skip[] = {0, 0, 3, 3, 3, 3};
	struct steps_opts o = {.schedule = true, .wait = 1, .warmup = 1, .active = 2, .repeat = 2};

	for (uint32_t k = 0; k < 10; k++)
		ASSERT_EQ(steps_action(&o, k), two[k], "wait=1,warmup=1,active=2,repeat=2");
	o = (struct steps_opts){.schedule = true, .active = 1, .skip_first = 2};
	for (uint32_t k = 0; k < 6; k++)
		ASSERT_EQ(steps_action(&o, k), skip[k], "active=1,skip_first=2");
}

static struct trace_writer *w;

static void rec(uint16_t kind, uint16_t flags, uint32_t tid, uint32_t sym, uint64_t ts,
		int64_t aux0)
{
	struct ptg_record r = {.kind = kind,
			       .flags = flags,
			       .pid = 1,
			       .tid = tid,
			       .sym = sym,
			       .ts = ts,
			       .aux = {aux0}};

	ASSERT_EQ(trace_writer__record(w, &r), 0, "write");
}

/*
 * tid 1: main() [0, 100] > step() [10, 40] > op add [20, 30] (module fc1), then
 *        step() [50, 90] > op mul [60, 70] (module fc2);
 * tid 2: worker() [5, 95], idle; a ProfilerStep span [45, 90] on tid 1.
 */
static void write_input(uint32_t *syms)
{
	ASSERT_EQ(trace_writer__open(in_path, &w), 0, "open input");
	trace_writer__meta(w, "source", "test");
	syms[0] = trace_writer__sym(w, PTG_SYM_PY_FUNC, "main", "app.py", 1);
	syms[1] = trace_writer__sym(w, PTG_SYM_PY_FUNC, "step", "app.py", 10);
	syms[2] = trace_writer__sym(w, PTG_SYM_OP, "aten::add", "", 0);
	syms[3] = trace_writer__sym(w, PTG_SYM_OP, "aten::mul", "", 0);
	syms[4] = trace_writer__sym(w, PTG_SYM_PY_FUNC, "worker", "app.py", 20);
	syms[5] =
	    trace_writer__sym(w, PTG_SYM_STRING, "TOP(Net)::forward.fc1(Linear)::forward", "", 0);
	syms[6] =
	    trace_writer__sym(w, PTG_SYM_STRING, "TOP(Net)::forward.fc2(Linear)::forward", "", 0);
	syms[7] = trace_writer__sym(w, PTG_SYM_STRING, "ProfilerStep#1", "", 0);
	rec(PTG_REC_PY_ENTER, 0, 1, syms[0], 0, 0);
	rec(PTG_REC_PY_ENTER, 0, 2, syms[4], 5, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, syms[1], 10, 0);
	rec(PTG_REC_OP_ENTER, 0, 1, syms[2], 20, syms[5]);
	rec(PTG_REC_OP_EXIT, 0, 1, 0, 30, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 0, 40, 0);
	rec(PTG_REC_PY_ENTER, 0, 1, syms[1], 50, 0);
	rec(PTG_REC_OP_ENTER, 0, 1, syms[3], 60, syms[6]);
	rec(PTG_REC_OP_EXIT, 0, 1, 0, 70, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 0, 90, 0);
	{
		struct ptg_record span = {
		    .kind = PTG_REC_SPAN, .pid = 1, .tid = 1, .sym = syms[7], .ts = 45, .dur = 45};

		ASSERT_EQ(trace_writer__record_args(w, &span, "{\"x\": 1}", 8), 0, "span");
	}
	rec(PTG_REC_PY_EXIT, 0, 2, 0, 95, 0);
	rec(PTG_REC_PY_EXIT, 0, 1, 0, 100, 0);
	trace_writer__loss(w, "py_event", 0, 3);
	ASSERT_EQ(trace_writer__close(w), 0, "close input");
}

static void test_slice(void)
{
	struct slice_meta meta[] = {{"steps", "ProfilerStep#1-#1"}};
	struct trace_reader *r;
	struct ptg_record got[32];
	const struct ptg_loss *l;
	uint32_t syms[8];
	char err[256];
	size_t n = 0, nl = 0;

	write_input(syms);
	/* the window of the second step: [45, 90] */
	ASSERT_EQ(trace_slice(in_path, out_path, 45, 90, meta, 1), 0, "slice");
	if (!ASSERT_EQ(trace_reader__open(out_path, &r, err, sizeof(err)), 0, "open slice"))
		return;
	while (n < 32 && trace_reader__next(r, &got[n]) > 0) {
		if (got[n].kind == PTG_REC_SPAN)
			ASSERT_STREQ(trace_reader__args(r, NULL), "{\"x\": 1}", "span's args kept");
		n++;
	}
	ASSERT_STREQ(trace_reader__meta(r, "steps"), "ProfilerStep#1-#1", "extra meta");
	ASSERT_STREQ(trace_reader__meta(r, "source"), "test", "meta copied");
	ASSERT_STREQ(trace_reader__sym(r, syms[3])->name, "aten::mul", "symbol ids kept");
	l = trace_reader__losses(r, &nl);
	ASSERT_TRUE(nl == 1 && l[0].count == 3, "losses copied");
	/* main (preexisting at 45), step 50, mul 60-70 with fc2, step exit 90, span,
	 * then main and worker stopped at 90 (worker entered at 45 first) */
	if (!ASSERT_EQ(n, 9, "records in the window"))
		goto out;
	ASSERT_TRUE(got[0].kind == PTG_REC_PY_ENTER && got[0].sym == syms[0] && got[0].ts == 45 &&
			(got[0].flags & PTG_F_ENTER_PREEXISTING),
		    "main opens at the window's start");
	ASSERT_TRUE(got[1].sym == syms[1] && got[1].ts == 50 && !got[1].flags, "step as recorded");
	ASSERT_TRUE(got[2].kind == PTG_REC_OP_ENTER && got[2].aux[0] == syms[6],
		    "module path kept");
	ASSERT_TRUE(got[4].kind == PTG_REC_PY_EXIT && got[4].ts == 90 && !got[4].flags,
		    "step returns at the window's end");
	ASSERT_TRUE(got[5].kind == PTG_REC_SPAN && got[5].ts == 45 && got[5].dur == 45, "span");
	ASSERT_TRUE(got[6].kind == PTG_REC_PY_EXIT && got[6].tid == 1 && got[6].ts == 90 &&
			got[6].flags == PTG_F_EXIT_STOP,
		    "main stops at the window's end");
	ASSERT_TRUE(got[7].kind == PTG_REC_PY_ENTER && got[7].tid == 2 && got[7].ts == 45 &&
			(got[7].flags & PTG_F_ENTER_PREEXISTING),
		    "an idle thread's frame is in the window");
	ASSERT_TRUE(got[8].tid == 2 && got[8].flags == PTG_F_EXIT_STOP, "and stops at its end");
out:
	trace_reader__close(r);
}

static void test_grouped_profile(void)
{
	struct profile_opts o = {.kind = PTG_REC_OP_ENTER, .group = PROFILE_GROUP_MODULE};
	const struct profile_func *f;
	struct profile_run *run;
	struct trace_reader *r;
	char err[256];
	size_t n;

	if (!ASSERT_EQ(trace_reader__open(in_path, &r, err, sizeof(err)), 0, "open input"))
		return;
	if (ASSERT_EQ(profile_run__collect(r, &o, &run), 0, "collect by module")) {
		f = profile__funcs(run->all, &n);
		ASSERT_EQ(n, 2, "two rows");
		ASSERT_STREQ(trace_reader__sym(r, f[0].group)->name,
			     "TOP(Net)::forward.fc1(Linear)::forward", "add's module");
		ASSERT_STREQ(trace_reader__sym(r, f[1].group)->name,
			     "TOP(Net)::forward.fc2(Linear)::forward", "mul's module");
		profile_run__free(run);
	}
	o = (struct profile_opts){
	    .kind = PTG_REC_OP_ENTER, .group = PROFILE_GROUP_STACK, .stack_n = 2};
	trace_reader__rewind(r);
	if (ASSERT_EQ(profile_run__collect(r, &o, &run), 0, "collect by stack")) {
		f = profile__funcs(run->all, &n);
		/* both ops under step < main: one stack, two rows */
		ASSERT_EQ(n, 2, "two rows");
		ASSERT_EQ(run->nstacks, 1, "one stack");
		ASSERT_TRUE(f[0].group == 1 && f[1].group == 1, "the same group");
		ASSERT_STREQ(trace_reader__sym(r, run->stacks[0])->name, "step", "innermost first");
		ASSERT_STREQ(trace_reader__sym(r, run->stacks[1])->name, "main", "then its caller");
		profile_run__free(run);
	}
	trace_reader__close(r);
}

int main(void)
{
	const char *dir = getenv("TMPDIR");

	snprintf(in_path, sizeof(in_path), "%s/ptg-steps-in-%d.ptg", dir ? dir : "/tmp", getpid());
	snprintf(out_path, sizeof(out_path), "%s/ptg-steps-out-%d.ptg", dir ? dir : "/tmp",
		 getpid());
	test_parse();
	test_actions();
	test_slice();
	test_grouped_profile();
	unlink(in_path);
	unlink(out_path);
	return TEST_DONE();
}
