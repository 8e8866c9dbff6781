/* SPDX-License-Identifier: MIT */
/*
 * Decompressing the payload of a .ptg chunk (docs/trace-format.md): one
 * zstd frame from version 3, one zlib stream before. Whole, into a buffer
 * of its raw length; or piece by piece, only counting what comes out, to
 * tell a chunk cut short by the end of the file from a damaged one.
 */
#ifndef PTG_CHUNK_DECOMPRESS_H
#define PTG_CHUNK_DECOMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chunk_decoder;

/* A decoder of the chunks of a file of that version; NULL when out of memory. */
struct chunk_decoder *chunk_decoder__new(uint32_t version);
void chunk_decoder__free(struct chunk_decoder *d);

/*
 * Whether the comp_len bytes at comp are exactly one frame (stream) that
 * decompresses to exactly raw_len bytes, written to raw (raw_len + 1 bytes
 * of room: zlib wants some even for an empty payload).
 */
bool chunk_decoder__whole(struct chunk_decoder *d, uint8_t *raw, size_t raw_len,
			  const uint8_t *comp, size_t comp_len);

/* Starts a payload fed piece by piece: 0, or -ENOMEM. */
int chunk_decoder__stream_begin(struct chunk_decoder *d);
/*
 * Feeds the next n bytes of it; what comes out goes to scratch (len bytes,
 * overwritten each round) and is only counted. 1 while the stream goes on
 * with at most limit bytes out so far; 0 once it ended, is no stream, or
 * passed limit (a bomb is refused as soon as it does). Feed no more after 0.
 */
int chunk_decoder__stream_feed(struct chunk_decoder *d, const uint8_t *in, size_t n,
			       uint8_t *scratch, size_t len, uint64_t limit);
void chunk_decoder__stream_end(struct chunk_decoder *d);

#endif /* PTG_CHUNK_DECOMPRESS_H */
