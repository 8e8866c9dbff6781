/* SPDX-License-Identifier: MIT */
/* Minimal selftest-style assertions: print what was expected and what came. */
#ifndef PTG_TEST_H
#define PTG_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int test_failures;
static int test_checks;

#define ASSERT_TRUE(cond, name)                                                                    \
	({                                                                                         \
		int ___ok = !!(cond);                                                              \
		test_checks++;                                                                     \
		if (!___ok) {                                                                      \
			test_failures++;                                                           \
			fprintf(stderr, "%s:%d: FAIL %s: %s is false\n", __FILE__, __LINE__, name, \
				#cond);                                                            \
		}                                                                                  \
		___ok;                                                                             \
	})

#define ASSERT_EQ(actual, expected, name)                                                          \
	({                                                                                         \
		long long ___a = (long long)(actual), ___e = (long long)(expected);                \
		test_checks++;                                                                     \
		if (___a != ___e) {                                                                \
			test_failures++;                                                           \
			fprintf(stderr, "%s:%d: FAIL %s: expected %lld, got %lld\n", __FILE__,     \
				__LINE__, name, ___e, ___a);                                       \
		}                                                                                  \
		___a == ___e;                                                                      \
	})

#define ASSERT_NEAR(actual, expected, eps, name)                                                   \
	({                                                                                         \
		double ___a = (actual), ___e = (expected);                                         \
		int ___ok = ___a - ___e <= (eps) && ___e - ___a <= (eps);                          \
		test_checks++;                                                                     \
		if (!___ok) {                                                                      \
			test_failures++;                                                           \
			fprintf(stderr, "%s:%d: FAIL %s: expected %g, got %g\n", __FILE__,         \
				__LINE__, name, ___e, ___a);                                       \
		}                                                                                  \
		___ok;                                                                             \
	})

#define ASSERT_STREQ(actual, expected, name)                                                       \
	({                                                                                         \
		const char *___a = (actual), *___e = (expected);                                   \
		int ___ok = ___a && ___e && strcmp(___a, ___e) == 0;                               \
		test_checks++;                                                                     \
		if (!___ok) {                                                                      \
			test_failures++;                                                           \
			fprintf(stderr, "%s:%d: FAIL %s: expected \"%s\", got \"%s\"\n", __FILE__, \
				__LINE__, name, ___e ? ___e : "(null)", ___a ? ___a : "(null)");   \
		}                                                                                  \
		___ok;                                                                             \
	})

/* Ends main(): a summary line and the exit status. */
#define TEST_DONE()                                                                                \
	({                                                                                         \
		printf("%s: %d checks, %d failed\n", __FILE__, test_checks, test_failures);        \
		test_failures ? 1 : 0;                                                             \
	})

#endif /* PTG_TEST_H */
