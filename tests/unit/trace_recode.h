/* SPDX-License-Identifier: MIT */
/*
 * For the trace tests: a .ptg image rewritten as another version of the
 * format, its chunks decompressed and compressed again as that version
 * stores them (zlib before version 3, zstd since: docs/trace-format.md), so
 * that what older versions wrote is read by the tests too. The writer only
 * writes the newest version. Expects a well-formed image (the writer's).
 */
#ifndef PTG_TEST_TRACE_RECODE_H
#define PTG_TEST_TRACE_RECODE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

static uint32_t recode_get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void recode_put32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

/* A chunk's payload of raw_len bytes compressed as version stores it; its length, or 0. */
static size_t recode_pack(uint32_t version, uint8_t *out, size_t cap, const uint8_t *raw,
			  size_t raw_len)
{
	uLongf zlen = cap;
	size_t n;

	if (version >= 3) {
		n = ZSTD_compress(out, cap, raw, raw_len, 1);
		return ZSTD_isError(n) ? 0 : n;
	}
	return compress2(out, &zlen, raw, raw_len, Z_BEST_SPEED) == Z_OK ? zlen : 0;
}

/* The same chunk decompressed (stored as from stores it); 0 on failure. */
static int recode_unpack(uint32_t from, uint8_t *raw, size_t raw_len, const uint8_t *comp,
			 size_t comp_len)
{
	uLongf zlen = raw_len;

	if (from >= 3)
		return ZSTD_decompress(raw, raw_len, comp, comp_len) == raw_len;
	return uncompress(raw, &zlen, comp, comp_len) == Z_OK && zlen == raw_len;
}

/* The image of data (len bytes) as version; malloc'ed, *out_len its length; NULL on failure. */
static uint8_t *trace_recode(const uint8_t *data, size_t len, uint32_t version, size_t *out_len)
{
	uint32_t from = len >= 16 ? recode_get32(data + 8) : 0;
	size_t cap = len * 2 + 4096, n = 16, off = 16;
	uint8_t *out = malloc(cap);

	if (!out || len < 16)
		goto fail;
	memcpy(out, data, 16);
	recode_put32(out + 8, version);
	while (off + 24 <= len) {
		uint32_t raw_len = recode_get32(data + off + 8);
		uint32_t comp_len = recode_get32(data + off + 12);
		size_t bound = compressBound(raw_len) + ZSTD_compressBound(raw_len), clen;
		uint8_t *raw = malloc(raw_len + 1);

		if (!raw || comp_len > len - off - 24 ||
		    !recode_unpack(from, raw, raw_len, data + off + 24, comp_len)) {
			free(raw);
			goto fail;
		}
		if (n + 24 + bound > cap) {
			uint8_t *p = realloc(out, cap = n + 24 + bound + cap);

			if (!p) {
				free(raw);
				goto fail;
			}
			out = p;
		}
		clen = recode_pack(version, out + n + 24, cap - n - 24, raw, raw_len);
		free(raw);
		if (!clen)
			goto fail;
		memcpy(out + n, data + off, 24);
		recode_put32(out + n + 12, (uint32_t)clen);
		recode_put32(out + n + 16, (uint32_t)crc32(0, out + n + 24, (uInt)clen));
		n += 24 + clen;
		off += 24 + comp_len;
	}
	if (off != len)
		goto fail;
	*out_len = n;
	return out;
fail:
	free(out);
	return NULL;
}

#endif /* PTG_TEST_TRACE_RECODE_H */
