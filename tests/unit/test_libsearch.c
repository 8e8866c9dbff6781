// SPDX-License-Identifier: MIT
/*
 * The loader's search order as libsearch builds it, on this process: a
 * library built here with a DT_RUNPATH (and one with a DT_RPATH) whose
 * entries use $ORIGIN, ${ORIGIN}, $LIB and $PLATFORM, plus a relative entry
 * and an unknown token the loader drops, must lead exactly to the copies of
 * a test library in the folders those entries name, in the entries' order
 * (each one's glibc-hwcaps subfolders first);
 * an entry of 32 $LIB (2^32 expansions, were they not bounded) ends at once.
 * Needs a C compiler to build the library; without one that part is skipped
 * with a line that says so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/libsearch.h"
#include "test.h"

#define LIB "libptg-search-test.so"

/* folders under the temporary root, as RUNPATH names them */
static const char *const runpath =
    "$ORIGIN/o:${ORIGIN}/$LIB/l:$ORIGIN/$PLATFORM/p:rel:"
    "$ORIGIN/$BOGUS/b:$ORIGIN/o:"
    "$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB"
    "$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB$LIB";
static const char *const found_dirs[] = {"o/glibc-hwcaps/x86-64-v3", "o", "lib/x86_64-linux-gnu/l",
					 "lib64/l", "x86_64/p"};
#define NFOUND (int)(sizeof(found_dirs) / sizeof(found_dirs[0]))
static const char *const decoys[] = {"rel", "b", "$BOGUS/b"};

struct seen {
	char dirs[16][4096];
	int n;
};

static int collect(void *ctx, const char *dir, const char *file)
{
	struct seen *s = ctx;

	if (s->n < 16 && !strcmp(file, LIB))
		snprintf(s->dirs[s->n], sizeof(s->dirs[0]), "%s", dir);
	s->n++;
	return 0;
}

static int touch(const char *root, const char *dir)
{
	char cmd[4 * 4096 + 64];

	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s' && : > '%s/%s/%s'", root, dir, root, dir, LIB);
	return system(cmd);
}

static void check(const char *root, const char *dtags, const char *what)
{
	char obj[4200], cmd[16384], want[4200];
	struct libsearch *s;
	struct seen seen = {};

	snprintf(obj, sizeof(obj), "%s/obj-%s.so", root, what);
	snprintf(cmd, sizeof(cmd),
		 "echo 'int f(void){return 0;}' | cc -x c -shared -o '%s' - '-Wl,%s,-rpath,%s'",
		 obj, dtags, runpath);
	if (!ASSERT_EQ(system(cmd), 0, what))
		return;
	if (!ASSERT_EQ(libsearch__open(getpid(), &s), 0, what))
		return;
	ASSERT_EQ(libsearch__add_object(s, obj, obj), 0, what);
	libsearch__find(s, LIB, collect, &seen);
	ASSERT_EQ(seen.n, NFOUND, what);
	for (int i = 0; i < NFOUND && i < seen.n; i++) {
		snprintf(want, sizeof(want), "%s/%s", root, found_dirs[i]);
		ASSERT_STREQ(seen.dirs[i], want, what);
	}
	seen.n = 0;
	libsearch__find(s, "libptg-search-*.so", collect, &seen);
	ASSERT_EQ(seen.n, NFOUND, "as a pattern");
	libsearch__free(s);
}

static void check_clean(void)
{
	static const char *const cases[][2] = {
	    {"/a/torch/lib/../../nvidia/x/lib/libcuda.so.1", "/a/nvidia/x/lib/libcuda.so.1"},
	    {"/a/./b//c/", "/a/b/c"},
	    {"/../..", "/"},
	    {"/a/..", "/"},
	    {"/", "/"},
	    {"/a/b/../../../c", "/c"},
	    {"/.../..x/x..", "/.../..x/x.."},
	    {"rel/../x", "rel/../x"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[256];

		snprintf(buf, sizeof(buf), "%s", cases[i][0]);
		clean_path(buf);
		ASSERT_STREQ(buf, cases[i][1], cases[i][0]);
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char root[4096], cmd[4200];

	check_clean();
	snprintf(root, sizeof(root), "%s/ptg-libsearch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (system("cc --version >/dev/null 2>&1")) {
		printf("no C compiler: RUNPATH expansion not checked\n");
		return TEST_DONE();
	}
	if (!ASSERT_TRUE(mkdtemp(root) != NULL, "mkdtemp"))
		return TEST_DONE();
	for (size_t i = 0; i < sizeof(found_dirs) / sizeof(found_dirs[0]); i++)
		ASSERT_EQ(touch(root, found_dirs[i]), 0, found_dirs[i]);
	for (size_t i = 0; i < sizeof(decoys) / sizeof(decoys[0]); i++)
		ASSERT_EQ(touch(root, decoys[i]), 0, decoys[i]);
	check(root, "--enable-new-dtags", "RUNPATH");
	check(root, "--disable-new-dtags", "RPATH");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ASSERT_EQ(system(cmd), 0, "cleanup");
	return TEST_DONE();
}
