// SPDX-License-Identifier: MIT
/*
 * cProfile aggregation on hand-built traces: ncalls, primitive calls, tottime,
 * cumtime and caller edges worked out by hand, with _lsprof's rules for
 * recursion, generator segments that are not calls, ops folded into Python
 * self time, threads; and print_stats/print_callers/print_callees output to
 * the character (the expected texts are what Python 3.11's pstats prints for
 * the same stats dict).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "model/profile.h"
#include "output/pstats.h"
#include "test.h"
#include "trace/trace.h"

#define MS 1000000ULL

static char path[256];
static struct trace_writer *writer;

static void rec(uint16_t kind, uint16_t flags, uint32_t tid, uint32_t sym, uint64_t ts)
{
	struct ptg_record r = {
	    .kind = kind, .flags = flags, .pid = 1, .tid = tid, .sym = sym, .ts = ts};

	ASSERT_EQ(trace_writer__record(writer, &r), 0, "write record");
}

static void enter(uint32_t tid, uint32_t sym, uint64_t ts)
{
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_CALL, tid, sym, ts);
}

static void leave(uint32_t tid, uint64_t ts)
{
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_RETURN, tid, 0, ts);
}

static uint32_t pyfunc(const char *name, uint32_t line)
{
	return trace_writer__sym(writer, PTG_SYM_PY_FUNC, name, "app.py", line);
}

static void start(void)
{
	ASSERT_EQ(trace_writer__open(path, &writer), 0, "writer open");
}

/* Closes the trace and aggregates it; the caller frees *run and *r. */
static int collect(const struct profile_opts *o, struct trace_reader **r, struct profile_run **run)
{
	char err[256];

	if (!ASSERT_EQ(trace_writer__close(writer), 0, "writer close"))
		return -EIO;
	if (!ASSERT_EQ(trace_reader__open(path, r, err, sizeof(err)), 0, "reader open")) {
		fprintf(stderr, "%s\n", err);
		return -EIO;
	}
	if (!ASSERT_EQ(profile_run__collect(*r, o, run), 0, "collect")) {
		trace_reader__close(*r);
		return -EIO;
	}
	return 0;
}

static const struct profile_func *func(const struct profile *p, uint32_t sym)
{
	size_t n;
	long i = profile__find(p, sym);

	return i < 0 ? NULL : &profile__funcs(p, &n)[i];
}

static const struct profile_edge *edge(const struct profile *p, uint32_t caller, uint32_t callee)
{
	size_t n;
	const struct profile_edge *e = profile__edges(p, &n);

	for (size_t i = 0; i < n; i++) {
		if (e[i].caller == caller && e[i].callee == callee)
			return &e[i];
	}
	return NULL;
}

static void check_func(const struct profile *p, uint32_t sym, uint64_t nc, uint64_t pc, uint64_t tt,
		       uint64_t ct, const char *name)
{
	const struct profile_func *f = func(p, sym);

	if (!ASSERT_TRUE(f != NULL, name))
		return;
	ASSERT_EQ(f->ncalls, nc, name);
	ASSERT_EQ(f->pcalls, pc, name);
	ASSERT_EQ(f->tt_ns, tt, name);
	ASSERT_EQ(f->ct_ns, ct, name);
}

static void check_edge(const struct profile *p, uint32_t caller, uint32_t callee, uint64_t nc,
		       uint64_t pc, uint64_t tt, uint64_t ct, const char *name)
{
	const struct profile_edge *e = edge(p, caller, callee);

	if (!ASSERT_TRUE(e != NULL, name))
		return;
	ASSERT_EQ(e->ncalls, nc, name);
	ASSERT_EQ(e->pcalls, pc, name);
	ASSERT_EQ(e->tt_ns, tt, name);
	ASSERT_EQ(e->ct_ns, ct, name);
}

/* Runs fn(out) into a string to compare with what pstats would print. */
static char *capture(int (*fn)(FILE *, const struct profile *, const struct trace_reader *,
			       const struct pstats_list_opts *),
		     const struct profile *p, const struct trace_reader *r,
		     const struct pstats_list_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	ASSERT_EQ(fn(f, p, r, o), 0, "listing");
	fclose(f);
	return buf;
}

