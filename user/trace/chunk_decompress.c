// SPDX-License-Identifier: MIT
/* Chunk payloads decompressed (chunk_decompress.h): zstd from version 3, zlib before. */
#include <errno.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

#include "trace/chunk_decompress.h"

/*
 * Largest zstd window a streamed frame may ask for (32 MiB): what the
 * writer makes is at most a chunk's size, and streaming keeps a window.
 */
#define STREAM_ZSTD_WINDOW_LOG 25

struct chunk_decoder {
	bool zstd;
	ZSTD_DCtx *dctx;  /* whole frames */
	ZSTD_DStream *zd; /* a streamed frame */
	z_stream zs;	  /* a streamed zlib payload, while zs_live */
	bool zs_live;
	uint64_t out; /* streamed so far */
};

struct chunk_decoder *chunk_decoder__new(uint32_t version)
{
	struct chunk_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->zstd = version >= 3;
	if (d->zstd && !(d->dctx = ZSTD_createDCtx())) {
		free(d);
		return NULL;
	}
	return d;
}

void chunk_decoder__free(struct chunk_decoder *d)
{
	if (!d)
		return;
	chunk_decoder__stream_end(d);
	ZSTD_freeDCtx(d->dctx);
	free(d);
}

bool chunk_decoder__whole(struct chunk_decoder *d, uint8_t *raw, size_t raw_len,
			  const uint8_t *comp, size_t comp_len)
{
	uLongf out = raw_len;
	uLong in = comp_len;
	size_t n;

	if (!d->zstd)
		return uncompress2(raw, &out, comp, &in) == Z_OK && out == raw_len &&
		       in == comp_len;
	/* one frame, nothing after it (ZSTD_decompressDCtx would take several) */
	if (ZSTD_findFrameCompressedSize(comp, comp_len) != comp_len)
		return false;
	n = ZSTD_decompressDCtx(d->dctx, raw, raw_len, comp, comp_len);
	return !ZSTD_isError(n) && n == raw_len;
}

int chunk_decoder__stream_begin(struct chunk_decoder *d)
{
	chunk_decoder__stream_end(d);
	d->out = 0;
	if (!d->zstd) {
		d->zs = (z_stream){0};
		d->zs_live = inflateInit(&d->zs) == Z_OK;
		return d->zs_live ? 0 : -ENOMEM;
	}
	d->zd = ZSTD_createDStream();
	if (!d->zd)
		return -ENOMEM;
	/* a frame asking for more is no cut chunk of ours: the first feed says so */
	if (ZSTD_isError(
		ZSTD_DCtx_setParameter(d->zd, ZSTD_d_windowLogMax, STREAM_ZSTD_WINDOW_LOG))) {
		ZSTD_freeDStream(d->zd);
		d->zd = NULL; /* no limit, no stream: every feed says 0 */
	}
	return 0;
}

int chunk_decoder__stream_feed(struct chunk_decoder *d, const uint8_t *in, size_t n,
			       uint8_t *scratch, size_t len, uint64_t limit)
{
	ZSTD_inBuffer zin = {in, n, 0};
	size_t left = 1; /* what the frame still needs; 0 once it ended */
	int zret = Z_OK;

	if (d->zstd) {
		while (d->zd && zin.pos < zin.size && d->out <= limit) {
			ZSTD_outBuffer zout = {scratch, len, 0};

			left = ZSTD_decompressStream(d->zd, &zout, &zin);
			if (ZSTD_isError(left))
				return 0;
			d->out += zout.pos;
			if (!left)
				return 0;
		}
		return d->zd && d->out <= limit;
	}
	d->zs.next_in = (Bytef *)in;
	d->zs.avail_in = (uInt)n; /* callers feed pieces of a few KiB */
	while (zret == Z_OK && d->zs.avail_in && d->zs.total_out <= limit) {
		d->zs.next_out = scratch;
		d->zs.avail_out = (uInt)len;
		zret = inflate(&d->zs, Z_NO_FLUSH);
	}
	d->out = d->zs.total_out;
	/* Z_BUF_ERROR: no progress possible on a full buffer, the stream goes on */
	return (zret == Z_OK || zret == Z_BUF_ERROR) && d->out <= limit;
}

void chunk_decoder__stream_end(struct chunk_decoder *d)
{
	ZSTD_freeDStream(d->zd);
	d->zd = NULL;
	if (d->zs_live)
		inflateEnd(&d->zs);
	d->zs_live = false;
}
