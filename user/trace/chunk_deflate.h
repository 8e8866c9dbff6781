/* SPDX-License-Identifier: MIT */
/*
 * Deflating a chunk of a .ptg trace (docs/trace-format.md), inline or on a
 * thread of its own (a deflater) while its caller fills the next one. The
 * deflater only deflates: what it returns is written by its caller.
 */
#ifndef PTG_CHUNK_DEFLATE_H
#define PTG_CHUNK_DEFLATE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Deflates raw into a whole chunk of type, header included, in *buf (grown
 * as needed); *len its length. 0, or -ENOMEM, -EIO (zlib), -EFBIG (past
 * the format's chunk limit).
 */
int chunk_deflate(uint8_t **buf, size_t *cap, uint32_t type, const uint8_t *raw, size_t raw_len,
		  uint32_t count, int level, size_t *len);

struct deflater;

/*
 * A thread that deflates RECORDS chunks at level 1, started with every
 * signal blocked (its caller's thread takes them); with a spare raw buffer
 * of raw_cap bytes. NULL where it cannot start: deflate inline then.
 */
struct deflater *deflater__new(size_t raw_cap);

/*
 * Hands the len bytes (count records) of *raw to the thread, and gives the
 * caller its spare buffer in exchange (*raw, *cap). The chunk handed over
 * before must have been taken.
 */
void deflater__give(struct deflater *d, uint8_t **raw, size_t *cap, size_t len, uint32_t count);

/*
 * Waits for the chunk handed over, then gives it (header included) and its
 * record count; returns chunk_deflate()'s result for it.
 */
int deflater__take(struct deflater *d, const uint8_t **chunk, size_t *len, uint32_t *count);

/* Ends the thread (after the chunk it holds, which is dropped) and frees it. */
void deflater__free(struct deflater *d);

#endif /* PTG_CHUNK_DEFLATE_H */