/*
 * main(0..100 ms) calls a(10..40) > b(15..25), then a(50..70):
 * main self 50; a self 20 + 20, cum 50; b self 10.
 */
static void test_nested(void)
{
	struct profile_opts o = {.kind = PTG_REC_PY_ENTER};
	struct pstats_list_opts lo = {.sort = PSTATS_SORT_CUMTIME, .limit = -1};
	struct profile_run *run;
	struct trace_reader *r;
	uint32_t m, a, b;
	char *out;

	start();
	m = pyfunc("main", 1);
	a = pyfunc("a", 10);
	b = pyfunc("b", 20);
	enter(1, m, 0);
	enter(1, a, 10 * MS);
	enter(1, b, 15 * MS);
	leave(1, 25 * MS);
	leave(1, 40 * MS);
	enter(1, a, 50 * MS);
	leave(1, 70 * MS);
	leave(1, 100 * MS);
	if (collect(&o, &r, &run))
		return;
	check_func(run->all, m, 1, 1, 50 * MS, 100 * MS, "main");
	check_func(run->all, a, 2, 2, 40 * MS, 50 * MS, "a");
	check_func(run->all, b, 1, 1, 10 * MS, 10 * MS, "b");
	check_edge(run->all, m, a, 2, 2, 40 * MS, 50 * MS, "main -> a");
	check_edge(run->all, a, b, 1, 1, 10 * MS, 10 * MS, "a -> b");
	ASSERT_TRUE(edge(run->all, m, b) == NULL, "no main -> b edge");

	out = capture(pstats__print_stats, run->all, r, &lo);
	ASSERT_STREQ(out,
		     "         4 function calls in 0.100 seconds\n"
		     "\n"
		     "   Ordered by: cumulative time\n"
		     "\n"
		     "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n"
		     "        1    0.050    0.050    0.100    0.100 app.py:1(main)\n"
		     "        2    0.040    0.020    0.050    0.025 app.py:10(a)\n"
		     "        1    0.010    0.010    0.010    0.010 app.py:20(b)\n"
		     "\n\n",
		     "print_stats");
	free(out);

	lo.limit = 2;
	out = capture(pstats__print_callers, run->all, r, &lo);
	ASSERT_STREQ(out,
		     "   Ordered by: cumulative time\n"
		     "   List reduced from 3 to 2 due to restriction <2>\n"
		     "\n"
		     "Function        was called by...\n"
		     "                    ncalls  tottime  cumtime\n"
		     "app.py:1(main)  <- \n"
		     "app.py:10(a)    <-       2    0.040    0.050  app.py:1(main)\n"
		     "\n\n",
		     "print_callers");
	free(out);

	lo.limit = -1;
	lo.sort = PSTATS_SORT_NAME;
	out = capture(pstats__print_callees, run->all, r, &lo);
	ASSERT_STREQ(out,
		     "   Ordered by: function name\n"
		     "\n"
		     "Function        called...\n"
		     "                    ncalls  tottime  cumtime\n"
		     "app.py:10(a)    ->       1    0.010    0.010  app.py:20(b)\n"
		     "app.py:20(b)    -> \n"
		     "app.py:1(main)  ->       2    0.040    0.050  app.py:10(a)\n"
		     "\n\n",
		     "print_callees");
	free(out);
	profile_run__free(run);
	trace_reader__close(r);
}

/*
 * f1(0..100) > f2(10..60) > f3(20..30); f1 > g(70..90) > f4(75..85).
 * Self: f1 30, f2 40, f3 10, g 10, f4 10. Only f1 is a primitive call of f
 * and only its 100 counts as cumtime. For the f -> f pair, f2 is primitive
 * (no f -> f pair active when it starts) and f3 is not, as in _lsprof.
 */
