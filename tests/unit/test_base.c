// SPDX-License-Identifier: MIT
/*
 * The shared mechanisms of user/base: the thread table (entries found again,
 * zeroed, at stable addresses, walked in order of addition, (0, 0) a thread
 * like any other), the growable buffer (growth, printf longer than any first
 * guess, the sticky error) and LEB128 varints (edges and hostile input).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/threads.h"
#include "base/varint.h"
#include "test.h"

struct entry {
	uint64_t n;
	char pad[20];
};

static size_t finis, fini_sum;

static void count_fini(void *e)
{
	finis++;
	fini_sum += ((struct entry *)e)->n;
}

static void test_threads(void)
{
	struct threads t = THREADS_INIT(struct entry);
	struct entry *first, *e;
	bool added = false;
	size_t i, bad = 0;

	ASSERT_TRUE(!threads__find(&t, 1, 1), "empty table finds nothing");
	first = threads__get(&t, 0, 0, &added);
	ASSERT_TRUE(first && added, "(0, 0) added");
	first->n = 1000;
	/* 1000 threads: many blocks and index growths; pid 0x80000001 vs 1 differ */
	for (i = 1; i < 1000; i++) {
		uint32_t pid = i % 2 ? 0x80000000u | (uint32_t)(i / 2) : (uint32_t)(i / 2);

		e = threads__get(&t, pid, (uint32_t)i, &added);
		if (!e || !added || e->n || e->pad[0])
			bad++;
		else
			e->n = i;
	}
	ASSERT_EQ(bad, 0, "new entries are added and zeroed");
	ASSERT_EQ(t.len, 1000, "len");
	ASSERT_TRUE(threads__get(&t, 0, 0, &added) == first && !added, "(0, 0) found again");
	ASSERT_EQ(first->n, 1000, "first entry kept its address and value");
	for (i = 1, bad = 0; i < 1000; i++) {
		uint32_t pid = i % 2 ? 0x80000000u | (uint32_t)(i / 2) : (uint32_t)(i / 2);

		e = threads__find(&t, pid, (uint32_t)i);
		if (!e || e->n != i || e != threads__at(&t, i) || threads__pid(&t, i) != pid ||
		    threads__tid(&t, i) != i)
			bad++;
	}
	ASSERT_EQ(bad, 0, "each found at its number, in order of addition");
	ASSERT_TRUE(!threads__find(&t, 0x80000000u, 0), "a pid with its top bit is its own key");
	ASSERT_TRUE(!threads__find(&t, 2, 3), "absent thread");
	ASSERT_EQ(threads__get(&t, 7, 7, NULL) != NULL, 1, "added without asking");
	ASSERT_EQ(t.len, 1001, "len after the last add");
	threads__free(&t, count_fini);
	ASSERT_EQ(finis, 1001, "fini called on each entry");
	ASSERT_EQ(fini_sum, 999 * 1000 / 2 + 1000, "fini saw each entry's value");
	ASSERT_EQ(t.len, 0, "free empties");
	ASSERT_EQ(t.elem, sizeof(struct entry), "free keeps the entry size");
	ASSERT_TRUE(!threads__find(&t, 0, 0), "(0, 0) gone after free");
	ASSERT_TRUE(threads__get(&t, 3, 4, NULL) != NULL, "usable again after free");
	threads__free(&t, NULL);
}

