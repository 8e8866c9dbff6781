// SPDX-License-Identifier: MIT
/*
 * The stack trie on its own (stacks.h), with no trace behind it: named
 * stacks merge, folded lines come sorted with exact weights, frame ids
 * walk back out of foreach_stack, a namer names ids it did not create,
 * and stacks past max_stack fold into one cut frame that says how many.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/stacks.h"
#include "test.h"

struct lines {
	char buf[1024];
	size_t len;
	unsigned int calls;
};

static int add_line(void *ctx, const char *folded, uint64_t weight)
{
	struct lines *l = ctx;
	int n = snprintf(l->buf + l->len, sizeof(l->buf) - l->len, "%s %llu\n", folded,
			 (unsigned long long)weight);

	if (n < 0 || (size_t)n >= sizeof(l->buf) - l->len)
		return -ENOSPC;
	l->len += (size_t)n;
	l->calls++;
	return 0;
}

struct weights {
	uint64_t sum;
	unsigned int stacks, max_depth;
};

static int add_weight(void *ctx, const uint32_t *frames, unsigned int depth, uint64_t weight)
{
	struct weights *w = ctx;

	(void)frames;
	w->sum += weight;
	w->stacks++;
	if (depth > w->max_depth)
		w->max_depth = depth;
	return 0;
}

static char *name_of(const void *ctx, uint32_t frame)
{
	char *s = NULL;

	return asprintf(&s, "%s%u", (const char *)ctx, frame) < 0 ? NULL : s;
}

static enum stacks_kind kind_of(const void *ctx, uint32_t frame)
{
	(void)ctx;
	return frame % 2 ? STACKS_KIND_KERNEL : STACKS_KIND_OP;
}

static void test_named(void)
{
	const char *a[] = {"main", "f;g", "leaf\n"}, *b[] = {"main", "alpha"};
	struct lines l = {};
	struct weights w = {};
	struct stacks st;

	if (!ASSERT_EQ(stacks__init(&st), 0, "init"))
		return;
	ASSERT_EQ(stacks__add_named(&st, a, 3, 5), 0, "add a");
	ASSERT_EQ(stacks__add_named(&st, b, 2, 7), 0, "add b");
	ASSERT_EQ(stacks__add_named(&st, a, 3, 11), 0, "add a again");
	ASSERT_EQ(stacks__add_named(&st, a, 1, 2), 0, "add main alone");
	ASSERT_EQ(stacks__total(&st), 25, "total");
	ASSERT_EQ(stacks__foreach_folded(&st, add_line, &l), 0, "folded");
	/* sorted by name at each level; ';' and newlines cannot split a frame */
	ASSERT_STREQ(l.buf, "main 2\nmain;alpha 7\nmain;f:g;leaf  16\n", "folded lines");
	ASSERT_EQ(l.calls, 3, "one line per distinct stack");
	ASSERT_EQ(stacks__foreach_stack(&st, add_weight, &w), 0, "foreach");
	ASSERT_EQ(w.sum, 25, "weights walked");
	ASSERT_EQ(w.stacks, 3, "stacks walked");
	ASSERT_EQ(w.max_depth, 3, "deepest stack");
	ASSERT_EQ(stacks__kind(&st, 1), STACKS_KIND_PYTHON, "no namer: Python palette");
	stacks__totals(&st);
	ASSERT_EQ(st.nodes[STACKS_ROOT].total, 25, "root total");
	stacks__fini(&st);
}

