// SPDX-License-Identifier: MIT
/* The pprof encoder against bytes computed by hand from the protobuf wire format. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/pprof.h"
#include "test.h"

static int bytes_eq(const struct buf *b, const uint8_t *want, size_t n, const char *name)
{
	bool same = !b->err && b->len == n && !memcmp(b->data, want, n);

	test_checks++;
	if (same)
		return 1;
	test_failures++;
	fprintf(stderr, "FAIL %s: expected %zu bytes:", name, n);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, " %02x", want[i]);
	fprintf(stderr, "\n  got %zu bytes (err %d):", b->len, b->err);
	for (size_t i = 0; i < b->len; i++)
		fprintf(stderr, " %02x", b->data[i]);
	fprintf(stderr, "\n");
	return 0;
}

#define EXPECT_BYTES(b, name, ...)                                                                 \
	({                                                                                         \
		static const uint8_t ___w[] = {__VA_ARGS__};                                       \
		bytes_eq(b, ___w, sizeof(___w), name);                                             \
	})

static void test_varints(void)
{
	static const struct {
		uint64_t v;
		uint8_t bytes[10];
		size_t n;
	} cases[] = {
	    {0, {0x00}, 1},
	    {1, {0x01}, 1},
	    {127, {0x7f}, 1},
	    {128, {0x80, 0x01}, 2},
	    {300, {0xac, 0x02}, 2},
	    {16384, {0x80, 0x80, 0x01}, 3},
	    {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
	};
	struct buf b = {};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		b.len = 0;
		pb_varint(&b, cases[i].v);
		bytes_eq(&b, cases[i].bytes, cases[i].n, "varint");
	}
	/* int64 -1: two's complement, so ten bytes after the key (field 1, varint) */
	b.len = 0;
	pb_int(&b, 1, -1);
	EXPECT_BYTES(&b, "int64 -1", 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		     0x01);
	/* proto3: zero scalars are not written; field 16 needs a two-byte key */
	b.len = 0;
	pb_uint(&b, 3, 0);
	pb_uint(&b, 16, 1);
	EXPECT_BYTES(&b, "zero skipped, field 16", 0x80, 0x01, 0x01);
	b.len = 0;
	pb_bytes(&b, 6, "", 0);
	pb_bytes(&b, 6, "ab", 2);
	EXPECT_BYTES(&b, "strings", 0x32, 0x00, 0x32, 0x02, 'a', 'b');
	b.len = 0;
	pb_packed_uint(&b, 1, (const uint64_t[]){1, 300, 2}, 3);
	EXPECT_BYTES(&b, "packed", 0x0a, 0x04, 0x01, 0xac, 0x02, 0x02);
	buf__free(&b);
}

static void test_nested(void)
{
	struct buf b = {};
	char big[200];
	size_t outer, inner;

	outer = pb_begin(&b, 4);
	pb_uint(&b, 1, 5);
	inner = pb_begin(&b, 4);
	pb_uint(&b, 1, 7);
	pb_int(&b, 2, 150);
	pb_end(&b, inner);
	pb_end(&b, outer);
	EXPECT_BYTES(&b, "two levels", 0x22, 0x09, 0x08, 0x05, 0x22, 0x05, 0x08, 0x07, 0x10, 0x96,
		     0x01);

	/* a body of 203 bytes: its length takes two bytes, the body moves up by two */
	buf__free(&b);
	memset(big, 'a', sizeof(big));
	outer = pb_begin(&b, 6);
	pb_bytes(&b, 1, big, sizeof(big));
	pb_end(&b, outer);
	ASSERT_EQ(b.len, 3 + 3 + 200, "long body length");
	ASSERT_EQ(b.data[0], 0x32, "long body key");
	ASSERT_EQ(b.data[1], 0xcb, "long body len lo");
	ASSERT_EQ(b.data[2], 0x01, "long body len hi");
	ASSERT_EQ(b.data[3], 0x0a, "inner key");
	ASSERT_EQ(b.data[4], 0xc8, "inner len lo");
	ASSERT_EQ(b.data[5], 0x01, "inner len hi");
	ASSERT_TRUE(b.data[6] == 'a' && b.data[205] == 'a', "body moved intact");
	buf__free(&b);
}

static void test_strings(void)
{
	struct pprof *p = NULL;

	if (!ASSERT_EQ(pprof__new(&p), 0, "new"))
		return;
	ASSERT_EQ(pprof__string(p, ""), 0, "empty string is 0");
	ASSERT_EQ(pprof__string(p, "a"), 1, "first");
	ASSERT_EQ(pprof__string(p, "b"), 2, "second");
	ASSERT_EQ(pprof__string(p, "a"), 1, "deduplicated");
	ASSERT_EQ(pprof__string(p, ""), 0, "empty again");
	ASSERT_EQ(pprof__function(p, "f", "x.py", 3), 1, "function");
	ASSERT_EQ(pprof__function(p, "f", "x.py", 4), 2, "other start line");
	ASSERT_EQ(pprof__function(p, "f", "x.py", 3), 1, "function deduplicated");
	ASSERT_EQ(pprof__location(p, 0, 0, 1, 7), 1, "location");
	ASSERT_EQ(pprof__location(p, 0, 0, 1, 8), 2, "other line");
	ASSERT_EQ(pprof__location(p, 0, 0, 1, 7), 1, "location deduplicated");
	ASSERT_EQ(pprof__mapping(p, 0x400000, 0x500000, 0, "/bin/x", PPROF_HAS_FUNCTIONS), 1,
		  "mapping");
	ASSERT_EQ(pprof__mapping(p, 0x400000, 0x500000, 0, "/bin/x", PPROF_HAS_FUNCTIONS), 1,
		  "mapping deduplicated");
	pprof__free(p);
}