static void test_buf(void)
{
	struct buf b = {};
	char big[5000];
	size_t i;

	ASSERT_EQ(buf__puts(&b, "ab"), 0, "puts");
	ASSERT_EQ(buf__put(&b, "\0c", 2), 0, "put with a NUL");
	ASSERT_EQ(b.len, 4, "len");
	ASSERT_TRUE(memcmp(b.text, "ab\0c", 5) == 0, "bytes and the NUL after them");
	ASSERT_EQ(buf__put(&b, NULL, 0), 0, "put of nothing");
	buf__reset(&b);
	ASSERT_EQ(b.len, 0, "reset empties");
	ASSERT_EQ(buf__printf(&b, "%d-%s", 42, "x"), 0, "printf");
	ASSERT_STREQ(b.text, "42-x", "printf text");
	/* longer than the first capacity: formatted again after growing */
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ASSERT_EQ(buf__printf(&b, "[%s]", big), 0, "long printf");
	ASSERT_EQ(b.len, 4 + 2 + sizeof(big) - 1, "long printf len");
	ASSERT_TRUE(b.text[4] == '[' && b.text[b.len - 1] == ']' && !b.data[b.len],
		    "long printf bytes");
	for (i = 0; i < 100000; i++)
		buf__put(&b, "z", 1);
	ASSERT_EQ(b.len, 4 + 2 + sizeof(big) - 1 + 100000, "grown by doubling");
	ASSERT_TRUE(b.cap > b.len && (b.cap & (b.cap - 1)) == 0, "capacity a power of two");
	buf__reset(&b);
	ASSERT_EQ(buf__put_varint(&b, 300), 0, "put_varint");
	ASSERT_EQ(b.len, 2, "varint 300 is two bytes");
	ASSERT_TRUE(b.data[0] == 0xac && b.data[1] == 0x02, "varint 300 bytes");
	/* a request no memory holds: the error sticks until reset */
	ASSERT_EQ(buf__reserve(&b, SIZE_MAX - 8), -ENOMEM, "impossible reserve");
	ASSERT_EQ(buf__puts(&b, "q"), -ENOMEM, "sticky error");
	ASSERT_EQ(buf__printf(&b, "%d", 1), -ENOMEM, "sticky error in printf");
	ASSERT_EQ(b.len, 2, "nothing appended after the error");
	buf__reset(&b);
	ASSERT_EQ(buf__puts(&b, "ok"), 0, "reset clears the error");
	ASSERT_STREQ(b.text, "ok", "usable after reset");
	buf__free(&b);
	ASSERT_TRUE(!b.data && !b.len && !b.cap, "free empties");
	buf__free(&b);
}

static void varint_round(uint64_t v, size_t len, const char *name)
{
	uint8_t p[PTG_VARINT_MAX + 1];
	const uint8_t *r = p;
	uint64_t out = 0;

	ASSERT_EQ(varint_len(v), len, name);
	ASSERT_EQ(varint_put(p, v) - p, len, name);
	ASSERT_EQ(varint_get(&r, p + len, &out), 0, name);
	ASSERT_TRUE(out == v && r == p + len, name);
	/* one byte short: never read past the end */
	r = p;
	out = 7;
	ASSERT_EQ(varint_get(&r, p + len - 1, &out), -EINVAL, name);
	ASSERT_TRUE(r == p && out == 7, name);
}

static void test_varint(void)
{
	const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
	const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
	const uint8_t one[] = {0x7f}, *r;
	uint64_t out;

	varint_round(0, 1, "0");
	varint_round(127, 1, "127");
	varint_round(128, 2, "128");
	varint_round(16383, 2, "16383");
	varint_round(16384, 3, "16384");
	varint_round(UINT32_MAX, 5, "UINT32_MAX");
	varint_round(UINT64_MAX, PTG_VARINT_MAX, "UINT64_MAX");
	r = over;
	ASSERT_EQ(varint_get(&r, over + sizeof(over), &out), -EINVAL, "more than 64 bits");
	r = eleven;
	ASSERT_EQ(varint_get(&r, eleven + sizeof(eleven), &out), -EINVAL, "eleven bytes");
	r = one;
	ASSERT_EQ(varint_get(&r, one, &out), -EINVAL, "empty input");
	ASSERT_EQ(varint_get(&r, one + 1, &out), 0, "one byte");
	ASSERT_EQ(out, 127, "one byte value");
}

int main(void)
{
	test_threads();
	test_buf();
	test_varint();
	return TEST_DONE();
}