static void test_namer(void)
{
	const struct stacks_namer namer = {.format = name_of, .kind = kind_of, .ctx = "sym"};
	struct lines l = {};
	struct stacks st;
	uint32_t n1, n2, n3;

	if (!ASSERT_EQ(stacks__init(&st), 0, "init"))
		return;
	ASSERT_EQ(stacks__child(&st, STACKS_ROOT, 3, &n1), 0, "child 3");
	ASSERT_EQ(stacks__child(&st, n1, 4, &n2), 0, "child 4");
	ASSERT_EQ(stacks__child(&st, STACKS_ROOT, 3, &n3), 0, "child 3 again");
	ASSERT_EQ(n3, n1, "same (parent, frame): same node");
	st.nodes[n2].self = 9;
	st.nodes[n1].self = 1;
	ASSERT_EQ(stacks__foreach_folded(&st, add_line, &l), 0, "folded, no namer");
	ASSERT_STREQ(l.buf, "[symbol 3] 1\n[symbol 3];[symbol 4] 9\n", "ids without a namer");
	stacks__fini(&st);

	memset(&l, 0, sizeof(l));
	if (!ASSERT_EQ(stacks__init(&st), 0, "init"))
		return;
	stacks__set_namer(&st, &namer);
	ASSERT_EQ(stacks__child(&st, STACKS_ROOT, 3, &n1), 0, "child 3");
	ASSERT_EQ(stacks__child(&st, n1, 0, &n2), 0, "child 0");
	st.nodes[n2].self = 4;
	ASSERT_EQ(stacks__foreach_folded(&st, add_line, &l), 0, "folded, namer");
	ASSERT_STREQ(l.buf, "sym3;sym0 4\n", "ids named by the namer");
	ASSERT_EQ(stacks__kind(&st, 3), STACKS_KIND_KERNEL, "kind from the namer");
	ASSERT_EQ(stacks__kind(&st, 4), STACKS_KIND_OP, "kind from the namer, even");
	stacks__fini(&st);
}

static void test_cut(void)
{
	const char *deep[8] = {"a", "b", "c", "d", "e", "f", "g", "h"};
	struct lines l = {};
	struct stacks st;

	if (!ASSERT_EQ(stacks__init(&st), 0, "init"))
		return;
	stacks__set_max_stack(&st, 2);
	ASSERT_EQ(stacks__add_named(&st, deep, 5, 1), 0, "5 frames");
	ASSERT_EQ(stacks__add_named(&st, deep, 8, 2), 0, "8 frames");
	ASSERT_EQ(stacks__add_named(&st, deep, 2, 4), 0, "2 frames");
	ASSERT_EQ(stacks__add_named(&st, deep, 3, 8), 0, "3 frames");
	ASSERT_EQ(stacks__foreach_folded(&st, add_line, &l), 0, "folded");
	ASSERT_STREQ(l.buf, "a;b 4\na;b;[... 1 to 6 frames cut] 11\n", "cut stacks merge");
	ASSERT_EQ(stacks__total(&st), 15, "cut keeps every weight");
	stacks__fini(&st);
}

static int print_line(void *ctx, const char *folded, uint64_t weight)
{
	fprintf(ctx, "%s %llu\n", folded, (unsigned long long)weight);
	return 0;
}

static int line_frames(const char *line, const char *end)
{
	int n = 1;

	for (const char *p = line; p < end; p++)
		n += *p == ';';
	return n;
}

/*
 * Stacks deeper than max_stack keep their outermost frames and fold the rest
 * into one frame that counts them, however deep: a line never holds more
 * than max_stack + 1 frames, and stacks of several depths share the frame.
 */
static void test_max_stack(void)
{
	static const char *frames[5000];
	struct stacks st;
	char *buf = NULL;
	size_t len = 0;
	int lines = 0, widest = 0;
	FILE *f;

	for (int i = 0; i < 5000; i++)
		frames[i] = i ? "rec" : "main";
	if (!ASSERT_EQ(stacks__init(&st), 0, "init"))
		return;
	stacks__set_max_stack(&st, 10);
	/* every depth from 1 to 5000, as a recursion that unwinds */
	for (unsigned int d = 1; d <= 5000; d++)
		ASSERT_EQ(stacks__add_named(&st, frames, d, 1), 0, "add");
	f = open_memstream(&buf, &len);
	if (ASSERT_TRUE(f != NULL, "memstream")) {
		ASSERT_EQ(stacks__foreach_folded(&st, print_line, f), 0, "write folded");
		fclose(f);
	}
	for (const char *s = buf, *nl; s && (nl = strchr(s, '\n')); s = nl + 1) {
		int n = line_frames(s, nl);

		lines++;
		widest = n > widest ? n : widest;
	}
	/* depths 1 to 10 as they are, 11 to 5000 in one line */
	ASSERT_EQ(lines, 11, "lines");
	ASSERT_EQ(widest, 11, "frames in the widest line");
	ASSERT_TRUE(buf && strstr(buf, ";rec;[... 1 to 4990 frames cut] 4990\n") != NULL,
		    "one frame for what is cut, with how many and the weight of all");
	free(buf);
	stacks__fini(&st);
}

int main(void)
{
	test_named();
	test_namer();
	test_cut();
	test_max_stack();
	return TEST_DONE();
}
