// SPDX-License-Identifier: MIT
/*
 * Damaged traces: every truncation, thousands of bit flips and hand-made
 * chunks with valid checksums but bad contents. A truncated trace must read
 * exactly the records of its complete chunks; other damage must be refused or
 * read; never a crash, a hang or a read out of bounds (run this test under
 * -fsanitize=address to check the last).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "model/model.h"
#include "test.h"
#include "trace/trace.h"
#include "trace_recode.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static char path[256];

static int write_file(const uint8_t *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -errno;
	if (len && fwrite(data, 1, len, f) != len) {
		fclose(f);
		return -EIO;
	}
	return fclose(f) ? -errno : 0;
}

static uint8_t *read_whole(size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	data = malloc(n);
	if (data && fread(data, 1, n, f) != (size_t)n) {
		free(data);
		data = NULL;
	}
	fclose(f);
	*len = n;
	return data;
}

/* A valid trace of nrec records in the file at path; returns its bytes. */
static uint8_t *make_trace(size_t nrec, size_t *len)
{
	static const uint16_t kinds[] = {PTG_REC_PY_ENTER, PTG_REC_OP_ENTER, PTG_REC_OP_EXIT,
					 PTG_REC_PY_EXIT};
	struct trace_writer *w;
	struct ptg_record rec = {};
	uint32_t f, g;
	size_t i;

	if (trace_writer__open(path, &w))
		return NULL;
	trace_writer__meta(w, "command", "python train.py");
	f = trace_writer__sym(w, PTG_SYM_PY_FUNC, "f", "a.py", 1);
	g = trace_writer__sym(w, PTG_SYM_OP, "aten::mm", "", 0);
	for (i = 0; i < nrec; i++) {
		rec.kind = kinds[i % 4];
		rec.sym = rec.kind == PTG_REC_PY_ENTER ? f : rec.kind == PTG_REC_OP_ENTER ? g : 0;
		rec.tid = 7 + i % 8 / 4;
		rec.ts = 1000 + i * 37 + rng() % 50;
		rec.ext = i / 4;
		rec.aux[0] = i % 5 ? 0 : -(int64_t)i;
		trace_writer__record(w, &rec);
	}
	trace_writer__loss(w, "py_event", 0, 3);
	if (trace_writer__close(w))
		return NULL;
	return read_whole(len);
}

/*
 * Opens and reads everything. Returns 0 when the whole trace read cleanly,
 * < 0 on a (clean) error. Fails the test if the reader returns more records
 * than it announced, the sign of a loop that would not end.
 */
static int open_and_read(void)
{
	struct trace_reader *r;
	struct ptg_record rec;
	char err[256] = "";
	uint64_t n = 0;
	int ret;

	ret = trace_reader__open(path, &r, err, sizeof(err));
	if (ret) {
		ASSERT_TRUE(err[0] != 0 && strchr(err, '\n') == NULL, "one-line message");
		return ret;
	}
	while ((ret = trace_reader__next(r, &rec)) > 0 && n <= trace_reader__nrecords(r))
		n++;
	ASSERT_TRUE(n <= trace_reader__nrecords(r), "no more records than announced");
	if (ret < 0)
		ASSERT_TRUE(trace_reader__error(r)[0] != 0, "error message after next");
	trace_reader__close(r);
	return ret;
}

/* Where each chunk of a valid trace ends, and how many records it holds. */
struct span {
	size_t end;
	uint32_t type;
	uint32_t count;
};

static size_t chunk_spans(const uint8_t *data, size_t len, struct span *out, size_t max)
{
	size_t off = 16, n = 0;

	while (off + 24 <= len && n < max) {
		out[n].type = data[off + 4];
		out[n].count = data[off + 20] | data[off + 21] << 8 | data[off + 22] << 16 |
			       (uint32_t)data[off + 23] << 24;
		off += 24 + (data[off + 12] | data[off + 13] << 8 | data[off + 14] << 16 |
			     (size_t)data[off + 15] << 24);
		out[n++].end = off;
	}
	return n;
}

/* Every record of the file at path, in order; NULL on any error. */
static struct ptg_record *read_all(size_t *n)
{
	struct ptg_record *recs = NULL;
	struct trace_reader *r;
	size_t i = 0;

	if (trace_reader__open(path, &r, NULL, 0))
		return NULL;
	recs = malloc((trace_reader__nrecords(r) + 1) * sizeof(*recs));
	while (recs && i <= trace_reader__nrecords(r) && trace_reader__next(r, &recs[i]) > 0)
		i++;
	trace_reader__close(r);
	*n = i;
	return recs;
}

