// SPDX-License-Identifier: MIT
/*
 * The log function: the prefix of each level, verbosity, the usage shape,
 * the context word of an older "who", and libbpf's messages: dropped,
 * kept for log_libbpf_flush(), or printed at once with -v, including a real
 * warning of libbpf itself.
 */
#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "test.h"

static char *buf;
static size_t len;
static FILE *mem;

/* Everything logged since the last call, as one string (valid until the next call). */
static const char *take(void)
{
	static char *last;

	fclose(mem);
	free(last);
	last = buf;
	mem = open_memstream(&buf, &len);
	log_set_stream(mem);
	return last ? last : "";
}

static libbpf_print_fn_t callback(void)
{
	libbpf_print_fn_t fn = libbpf_set_print(NULL);

	libbpf_set_print(fn);
	return fn;
}

static void libbpf_says(enum libbpf_print_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	callback()(level, fmt, ap);
	va_end(ap);
}

static void test_levels(void)
{
	log_set_verbosity(PTG_NORMAL);
	pr_err("record: bad PID '%s'", "12x");
	ASSERT_STREQ(take(), "ptrace-gpu: record: bad PID '12x'\n", "error");
	pr_warn("pid %d: %s", 7, "gone");
	ASSERT_STREQ(take(), "ptrace-gpu: warning: pid 7: gone\n", "warning");
	pr_info("wrote %s", "a.ptg");
	ASSERT_STREQ(take(), "ptrace-gpu: wrote a.ptg\n", "info");
	pr_debug("hidden");
	ASSERT_STREQ(take(), "", "no debug by default");
	pr_err("one newline\n");
	ASSERT_STREQ(take(), "ptrace-gpu: one newline\n", "a trailing newline is not doubled");
	pr_warn("two\nlines");
	ASSERT_STREQ(take(), "ptrace-gpu: warning: two\nptrace-gpu: warning: lines\n",
		     "each line prefixed");
	pr_usage("report", "unknown option '%s'", "--x");
	ASSERT_STREQ(take(),
		     "ptrace-gpu report: unknown option '--x' (see ptrace-gpu report --help)\n",
		     "usage");
}

static void test_verbosity(void)
{
	log_set_verbosity(PTG_QUIET);
	pr_info("info");
	pr_debug("debug");
	ASSERT_STREQ(take(), "", "quiet: no info");
	pr_err("e");
	pr_warn("w");
	ASSERT_STREQ(take(), "ptrace-gpu: e\nptrace-gpu: warning: w\n", "quiet: errors, warnings");
	log_set_verbosity(PTG_VERBOSE);
	pr_debug("debug %d", 1);
	ASSERT_STREQ(take(), "ptrace-gpu: debug 1\n", "verbose: debug");
	ASSERT_EQ(log_verbosity(), PTG_VERBOSE, "verbosity read back");
	log_set_verbosity(PTG_NORMAL);
}

static void test_context(void)
{
	ASSERT_STREQ(log_context("ptrace-gpu report"), "report", "'ptrace-gpu CMD'");
	ASSERT_STREQ(log_context("ptrace-gpu: idle"), "idle", "'ptrace-gpu: CMD'");
	ASSERT_STREQ(log_context("ptrace-gpu"), "", "plain");
	ASSERT_STREQ(log_context("slice"), "slice", "a word of its own");
}

static void test_libbpf(void)
{
	char big[6000];
	const char *s;
	struct bpf_object *obj;

	log_init();
	log_set_verbosity(PTG_NORMAL);
	libbpf_says(LIBBPF_DEBUG, "libbpf: loading %s\n", "x.bpf.o");
	libbpf_says(LIBBPF_INFO, "libbpf: info\n");
	libbpf_says(LIBBPF_WARN, "libbpf: prog '%s': failed to attach\n", "p");
	ASSERT_STREQ(take(), "", "normal: nothing at once");
	log_libbpf_flush();
	ASSERT_STREQ(take(), "ptrace-gpu: libbpf: prog 'p': failed to attach\n",
		     "flush: the warning only, prefixed once");
	log_libbpf_flush();
	ASSERT_STREQ(take(), "", "flushed once");

	for (int i = 0; i < LOG_LIBBPF_KEEP + 2; i++)
		libbpf_says(LIBBPF_WARN, "libbpf: w%d\n", i);
	log_libbpf_flush();
	s = take();
	ASSERT_TRUE(!strstr(s, "w1\n") && strstr(s, "w2\n") && strstr(s, "w9\n"),
		    "the last ones kept");
	ASSERT_TRUE(strstr(s, "w2\n") < strstr(s, "w9\n"), "oldest first");

	libbpf_says(LIBBPF_WARN, "libbpf: expected\n");
	log_libbpf_discard();
	log_libbpf_flush();
	ASSERT_STREQ(take(), "", "discarded");

	memset(big, 'a', sizeof(big) - 2);
	big[sizeof(big) - 2] = 'Z';
	big[sizeof(big) - 1] = '\0';
	libbpf_says(LIBBPF_WARN, "%s", big);
	log_libbpf_flush();
	s = take();
	ASSERT_TRUE(!strncmp(s, "ptrace-gpu: libbpf: [...] aaa", 29), "a long one keeps its end");
	ASSERT_TRUE(strlen(s) < 4200 && !strcmp(s + strlen(s) - 2, "Z\n"), "its end");

	log_set_verbosity(PTG_VERBOSE);
	libbpf_says(LIBBPF_DEBUG, "libbpf: loading %s\n", "x.bpf.o");
	ASSERT_STREQ(take(), "ptrace-gpu: libbpf: loading x.bpf.o\n", "verbose: at once");
	log_set_verbosity(PTG_NORMAL);

	/* a real one: libbpf warns when it cannot open an object file */
	obj = bpf_object__open_file("/nonexistent/ptg-test.bpf.o", NULL);
	ASSERT_TRUE(!obj, "no such object");
	ASSERT_STREQ(take(), "", "libbpf's warning kept");
	log_libbpf_flush();
	s = take();
	ASSERT_TRUE(!strncmp(s, "ptrace-gpu: libbpf: ", 20) && strstr(s, "/nonexistent/ptg-test"),
		    "libbpf's own warning, flushed");
	if (!strstr(s, "/nonexistent/ptg-test"))
		fprintf(stderr, "got: %s\n", s);
}

int main(void)
{
	mem = open_memstream(&buf, &len);
	log_set_stream(mem);
	test_levels();
	test_verbosity();
	test_context();
	test_libbpf();
	log_set_stream(NULL);
	return TEST_DONE();
}
