// SPDX-License-Identifier: MIT
/*
 * The one list of loss kinds (enum ptg_lost): every kind has one name that
 * maps back to it, and a trace written by kind reads back with the same
 * kinds, counts and names; a name outside the list keeps its name.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "trace/trace.h"

static void test_names(void)
{
	ASSERT_TRUE(ptg_lost_name(PTG_LOST_OTHER) == NULL, "OTHER has no name");
	ASSERT_TRUE(ptg_lost_name(PTG_LOST_NR) == NULL, "past the end has no name");
	ASSERT_EQ(ptg_lost_parse("no_such_loss"), PTG_LOST_OTHER, "unknown name");
	for (int k = 1; k < PTG_LOST_NR; k++) {
		const char *name = ptg_lost_name((enum ptg_lost)k);

		if (!ASSERT_TRUE(name != NULL, "every kind has a name"))
			continue;
		ASSERT_TRUE(strlen(name) < sizeof(((struct ptg_loss *)0)->what), name);
		ASSERT_EQ(ptg_lost_parse(name), k, name);
	}
	ASSERT_STREQ(ptg_lost_name(PTG_LOST_PY_EVENT), "py_event", "stored name");
	ASSERT_STREQ(ptg_lost_name(PTG_LOST_TRACE_TRUNCATED), "trace_truncated", "stored name");
}

static void test_round_trip(void)
{
	struct trace_writer *w;
	struct trace_reader *r;
	const struct ptg_loss *l;
	const char *dir = getenv("TMPDIR");
	char path[256];
	size_t n;

	snprintf(path, sizeof(path), "%s/ptg-lost-%d.ptg", dir ? dir : "/tmp", getpid());
	if (!ASSERT_EQ(trace_writer__open(path, &w), 0, "open writer"))
		return;
	for (int k = 1; k < PTG_LOST_NR; k++)
		ASSERT_EQ(trace_writer__lost(w, (enum ptg_lost)k, k == 1 ? 3 : UINT32_MAX, 100 + k),
			  0, "trace_writer__lost");
	/* the same counter again adds up, by kind or by its name */
	ASSERT_EQ(trace_writer__lost(w, PTG_LOST_CUDA_EVENT, UINT32_MAX, 5), 0, "again");
	ASSERT_EQ(trace_writer__loss(w, "cuda_event", UINT32_MAX, 1), 0, "again by name");
	ASSERT_EQ(trace_writer__loss(w, "from_the_future", UINT32_MAX, 9), 0, "unknown name");
	ASSERT_EQ(trace_writer__lost(w, PTG_LOST_OTHER, UINT32_MAX, 1), -EINVAL, "OTHER refused");
	l = trace_writer__losses(w, &n);
	ASSERT_EQ(n, PTG_LOST_NR, "writer's counters before close");
	ASSERT_EQ(n ? l[n - 1].kind : 99, PTG_LOST_OTHER, "writer's last counter: the unknown one");
	ASSERT_EQ(n ? l[0].kind : 99, PTG_LOST_PY_EVENT, "writer's first counter");
	if (!ASSERT_EQ(trace_writer__close(w), 0, "close writer"))
		return;
	if (!ASSERT_EQ(trace_reader__open(path, &r, NULL, 0), 0, "open reader"))
		return;
	l = trace_reader__losses(r, &n);
	ASSERT_EQ(n, PTG_LOST_NR, "counters: one per kind and the unknown one");
	for (size_t i = 0; i < n; i++) {
		if (l[i].kind == PTG_LOST_OTHER) {
			ASSERT_STREQ(ptg_loss_name(&l[i]), "from_the_future", "unknown kept");
			ASSERT_EQ(l[i].count, 9, "unknown count");
			continue;
		}
		ASSERT_STREQ(ptg_loss_name(&l[i]), ptg_lost_name((enum ptg_lost)l[i].kind),
			     "name of kind");
		ASSERT_EQ(l[i].cpu, l[i].kind == 1 ? 3 : UINT32_MAX, "cpu");
		ASSERT_EQ(l[i].count, 100 + l[i].kind + (l[i].kind == PTG_LOST_CUDA_EVENT ? 6 : 0),
			  ptg_loss_name(&l[i]));
	}
	trace_reader__close(r);
	unlink(path);
}

int main(void)
{
	test_names();
	test_round_trip();
	return TEST_DONE();
}