static uint64_t loss_count(const struct trace_reader *r, const char *what)
{
	const struct ptg_loss *l;
	size_t n;

	l = trace_reader__losses(r, &n);
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(l[i].what, what))
			return l[i].count;
	}
	return 0;
}

/*
 * Reads the file at path cut at cut bytes of a valid trace; expect: the
 * records of its RECORDS chunks that end at or before the cut, in order.
 * Returns 0 when it read exactly those, -1 otherwise (and says why).
 */
static int check_prefix(size_t cut, size_t len, const struct span *sp, size_t nsp,
			const struct ptg_record *all)
{
	uint64_t expect = 0, n = 0, size = 0, readable = 0, cut_end = 16;
	struct trace_reader *r;
	struct ptg_record rec;
	char err[256] = "";
	int ret;

	for (size_t i = 0; i < nsp && sp[i].end <= cut; i++) {
		expect += sp[i].type == 3 ? sp[i].count : 0;
		cut_end = sp[i].end;
	}
	ret = trace_reader__open(path, &r, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "cut at %zu: %s\n", cut, err);
		return -1;
	}
	while ((ret = trace_reader__next(r, &rec)) > 0 && n < expect &&
	       !memcmp(&rec, &all[n], sizeof(rec)))
		n++;
	if (ret != 0 || n != expect || trace_reader__nrecords(r) != expect ||
	    trace_reader__cut(r, &size, &readable) != (cut < len) ||
	    (cut < len && (size != cut || readable != cut_end)) ||
	    loss_count(r, "trace_truncated") != (cut < len)) {
		fprintf(stderr, "cut at %zu: read %" PRIu64 " of %" PRIu64 " records (%d: %s)\n",
			cut, n, expect, ret, trace_reader__error(r));
		ret = -1;
	}
	trace_reader__close(r);
	return ret;
}

/* A file header cut short is refused; any other cut reads its complete chunks. */
static void test_truncation(const uint8_t *data, size_t len, size_t step, const char *name)
{
	struct span sp[4096];
	struct ptg_record *all;
	size_t cut, nall = 0, nsp, bad = 0, header_refused = 0;

	nsp = chunk_spans(data, len, sp, 4096);
	write_file(data, len);
	all = read_all(&nall);
	if (!ASSERT_TRUE(all && nsp < 4096 && sp[nsp - 1].end == len, "chunks of the whole file"))
		return;
	for (cut = 0; cut < 16; cut++) {
		write_file(data, cut);
		header_refused += open_and_read() < 0;
	}
	ASSERT_EQ(header_refused, 16, "every cut in the file header refused");
	/* every chunk boundary, and the bytes either side of it, plus the steps between */
	for (cut = 16; cut <= len; cut += step) {
		write_file(data, cut);
		bad += check_prefix(cut, len, sp, nsp, all) < 0;
	}
	for (size_t i = 0; i < nsp; i++) {
		for (cut = sp[i].end - 1; cut <= sp[i].end + 1 && cut <= len; cut++) {
			write_file(data, cut);
			bad += check_prefix(cut, len, sp, nsp, all) < 0;
		}
	}
	if (!ASSERT_EQ(bad, 0, name))
		fprintf(stderr, "%zu truncations misread\n", bad);
	free(all);
	write_file(data, len);
	ASSERT_EQ(open_and_read(), 0, "the whole file reads");
}

static void test_bit_flips(const uint8_t *data, size_t len, int rounds)
{
	uint8_t *copy = malloc(len);
	int i, j, nflips, refused = 0;

	for (i = 0; i < rounds; i++) {
		memcpy(copy, data, len);
		nflips = 1 + rng() % 4;
		/* even rounds flip bits near each other, as a bad sector would */
		for (j = 0; j < nflips; j++) {
			size_t at = rng() % len;

			copy[at] ^= 1u << rng() % 8;
			if (i % 2 == 0 && at + 1 < len)
				copy[at + 1] ^= 1u << rng() % 8;
		}
		write_file(copy, len);
		if (open_and_read() < 0)
			refused++;
	}
	/* nearly every flip hits a checksum, a length or the magic: most are refused */
	ASSERT_TRUE(refused > rounds * 9 / 10, "bit flips detected");
	printf("bit flips: %d of %d damaged files refused\n", refused, rounds);
	free(copy);
}

static size_t put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
	return 4;
}