static void test_recursion(void)
{
	struct profile_opts o = {.kind = PTG_REC_PY_ENTER};
	struct pstats_list_opts lo = {.sort = PSTATS_SORT_TOTTIME, .limit = -1};
	struct profile_run *run;
	struct trace_reader *r;
	uint32_t f, g;
	char *out;

	start();
	f = pyfunc("f", 3);
	g = pyfunc("g", 30);
	enter(7, f, 0);
	enter(7, f, 10 * MS);
	enter(7, f, 20 * MS);
	leave(7, 30 * MS);
	leave(7, 60 * MS);
	enter(7, g, 70 * MS);
	enter(7, f, 75 * MS);
	leave(7, 85 * MS);
	leave(7, 90 * MS);
	leave(7, 100 * MS);
	if (collect(&o, &r, &run))
		return;
	check_func(run->all, f, 4, 1, 90 * MS, 100 * MS, "f");
	check_func(run->all, g, 1, 1, 10 * MS, 20 * MS, "g");
	check_edge(run->all, f, f, 2, 1, 50 * MS, 50 * MS, "f -> f");
	check_edge(run->all, f, g, 1, 1, 10 * MS, 20 * MS, "f -> g");
	check_edge(run->all, g, f, 1, 1, 10 * MS, 10 * MS, "g -> f");

	out = capture(pstats__print_stats, run->all, r, &lo);
	ASSERT_STREQ(out,
		     "         5 function calls (2 primitive calls) in 0.100 seconds\n"
		     "\n"
		     "   Ordered by: internal time\n"
		     "\n"
		     "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n"
		     "      4/1    0.090    0.022    0.100    0.100 app.py:3(f)\n"
		     "        1    0.010    0.010    0.020    0.020 app.py:30(g)\n"
		     "\n\n",
		     "print_stats with recursion");
	free(out);
	out = capture(pstats__print_callers, run->all, r, &lo);
	ASSERT_STREQ(out,
		     "   Ordered by: internal time\n"
		     "\n"
		     "Function      was called by...\n"
		     "                  ncalls  tottime  cumtime\n"
		     "app.py:3(f)   <-     2/1    0.050    0.050  app.py:3(f)\n"
		     "                       1    0.010    0.010  app.py:30(g)\n"
		     "app.py:30(g)  <-       1    0.010    0.020  app.py:3(f)\n"
		     "\n\n",
		     "print_callers with recursion");
	free(out);
	profile_run__free(run);
	trace_reader__close(r);
}

/*
 * main(0..40): gen's first segment (1..11) yields; it resumes under main
 * (20..25), then under h(28..38) (30..32) and returns. One call of gen with
 * 17 ms of self and cumulative time; h -> gen has no call but 2 ms.
 */
static void test_generator(void)
{
	struct profile_opts o = {.kind = PTG_REC_PY_ENTER};
	struct profile_run *run;
	struct trace_reader *r;
	uint32_t m, gen, h;

	start();
	m = pyfunc("main", 1);
	gen = pyfunc("gen", 5);
	h = pyfunc("h", 9);
	enter(3, m, 0);
	enter(3, gen, 1 * MS);
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_YIELD, 3, 0, 11 * MS);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_RESUME, 3, gen, 20 * MS);
	rec(PTG_REC_PY_EXIT, PTG_F_EXIT_YIELD, 3, 0, 25 * MS);
	enter(3, h, 28 * MS);
	rec(PTG_REC_PY_ENTER, PTG_F_ENTER_RESUME, 3, gen, 30 * MS);
	leave(3, 32 * MS);
	leave(3, 38 * MS);
	leave(3, 40 * MS);
	if (collect(&o, &r, &run))
		return;
	check_func(run->all, gen, 1, 1, 17 * MS, 17 * MS, "gen");
	check_func(run->all, m, 1, 1, 15 * MS, 40 * MS, "main");
	check_func(run->all, h, 1, 1, 8 * MS, 10 * MS, "h");
	check_edge(run->all, m, gen, 1, 1, 15 * MS, 15 * MS, "main -> gen");
	check_edge(run->all, h, gen, 0, 0, 2 * MS, 2 * MS, "h -> gen (resumption only)");
	check_edge(run->all, m, h, 1, 1, 8 * MS, 10 * MS, "main -> h");
	profile_run__free(run);
	trace_reader__close(r);
}

/*
 * p(0..100) > op mm(10..50) > [cb(20..30), op add(35..45)]. Python view: p's
 * self time takes the ops' own 30 (60 + 20 + 10 = 90), cb is called by p.
 * Op view: mm's self takes cb's 10 (20 + 10), mm -> add is an edge.
 */
