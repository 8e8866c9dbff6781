// SPDX-License-Identifier: MIT
/*
 * The Chrome exporter's number and string writers (chrome_json.c), which
 * format without printf for speed: the same text printf and the escaping
 * rules give, at the edges.
 */
#include <inttypes.h>
#include <stdint.h>

#include "chrome/chrome_json.h"
#include "test.h"

static void check_us(uint64_t ns)
{
	struct buf b = {};
	char want[48];

	snprintf(want, sizeof(want), "%" PRIu64 ".%03u", ns / 1000, (unsigned int)(ns % 1000));
	jb_us(&b, ns);
	ASSERT_STREQ(b.text, want, "jb_us");
	buf__free(&b);
}

static void check_int(int64_t v)
{
	struct buf b = {};
	char want[32];

	snprintf(want, sizeof(want), "%" PRId64, v);
	jb_int(&b, v);
	ASSERT_STREQ(b.text, want, "jb_int");
	buf__free(&b);
}

static void check_json(const char *s, const char *want)
{
	struct buf b = {};

	jb_json(&b, s);
	ASSERT_STREQ(b.text, want, s);
	buf__free(&b);
}

int main(void)
{
	static const uint64_t us[] = {
	    0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1010, 123456789, 2766112012167, UINT64_MAX};
	static const int64_t ints[] = {0,	  1,	     -1,	9,	   10,	     -10,
				       536871465, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX};
	size_t i;

	for (i = 0; i < sizeof(us) / sizeof(us[0]); i++)
		check_us(us[i]);
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		check_int(ints[i]);
	check_json("", "\"\"");
	check_json("app.py(12): f", "\"app.py(12): f\"");
	check_json("a\"b\\c", "\"a\\\"b\\\\c\"");
	check_json("tab\there\n", "\"tab\\u0009here\\u000a\"");
	check_json("caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\"");
	/* a byte that starts no sequence, and a sequence cut by the end */
	check_json("x\xffy\xc3", "\"x\xef\xbf\xbdy\xef\xbf\xbd\"");
	return TEST_DONE();
}