/* Appends a chunk of the stored bytes given, with a right checksum, whatever they hold. */
static size_t put_stored(uint8_t *out, uint32_t type, const uint8_t *stored, size_t stored_len,
			 size_t raw_len, uint32_t count)
{
	size_t n = 0;

	memmove(out + 24, stored, stored_len);
	n += put32(out + n, 0x43475450);
	n += put32(out + n, type);
	n += put32(out + n, raw_len);
	n += put32(out + n, stored_len);
	n += put32(out + n, crc32(0, out + 24, stored_len));
	n += put32(out + n, count);
	return n + stored_len;
}

/* Appends a chunk of raw_len bytes compressed as version 3 stores them. */
static size_t put_chunk(uint8_t *out, uint32_t type, const uint8_t *raw, size_t raw_len,
			uint32_t count)
{
	uint8_t comp[1024];
	size_t comp_len = ZSTD_compress(comp, sizeof(comp), raw, raw_len, 1);

	return put_stored(out, type, comp, comp_len, raw_len, count);
}

/* Reads the file at path to its end; returns the reader's last error message. */
static const char *read_message(void)
{
	static char err[256];
	struct trace_reader *r;
	struct ptg_record rec;

	err[0] = 0;
	if (trace_reader__open(path, &r, err, sizeof(err)))
		return err;
	while (trace_reader__next(r, &rec) > 0)
		;
	snprintf(err, sizeof(err), "%s", trace_reader__error(r));
	trace_reader__close(r);
	return err;
}

/* A file: header, one SYMS chunk (id 1), one RECORDS chunk of raw bytes, END. */
static const char *read_crafted(const uint8_t *rec, size_t rec_len, uint32_t count, int expect)
{
	static const uint8_t sym[] = {1, 1, 0, 1, 'f', 0};
	/* END: count records, 1 symbol, 2 chunks before it */
	uint8_t file[4096], end[3] = {count, 1, 2};
	size_t n;

	memcpy(file, "PTGTRACE\3\0\0\0\0\0\0\0", 16);
	n = 16;
	n += put_chunk(file + n, 2, sym, sizeof(sym), 1);
	n += put_chunk(file + n, 3, rec, rec_len, count);
	n += put_chunk(file + n, 5, end, sizeof(end), 0);
	write_file(file, n);
	ASSERT_EQ(open_and_read(), expect, "crafted file");
	return read_message();
}

/*
 * Version 3 file with a RECORDS chunk of the stored bytes given, said to
 * hold raw_len bytes of one record: returns the reader's message.
 */
static const char *read_stored(const uint8_t *stored, size_t stored_len, size_t raw_len)
{
	static const uint8_t sym[] = {1, 1, 0, 1, 'f', 0};
	uint8_t file[4096], end[3] = {1, 1, 2};
	size_t n = 16;

	memcpy(file, "PTGTRACE\3\0\0\0\0\0\0\0", 16);
	n += put_chunk(file + n, 2, sym, sizeof(sym), 1);
	n += put_stored(file + n, 3, stored, stored_len, raw_len, 1);
	n += put_chunk(file + n, 5, end, sizeof(end), 0);
	write_file(file, n);
	ASSERT_TRUE(open_and_read() < 0, "stored bytes refused");
	return read_message();
}

/* What is no single zstd frame of raw_len bytes is refused, and why. */
static void test_zstd_frames(void)
{
	static const uint8_t good[] = {1, 8, 2, 1};
	uint8_t two[256], bomb[256] = {};
	size_t a = ZSTD_compress(two, sizeof(two), good, sizeof(good), 1);
	size_t b = ZSTD_compress(two + a, sizeof(two) - a, "", 0, 1);

	/* ZSTD_decompress() would take both frames: the reader takes one only */
	ASSERT_STREQ(read_stored(two, a + b, sizeof(good)),
		     "corrupted trace file: chunk 1 does not decompress to 4 bytes",
		     "a second frame after the first");
	ASSERT_STREQ(read_stored(two, a, sizeof(good) + 1),
		     "corrupted trace file: chunk 1 does not decompress to 5 bytes",
		     "a frame shorter than raw_len");
	ASSERT_STREQ(read_stored(two + 1, a - 1, sizeof(good)),
		     "corrupted trace file: chunk 1 does not decompress to 4 bytes",
		     "no frame magic");
	/* more than any zstd block can expand: refused before allocating */
	ASSERT_STREQ(read_stored(bomb, 8, 8 * 32768 + 1),
		     "corrupted trace file: impossible lengths in chunk 1", "ratio over 32768");
}