static void test_ops_folding(void)
{
	struct profile_opts py = {.kind = PTG_REC_PY_ENTER};
	struct profile_opts ops = {.kind = PTG_REC_OP_ENTER};
	struct profile_run *run;
	struct trace_reader *r;
	uint32_t p, cb, mm, add;
	uint64_t nc, pc, tt;

	start();
	p = pyfunc("p", 1);
	cb = pyfunc("cb", 2);
	mm = trace_writer__sym(writer, PTG_SYM_OP, "aten::mm", "", 0);
	add = trace_writer__sym(writer, PTG_SYM_OP, "aten::add", "", 0);
	enter(4, p, 0);
	rec(PTG_REC_OP_ENTER, 0, 4, mm, 10 * MS);
	enter(4, cb, 20 * MS);
	leave(4, 30 * MS);
	rec(PTG_REC_OP_ENTER, 0, 4, add, 35 * MS);
	rec(PTG_REC_OP_EXIT, 0, 4, 0, 45 * MS);
	rec(PTG_REC_OP_EXIT, 0, 4, 0, 50 * MS);
	leave(4, 100 * MS);
	if (collect(&py, &r, &run))
		return;
	check_func(run->all, p, 1, 1, 90 * MS, 100 * MS, "p");
	check_func(run->all, cb, 1, 1, 10 * MS, 10 * MS, "cb");
	check_edge(run->all, p, cb, 1, 1, 10 * MS, 10 * MS, "p -> cb through an op");
	ASSERT_TRUE(profile__find(run->all, mm) < 0, "no op in the Python view");
	profile__totals(run->all, &nc, &pc, &tt);
	ASSERT_EQ(tt, 100 * MS, "Python self times cover the thread");
	profile_run__free(run);

	trace_reader__rewind(r);
	if (!ASSERT_EQ(profile_run__collect(r, &ops, &run), 0, "collect ops"))
		goto cleanup;
	check_func(run->all, mm, 1, 1, 30 * MS, 40 * MS, "mm");
	check_func(run->all, add, 1, 1, 10 * MS, 10 * MS, "add");
	check_edge(run->all, mm, add, 1, 1, 10 * MS, 10 * MS, "mm -> add");
	ASSERT_TRUE(profile__find(run->all, p) < 0, "no Python function in the op view");
	profile_run__free(run);
cleanup:
	trace_reader__close(r);
}

/*
 * Thread 1 "MainThread": w(0..10). Thread 2 "loader": w(5..25) > x(6..8),
 * then y opens at 30 and never closes; z(31..33) under it gives y an entry
 * with no calls (the dynamo rule). All threads, per thread, and --tid 2.
 */
static void test_threads(void)
{
	struct profile_opts all = {.kind = PTG_REC_PY_ENTER, .per_thread = true};
	struct profile_opts one = {.kind = PTG_REC_PY_ENTER, .by_tid = true, .tid = 2};
	struct ptg_record name = {.kind = PTG_REC_THREAD, .pid = 1};
	struct profile_run *run;
	struct trace_reader *r;
	uint32_t w, x, y, z, main_name, loader_name;

	start();
	w = pyfunc("w", 1);
	x = pyfunc("x", 2);
	y = pyfunc("y", 3);
	z = pyfunc("z", 4);
	main_name = trace_writer__sym(writer, PTG_SYM_STRING, "MainThread", "", 0);
	loader_name = trace_writer__sym(writer, PTG_SYM_STRING, "loader", "", 0);
	name.tid = 1;
	name.sym = main_name;
	ASSERT_EQ(trace_writer__record(writer, &name), 0, "thread record");
	name.tid = 2;
	name.sym = loader_name;
	ASSERT_EQ(trace_writer__record(writer, &name), 0, "thread record");
	enter(1, w, 0);
	enter(2, w, 5 * MS);
	enter(2, x, 6 * MS);
	leave(2, 8 * MS);
	leave(1, 10 * MS);
	leave(2, 25 * MS);
	enter(2, y, 30 * MS);
	enter(2, z, 31 * MS);
	leave(2, 33 * MS);
	if (collect(&all, &r, &run))
		return;
	check_func(run->all, w, 2, 2, 28 * MS, 30 * MS, "w, both threads");
	check_func(run->all, y, 0, 0, 0, 0, "y: caller only");
	check_edge(run->all, y, z, 1, 1, 2 * MS, 2 * MS, "y -> z");
	if (ASSERT_EQ(run->nthreads, 2, "threads")) {
		ASSERT_EQ(run->threads[0].tid, 1, "first thread");
		ASSERT_EQ(run->threads[0].name_sym, main_name, "first thread's name");
		ASSERT_EQ(run->threads[1].name_sym, loader_name, "second thread's name");
		check_func(run->threads[0].prof, w, 1, 1, 10 * MS, 10 * MS, "w on thread 1");
		check_func(run->threads[1].prof, w, 1, 1, 18 * MS, 20 * MS, "w on thread 2");
		ASSERT_TRUE(func(run->threads[0].prof, x) == NULL, "x not on thread 1");
	}
	profile_run__free(run);

	trace_reader__rewind(r);
	if (!ASSERT_EQ(profile_run__collect(r, &one, &run), 0, "collect --tid 2"))
		goto cleanup;
	check_func(run->all, w, 1, 1, 18 * MS, 20 * MS, "w on --tid 2");
	check_func(run->all, x, 1, 1, 2 * MS, 2 * MS, "x on --tid 2");
	ASSERT_EQ(run->nthreads, 1, "one thread seen with --tid");
	profile_run__free(run);
cleanup:
	trace_reader__close(r);
}

