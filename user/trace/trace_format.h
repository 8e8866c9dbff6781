/* SPDX-License-Identifier: MIT */
/*
 * Private to trace_writer.c and trace_reader.c: the constants of the .ptg
 * layout (docs/trace-format.md) and the little-endian helpers both sides
 * share (varints: base/varint.h), so that the encoder and decoder cannot drift apart.
 */
#ifndef PTG_TRACE_FORMAT_H
#define PTG_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/varint.h"
#include "trace/trace.h"

#define PTG_FILE_MAGIC	   "PTGTRACE"
#define PTG_FILE_MAGIC_LEN 8
#define PTG_FILE_HDR_LEN   16
/* Header flag bits a reader must understand; none are defined in version 1. */
#define PTG_FILE_FLAGS_KNOWN 0u

/* "PTGC" in file byte order, read as a little-endian u32. */
#define PTG_CHUNK_MAGIC	  0x43475450u
#define PTG_CHUNK_HDR_LEN 24

enum ptg_chunk_type {
	PTG_CHUNK_META = 1,
	PTG_CHUNK_SYMS = 2,
	PTG_CHUNK_RECORDS = 3,
	PTG_CHUNK_LOSS = 4,
	PTG_CHUNK_END = 5,
};

/* Writer's target size of a RECORDS chunk's raw payload. */
#define PTG_CHUNK_RAW_TARGET (128u * 1024)
/* Writer splits SYMS/META chunks at about this many raw bytes. */
#define PTG_CHUNK_AUX_TARGET (1u * 1024 * 1024)
/* Hard limit on both lengths of any chunk: readers reject larger ones. */
#define PTG_CHUNK_MAX_LEN (256u * 1024 * 1024)
/* A symbol's name or file longer than this is refused by the writer. */
#define PTG_SYM_STR_MAX (1u * 1024 * 1024)
/*
 * zlib (versions 1 and 2) cannot expand data by more than about 1032:1, so a
 * raw_len above this multiple of comp_len is corrupt; checked before
 * allocating raw_len bytes.
 */
#define PTG_ZLIB_MAX_RATIO 1100u
/*
 * The same for zstd (version 3): a block of at least 4 bytes (an RLE block,
 * header and byte) gives at most 128 KiB.
 */
#define PTG_ZSTD_MAX_RATIO 32768u

/* Bits of a record's field mask: which fields follow the ts delta. */
enum ptg_field_bit {
	PTG_FB_FLAGS = 1u << 0,
	PTG_FB_PID = 1u << 1,
	PTG_FB_TID = 1u << 2,
	PTG_FB_SYM = 1u << 3,
	PTG_FB_DUR = 1u << 4,
	PTG_FB_STREAM = 1u << 5,
	PTG_FB_CORR = 1u << 6,
	PTG_FB_EXT = 1u << 7,
	PTG_FB_DEVICE = 1u << 8,
	PTG_FB_AUX0 = 1u << 9, /* aux[i] is bit 9 + i */
	/*
	 * Version 2: an args blob follows the fields (varint length, bytes). Unlike
	 * the other bits it is never inherited from the previous record.
	 */
	PTG_FB_ARGS = 1u << 13,
	PTG_FB_ALL_V1 = (1u << 13) - 1,
	PTG_FB_ALL = (1u << 14) - 1,
};

/*
 * Longest encoding of one record without its args bytes: kind, mask, ts, 13
 * fields and the args length, each of <= 10 bytes.
 */
#define PTG_REC_MAX_BYTES (1 + 2 + 10 * 15)

static inline void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t zigzag_enc(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zigzag_dec(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif /* PTG_TRACE_FORMAT_H */