/* The first record of the file at path, or -1. */
static int first_record(struct ptg_record *rec)
{
	struct trace_reader *r;
	char err[256];
	int ret;

	if (trace_reader__open(path, &r, err, sizeof(err)))
		return -1;
	ret = trace_reader__next(r, rec);
	trace_reader__close(r);
	return ret;
}

/* A pid or tid field past 32 bits is a bad record: never cut down to another thread's id. */
static void test_wide_ids(void)
{
	/* kind 1, mask PID | TID | SYM, ts delta 2, pid, tid, sym 1 */
	static const uint8_t max_ids[] = {1,	10 | 4, 2,    0xff, 0xff, 0xff, 0xff,
					  0x0f, 0xff,	0xff, 0xff, 0xff, 0x0f, 1};
	static const uint8_t pid_2_32_plus_1[] = {1, 10, 2, 0x81, 0x80, 0x80, 0x80, 0x10, 1};
	static const uint8_t tid_2_32[] = {1, 12, 2, 0x80, 0x80, 0x80, 0x80, 0x10, 1};
	struct ptg_record rec;

	read_crafted(max_ids, sizeof(max_ids), 1, 0);
	if (ASSERT_EQ(first_record(&rec), 1, "ids of 2^32 - 1")) {
		ASSERT_EQ(rec.pid, 4294967295u, "pid 2^32 - 1 read exactly");
		ASSERT_EQ(rec.tid, 4294967295u, "tid 2^32 - 1 read exactly");
	}
	ASSERT_STREQ(read_crafted(pid_2_32_plus_1, sizeof(pid_2_32_plus_1), 1, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "pid 2^32 + 1 (not pid 1)");
	ASSERT_STREQ(read_crafted(tid_2_32, sizeof(tid_2_32), 1, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "tid 2^32 (not tid 0)");
}

static void test_crafted(void)
{
	/* kind 1, mask SYM, ts delta 2, sym 1 */
	static const uint8_t good[] = {1, 8, 2, 1};
	static const uint8_t unknown_sym[] = {1, 8, 2, 2};
	static const uint8_t bad_kind[] = {99, 0, 2};
	static const uint8_t bad_mask[] = {1, 0x80, 0x80, 0x01, 2};
	static const uint8_t long_varint[] = {1,    0,	  0xff, 0xff, 0xff, 0xff,
					      0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	static const uint8_t stray[] = {1, 0, 2, 0};
	static const uint8_t cut[] = {1, 8};

	read_crafted(good, sizeof(good), 1, 0);
	ASSERT_STREQ(read_crafted(unknown_sym, sizeof(unknown_sym), 1, -EBADMSG),
		     "corrupted trace file: unknown symbol 2 in chunk 1", "unknown symbol");
	ASSERT_STREQ(read_crafted(bad_kind, sizeof(bad_kind), 1, -EBADMSG),
		     "corrupted trace file: unknown record kind 99 in chunk 1", "bad kind");
	ASSERT_STREQ(read_crafted(bad_mask, sizeof(bad_mask), 1, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "unknown field bits");
	ASSERT_STREQ(read_crafted(long_varint, sizeof(long_varint), 1, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "varint over 64 bits");
	ASSERT_STREQ(read_crafted(stray, sizeof(stray), 1, -EBADMSG),
		     "corrupted trace file: 1 stray bytes after the records of chunk 1",
		     "bytes after the last record");
	ASSERT_STREQ(read_crafted(cut, sizeof(cut), 1, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "record cut short");
	ASSERT_STREQ(read_crafted(good, sizeof(good), 2, -EBADMSG),
		     "corrupted trace file: bad record in chunk 1", "count past the records");
	test_wide_ids();
}

static void test_messages(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len + 16);
	char err[256];
	struct trace_reader *r;
	size_t payload = 16 + 24 + 2; /* inside the first chunk's payload (META) */
	uint64_t size = 0, readable = 0;
	struct span sp[16];
	char expect[256];
	size_t nsp;

	nsp = chunk_spans(data, len, sp, 16);
	memcpy(copy, data, len);
	write_file(copy, len - 1);
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "cut in the last chunk")) {
		ASSERT_TRUE(trace_reader__cut(r, &size, &readable), "cut reported");
		ASSERT_EQ(size, len - 1, "size at the cut");
		ASSERT_EQ(readable, sp[nsp - 2].end, "readable to the last complete chunk");
		trace_reader__close(r);
	}

	/* damage before a cut is still damage */
	copy[payload] ^= 0x10;
	write_file(copy, len - 1);
	trace_reader__open(path, &r, err, sizeof(err));
	ASSERT_STREQ(err, "corrupted trace file: checksum mismatch in chunk 0",
		     "checksum mismatch, then a cut");
	write_file(copy, len);
	trace_reader__open(path, &r, err, sizeof(err));
	ASSERT_STREQ(err, "corrupted trace file: checksum mismatch in chunk 0", "checksum message");

	/* a length that reaches past the end of the file, over whole chunks: not a cut */
	memcpy(copy, data, len);
	put32(copy + 16 + 12, len);
	write_file(copy, len);
	trace_reader__open(path, &r, err, sizeof(err));
	ASSERT_STREQ(err,
		     "corrupted trace file: chunk 0 ends past end of file, but its payload is not "
		     "cut short",
		     "length past the end over whole chunks");

	/* garbage, or zeros a file system left, where a chunk should start */
	memcpy(copy, data, len);
	memset(copy + sp[0].end, 0, 30);
	write_file(copy, sp[0].end + 30);
	trace_reader__open(path, &r, err, sizeof(err));
	snprintf(expect, sizeof(expect), "corrupted trace file: no chunk 1 at offset %zu",
		 sp[0].end);
	ASSERT_STREQ(err, expect, "zeros after a chunk");

	memcpy(copy, data, len);
	memcpy(copy + len, "garbage!garbage!", 16);
	write_file(copy, len + 16);
	trace_reader__open(path, &r, err, sizeof(err));
	ASSERT_STREQ(err, "corrupted trace file: data after the end marker", "trailing data");

	/* raw_len of the first chunk: 4 GiB - 1 must be refused before any allocation */
	put32(copy + 16 + 8, UINT32_MAX);
	write_file(copy, len);
	trace_reader__open(path, &r, err, sizeof(err));
	ASSERT_STREQ(err, "corrupted trace file: impossible lengths in chunk 0", "huge raw_len");
	free(copy);
}

/* Damage inside a RECORDS chunk is found by next(), after a clean open; model__walk says so. */
static void test_late_damage(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len);
	struct trace_reader *r;
	char err[256];

	memcpy(copy, data, len);
	/* the records chunks fill the middle of a large trace */
	copy[len / 2] ^= 0x40;
	write_file(copy, len);
	if (ASSERT_EQ(trace_reader__open(path, &r, err, sizeof(err)), 0, "open, records unread")) {
		ASSERT_EQ(model__walk(r, NULL, NULL, NULL), -EBADMSG, "walk fails");
		ASSERT_TRUE(strstr(trace_reader__error(r), "checksum mismatch in chunk") != NULL,
			    "walk error message");
		trace_reader__close(r);
	}
	free(copy);
}

int main(void)
{
	const char *dir = getenv("TMPDIR");
	uint8_t *small, *large, *small2 = NULL, *large2 = NULL;
	size_t small_len, large_len, small2_len = 0, large2_len = 0;

	snprintf(path, sizeof(path), "%s/ptg-corrupt-%d.ptg", dir ? dir : "/tmp", getpid());
	small = make_trace(300, &small_len);
	large = make_trace(200000, &large_len);
	if (!ASSERT_TRUE(small && large, "make traces"))
		return TEST_DONE();
	printf("small trace %zu bytes, large trace %zu bytes\n", small_len, large_len);
	test_truncation(small, small_len, 1, "every truncation of a small trace reads a prefix");
	test_truncation(large, large_len, large_len / 97,
			"truncations of a large trace read a prefix");
	test_bit_flips(small, small_len, 4000);
	test_bit_flips(large, large_len, 300);
	test_crafted();
	test_zstd_frames();
	test_messages(small, small_len);
	test_late_damage(large, large_len);
	/* the same as version 2 wrote them: zlib streams, cut or damaged */
	small2 = trace_recode(small, small_len, 2, &small2_len);
	large2 = trace_recode(large, large_len, 2, &large2_len);
	if (ASSERT_TRUE(small2 && large2, "version 2 images")) {
		test_truncation(small2, small2_len, 1,
				"every truncation of a small version 2 trace reads a prefix");
		test_truncation(large2, large2_len, large2_len / 97,
				"truncations of a large version 2 trace read a prefix");
		test_bit_flips(small2, small2_len, 2000);
		test_late_damage(large2, large2_len);
	}
	unlink(path);
	free(small);
	free(large);
	free(small2);
	free(large2);
	return TEST_DONE();
}