/* Runs a subcommand with its stdout in a string; free() it. */
static char *run_command(int (*fn)(int, char **), int argc, char **argv, int *rc)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDOUT_FILENO);
	char *buf = NULL;
	long len;

	if (!tmp || saved < 0)
		return NULL;
	fflush(stdout);
	dup2(fileno(tmp), STDOUT_FILENO);
	*rc = fn(argc, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	len = ftell(tmp);
	buf = calloc(1, len + 1);
	rewind(tmp);
	if (buf && fread(buf, 1, len, tmp) != (size_t)len)
		buf[0] = '\0';
	fclose(tmp);
	return buf;
}

/* The report's header counts lost events per kind and CPU; --ops without ops says so. */
static void test_report_command(void)
{
	char *report[] = {"report", path, NULL};
	char *ops[] = {"report", "--ops", path, NULL};
	char *bad[] = {"report", "/nonexistent.ptg", NULL};
	char *out;
	int rc = -1;

	start();
	ASSERT_EQ(trace_writer__meta(writer, "cmdline", "python3 train.py"), 0, "meta");
	ASSERT_EQ(trace_writer__loss(writer, "py_event", 3, 12), 0, "loss");
	ASSERT_EQ(trace_writer__loss(writer, "cupti_records", UINT32_MAX, 3), 0, "loss");
	enter(1, pyfunc("main", 1), 0);
	leave(1, 2 * MS);
	ASSERT_EQ(trace_writer__close(writer), 0, "writer close");

	out = run_command(cmd_report, 2, report, &rc);
	ASSERT_EQ(rc, 0, "report exit status");
	ASSERT_TRUE(out && strstr(out, "command: python3 train.py\n"), "command line");
	ASSERT_TRUE(out && strstr(out, "function calls: 1 in 1 thread\n"), "calls");
	ASSERT_TRUE(out && strstr(out, "lost events: 15 (py_event 12 on cpu 3, cupti_records 3)\n"),
		    "loss line");
	free(out);
	out = run_command(cmd_report, 3, ops, &rc);
	ASSERT_EQ(rc, 0, "--ops without ops exit status");
	ASSERT_TRUE(out && strstr(out, "no PyTorch dispatcher ops in this trace (the process had "
				       "no libtorch mapped)\n"),
		    "no ops message");
	free(out);
	out = run_command(cmd_report, 2, bad, &rc);
	ASSERT_EQ(rc, 1, "unreadable trace exit status");
	free(out);
}

int main(void)
{
	const char *dir = getenv("TMPDIR");

	snprintf(path, sizeof(path), "%s/ptg-profile-%d.ptg", dir ? dir : "/tmp", getpid());
	test_nested();
	test_recursion();
	test_generator();
	test_ops_folding();
	test_threads();
	test_report_command();
	unlink(path);
	return TEST_DONE();
}
