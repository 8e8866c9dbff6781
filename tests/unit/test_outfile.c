// SPDX-License-Identifier: MIT
/*
 * Output files: a planted symlink is replaced, not followed; the file is new,
 * mode 0600; an abort leaves the previous file and no temporary file behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"
#include "test.h"

static char dir[] = "/tmp/ptg-outfile-XXXXXX";

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void put(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	path_of(p, sizeof(p), name);
	f = fopen(p, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* The file's text, "" when it cannot be read. */
static const char *get(const char *name)
{
	static char buf[256];
	char p[256];
	size_t n = 0;
	FILE *f;

	path_of(p, sizeof(p), name);
	f = fopen(p, "r");
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static int write_text(const char *name, const char *text, bool commit)
{
	struct outfile *of;
	char p[256];
	int err;

	path_of(p, sizeof(p), name);
	err = outfile__open(p, &of);
	if (err)
		return err;
	err = outfile__write(of, text, strlen(text));
	if (!commit) {
		outfile__abort(of);
		return err;
	}
	return err ?: outfile__commit(of);
}

static void test_symlink_replaced(void)
{
	char victim[256], link[256];
	struct stat st;

	put("victim", "precious\n");
	path_of(victim, sizeof(victim), "victim");
	path_of(link, sizeof(link), "out");
	ASSERT_EQ(symlink(victim, link), 0, "plant a symlink");
	ASSERT_EQ(write_text("out", "new\n", true), 0, "write through the planted link");
	ASSERT_STREQ(get("victim"), "precious\n", "the link's target is untouched");
	ASSERT_STREQ(get("out"), "new\n", "the output has the new text");
	ASSERT_EQ(lstat(link, &st), 0, "lstat output");
	ASSERT_TRUE(S_ISREG(st.st_mode), "the output is a regular file, not the link");
	ASSERT_EQ(st.st_mode & 07777, 0600, "mode 0600");
	ASSERT_EQ(entries(), 2, "no temporary file left");
}

static void test_abort_keeps_previous(void)
{
	struct stat st;
	char p[256];

	put("prev", "old\n");
	ASSERT_EQ(write_text("prev", "half", false), 0, "aborted write");
	ASSERT_STREQ(get("prev"), "old\n", "an abort leaves the previous file");
	ASSERT_EQ(write_text("fresh", "x", false), 0, "aborted new file");
	path_of(p, sizeof(p), "fresh");
	ASSERT_EQ(lstat(p, &st), -1, "an aborted new file does not appear");
	ASSERT_EQ(entries(), 3, "no temporary file left after aborts");
}

static void test_stream(void)
{
	struct outfile *of;
	char p[256];
	FILE *f;

	path_of(p, sizeof(p), "stream");
	ASSERT_EQ(outfile__open(p, &of), 0, "open");
	f = outfile__stream(of);
	ASSERT_TRUE(f != NULL, "stream");
	if (!f) {
		outfile__abort(of);
		return;
	}
	fprintf(f, "%d lines\n", 2);
	ASSERT_EQ(outfile__commit(of), 0, "commit a stream");
	ASSERT_STREQ(get("stream"), "2 lines\n", "what the stream wrote");
}

static void test_refusals(void)
{
	struct outfile *of = NULL;
	char p[256], q[256];

	path_of(p, sizeof(p), "sub");
	mkdir(p, 0700);
	ASSERT_EQ(outfile__open(p, &of), -EISDIR, "a directory is refused before writing");
	path_of(p, sizeof(p), "sub/");
	ASSERT_EQ(outfile__open(p, &of), -EISDIR, "a name ending in /");
	path_of(p, sizeof(p), "nodir/out");
	ASSERT_EQ(outfile__open(p, &of), -ENOENT, "a missing directory");
	ASSERT_EQ(outfile__open("", &of), -ENOENT, "an empty name");

	path_of(p, sizeof(p), "victim");
	path_of(q, sizeof(q), "hard");
	ASSERT_EQ(link(p, q), 0, "hard link");
	ASSERT_TRUE(outfile_is_input(p, p), "the same name is the input");
	ASSERT_TRUE(outfile_is_input(q, p), "a hard link to the input is the input");
	path_of(q, sizeof(q), "link-to-victim");
	ASSERT_EQ(symlink(p, q), 0, "symlink");
	ASSERT_TRUE(!outfile_is_input(q, p), "a symlink to the input is replaced, not written");
	ASSERT_TRUE(outfile_is_input(p, q), "the target of an input that is a symlink");
	path_of(q, sizeof(q), "missing");
	ASSERT_TRUE(!outfile_is_input(q, p), "a new output is no input");
}

/* Only a regular file named as outfile__open names them, for that name, is found. */
static void test_leftover(void)
{
	static const char *const others[] = {
	    ".run.ptg.0123456789abcdeg.tmp",  ".run.ptg.0123456789abcde.tmp",
	    ".run.ptgx.0123456789abcdef.tmp", ".other.ptg.0123456789abcdef.tmp",
	    "run.ptg.0123456789abcdef.tmp",   ".run.ptg.0123456789abcdef.tmpx",
	};
	char p[256], link[256], found[512] = "", expect[512];
	struct outfile *of;

	path_of(p, sizeof(p), "run.ptg");
	ASSERT_TRUE(!outfile_leftover(p, found, sizeof(found)), "none in an empty directory");
	for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++)
		put(others[i], "x");
	path_of(link, sizeof(link), ".run.ptg.fedcba9876543210.tmp");
	ASSERT_EQ(symlink("/etc/passwd", link), 0, "symlink");
	ASSERT_TRUE(!outfile_leftover(p, found, sizeof(found)), "look-alikes and a symlink");
	/* a writer that has not committed yet, as a killed one leaves it */
	if (ASSERT_EQ(outfile__open(p, &of), 0, "open")) {
		ASSERT_TRUE(outfile_leftover(p, found, sizeof(found)), "a temporary file found");
		snprintf(expect, sizeof(expect), "%s/.run.ptg.", dir);
		ASSERT_TRUE(!strncmp(found, expect, strlen(expect)) &&
				strlen(found) == strlen(expect) + 16 + 4,
			    "its path");
		outfile__abort(of);
	}
	ASSERT_TRUE(!outfile_leftover(p, found, sizeof(found)), "none after the abort");
	for (size_t i = 0; i < sizeof(others) / sizeof(*others); i++) {
		path_of(p, sizeof(p), others[i]);
		unlink(p);
	}
	unlink(link);
}

int main(void)
{
	char cmd[300];
	int ret;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_symlink_replaced();
	test_abort_keeps_previous();
	test_stream();
	test_refusals();
	test_leftover();
	ret = TEST_DONE();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return ret;
}