static void test_profile(void)
{
	struct pprof_label label = {.key = "pid", .num = 42};
	struct buf b = {};
	struct pprof *p = NULL;
	uint64_t fn, loc;

	if (!ASSERT_EQ(pprof__new(&p), 0, "new"))
		return;
	ASSERT_EQ(pprof__add_sample_type(p, "samples", "count"), 0, "sample type");
	fn = pprof__function(p, "f", "x.py", 3);
	loc = pprof__location(p, 0, 0, fn, 7);
	/* the same stack and labels twice: one Sample, values summed */
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){2}, 1, &label, 1), 0, "sample");
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){3}, 1, &label, 1), 0,
		  "same sample");
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){5, 6}, 2, NULL, 0), -EINVAL,
		  "value count checked");
	ASSERT_EQ(pprof__encode(p, &b), 0, "encode");
	EXPECT_BYTES(
	    &b, "profile",
	    /* sample_type { type: 1 unit: 2 } */
	    0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,
	    /* sample { location_id: [1] value: [5] label { key: 5 num: 42 } } */
	    0x12, 0x0c, 0x0a, 0x01, 0x01, 0x12, 0x01, 0x05, 0x1a, 0x04, 0x08, 0x05, 0x18, 0x2a,
	    /* location { id: 1 line { function_id: 1 line: 7 } } */
	    0x22, 0x08, 0x08, 0x01, 0x22, 0x04, 0x08, 0x01, 0x10, 0x07,
	    /* function { id: 1 name: 3 filename: 4 start_line: 3 }: no system_name */
	    0x2a, 0x08, 0x08, 0x01, 0x10, 0x03, 0x20, 0x04, 0x28, 0x03,
	    /* string_table: "" samples count f x.py pid */
	    0x32, 0x00, 0x32, 0x07, 's', 'a', 'm', 'p', 'l', 'e', 's', 0x32, 0x05, 'c', 'o', 'u',
	    'n', 't', 0x32, 0x01, 'f', 0x32, 0x04, 'x', '.', 'p', 'y', 0x32, 0x03, 'p', 'i', 'd');
	buf__free(&b);
	pprof__free(p);
}

/* Samples differ by labels too; a mangled C++ name keeps its system_name for pprof to demangle. */
static void test_merge_and_names(void)
{
	struct pprof_label l1 = {.key = "tid", .num = 1}, l2 = {.key = "tid", .num = 2};
	struct buf b = {};
	struct pprof *p = NULL;
	uint64_t loc;

	if (!ASSERT_EQ(pprof__new(&p), 0, "new"))
		return;
	pprof__add_sample_type(p, "samples", "count");
	loc = pprof__location(p, 0, 0, pprof__function(p, "_ZN2at2mmEv", "", 0), 0);
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){1}, 1, &l1, 1), 0, "tid 1");
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){1}, 1, &l2, 1), 0, "tid 2");
	ASSERT_EQ(pprof__add_sample(p, &loc, 1, (const int64_t[]){1}, 1, &l1, 1), 0, "tid 1 again");
	ASSERT_EQ(pprof__encode(p, &b), 0, "encode");
	EXPECT_BYTES(
	    &b, "profile",
	    /* sample_type { type: 1 unit: 2 } */
	    0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,
	    /* sample { location_id: [1] value: [2] label { key: 4 num: 1 } } */
	    0x12, 0x0c, 0x0a, 0x01, 0x01, 0x12, 0x01, 0x02, 0x1a, 0x04, 0x08, 0x04, 0x18, 0x01,
	    /* sample { location_id: [1] value: [1] label { key: 4 num: 2 } } */
	    0x12, 0x0c, 0x0a, 0x01, 0x01, 0x12, 0x01, 0x01, 0x1a, 0x04, 0x08, 0x04, 0x18, 0x02,
	    /* location { id: 1 line { function_id: 1 } } */
	    0x22, 0x06, 0x08, 0x01, 0x22, 0x02, 0x08, 0x01,
	    /* function { id: 1 name: 3 system_name: 3 } */
	    0x2a, 0x06, 0x08, 0x01, 0x10, 0x03, 0x18, 0x03,
	    /* string_table: "" samples count _ZN2at2mmEv tid */
	    0x32, 0x00, 0x32, 0x07, 's', 'a', 'm', 'p', 'l', 'e', 's', 0x32, 0x05, 'c', 'o', 'u',
	    'n', 't', 0x32, 0x0b, '_', 'Z', 'N', '2', 'a', 't', '2', 'm', 'm', 'E', 'v', 0x32, 0x03,
	    't', 'i', 'd');
	buf__free(&b);
	pprof__free(p);
}

static void test_gzip(void)
{
	static const char text[] = "a profile, a profile, a profile";
	struct buf gz = {};
	char out[64] = "";
	z_stream z = {};

	ASSERT_EQ(pprof_gzip(text, sizeof(text), &gz), 0, "gzip");
	ASSERT_TRUE(gz.len > 18 && gz.data[0] == 0x1f && gz.data[1] == 0x8b, "gzip magic");
	inflateInit2(&z, 15 + 16);
	z.next_in = gz.data;
	z.avail_in = (uInt)gz.len;
	z.next_out = (Bytef *)out;
	z.avail_out = sizeof(out);
	ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END, "inflate");
	inflateEnd(&z);
	ASSERT_STREQ(out, text, "round trip");
	buf__free(&gz);
}

int main(void)
{
	test_varints();
	test_nested();
	test_strings();
	test_profile();
	test_merge_and_names();
	test_gzip();
	return TEST_DONE();
}
