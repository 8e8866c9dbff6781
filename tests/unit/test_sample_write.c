// SPDX-License-Identifier: MIT
/* Folded output of a hand-built sample_set: merging, ordering, names, process and thread frames. */
#include <stdio.h>
#include <stdlib.h>

#include "sample/sample_write.h"
#include "test.h"

static const struct sample_func funcs[] = {
    {"main", "app.py", 1, SAMPLE_FUNC_PYTHON},
    {"f;g", "app.py", 10, SAMPLE_FUNC_PYTHON}, /* ';' would split the frame */
    {"memcpy", "/lib/libc.so.6", 0, SAMPLE_FUNC_NATIVE},
};

static const struct sample_frame frames[] = {
    {.func = 0, .line = 3},
    {.func = 1, .line = 12},
    {.func = 1, .line = 13}, /* another line of f;g: one folded frame */
    {.func = 2, .addr = 0x1234},
};

static const uint32_t stack_a[] = {0, 1}, stack_b[] = {0, 2, 3}, stack_c[] = {0};

static const struct sample_proc procs[] = {
    {42, "python3", "CPython 3.11.2"},
};

static const struct sample_row rows[] = {
    {0, 42, "worker", 2, 20, 2, stack_a},
    {0, 43, "other", 1, 10, 3, stack_b},
    {0, 42, "worker", 1, 5, 1, stack_c},
};

static const struct sample_set set = {
    .kind = PTG_SAMPLE_CPU,
    .period_ns = 10,
    .rows = rows,
    .nrows = 3,
    .funcs = funcs,
    .nfuncs = 3,
    .frames = frames,
    .nframes = 4,
    .procs = procs,
    .nprocs = 1,
};

/* pid 1 of a container, 4242 here */
static const struct sample_proc contained[] = {
    {4242, "python3", "CPython 3.13.5", 1},
};

static char *folded_of(const struct sample_set *s, bool threads)
{
	struct sample_write_opts o = {.format = SAMPLE_FMT_FOLDED, .threads = threads};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	ASSERT_EQ(sample_write_folded(s, &o, f), 0, "write");
	fclose(f);
	return buf;
}

static char *folded(bool threads)
{
	return folded_of(&set, threads);
}

int main(void)
{
	char *out = folded(false);

	ASSERT_STREQ(out,
		     "python3 [42];main (app.py:1) 5\n"
		     "python3 [42];main (app.py:1);f:g (app.py:10) 20\n"
		     "python3 [42];main (app.py:1);f:g (app.py:10);memcpy 10\n",
		     "folded, lines merged, threads merged");
	free(out);
	out = folded(true);
	ASSERT_STREQ(out,
		     "python3 [42];other [43];main (app.py:1);f:g (app.py:10);memcpy 10\n"
		     "python3 [42];worker [42];main (app.py:1) 5\n"
		     "python3 [42];worker [42];main (app.py:1);f:g (app.py:10) 20\n",
		     "folded by thread");
	free(out);
	ASSERT_EQ(sample_format_of("x.svg"), SAMPLE_FMT_SVG, "svg by name");
	ASSERT_EQ(sample_format_of("x.folded"), SAMPLE_FMT_FOLDED, "folded by name");
	ASSERT_EQ(sample_format_of("-"), SAMPLE_FMT_FOLDED, "stdout is folded");
	ASSERT_EQ(sample_format_of("x.pb.gz"), SAMPLE_FMT_PPROF, "pprof by name");
	{
		struct sample_set c = set;

		c.procs = contained;
		c.nrows = 1;
		out = folded_of(&c, false);
		ASSERT_STREQ(out,
			     "python3 [4242, container pid 1];main (app.py:1);f:g (app.py:10) 20\n",
			     "a process in a container: both pids");
		free(out);
	}
	return TEST_DONE();
}
