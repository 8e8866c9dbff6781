/* SPDX-License-Identifier: MIT */
/*
 * Compressing a chunk of a .ptg trace (docs/trace-format.md: a zstd frame
 * since version 3), inline or on a thread of its own (a compressor) while
 * its caller fills the next one. The compressor only compresses: what it
 * returns is written by its caller.
 */
#ifndef PTG_CHUNK_COMPRESS_H
#define PTG_CHUNK_COMPRESS_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

/* zstd levels: RECORDS chunks at full speed, the others (rare, small) denser */
#define PTG_ZSTD_LEVEL_RECORDS 1
#define PTG_ZSTD_LEVEL_AUX     3

/*
 * Compresses raw with cctx (a context kept by the caller: making one costs
 * more than a chunk) into a whole chunk of type, header included, in *buf
 * (grown as needed); *len its length. 0, or -ENOMEM, -EIO (zstd), -EFBIG
 * (past the format's chunk limit).
 */
int chunk_compress(ZSTD_CCtx *cctx, uint8_t **buf, size_t *cap, uint32_t type, const uint8_t *raw,
		   size_t raw_len, uint32_t count, int level, size_t *len);

struct compressor;

/*
 * A thread that compresses RECORDS chunks at PTG_ZSTD_LEVEL_RECORDS, started
 * with every signal blocked (its caller's thread takes them); with a spare
 * raw buffer of raw_cap bytes. NULL where it cannot start: compress inline
 * then.
 */
struct compressor *compressor__new(size_t raw_cap);

/*
 * Hands the len bytes (count records) of *raw to the thread, and gives the
 * caller its spare buffer in exchange (*raw, *cap). The chunk handed over
 * before must have been taken.
 */
void compressor__give(struct compressor *c, uint8_t **raw, size_t *cap, size_t len, uint32_t count);

/*
 * Waits for the chunk handed over, then gives it (header included) and its
 * record count; returns chunk_compress()'s result for it.
 */
int compressor__take(struct compressor *c, const uint8_t **chunk, size_t *len, uint32_t *count);

/* Ends the thread (after the chunk it holds, which is dropped) and frees it. */
void compressor__free(struct compressor *c);

#endif /* PTG_CHUNK_COMPRESS_H */
