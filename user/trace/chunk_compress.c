// SPDX-License-Identifier: MIT
/*
 * Chunks of a .ptg trace compressed inline or on a thread of their own
 * (chunk_compress.h). One chunk at a time is on the thread: the caller gives
 * it a full RECORDS chunk and takes it back compressed when it gives the
 * next.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zlib.h>

#include "trace/chunk_compress.h"
#include "trace/trace_format.h"

int chunk_compress(ZSTD_CCtx *cctx, uint8_t **buf, size_t *cap, uint32_t type, const uint8_t *raw,
		   size_t raw_len, uint32_t count, int level, size_t *len)
{
	size_t comp_len = ZSTD_compressBound(raw_len);
	size_t need = PTG_CHUNK_HDR_LEN + comp_len;
	uint8_t *c;

	if (need > *cap) {
		uint8_t *p = realloc(*buf, need);

		if (!p)
			return -ENOMEM;
		*buf = p;
		*cap = need;
	}
	c = *buf;
	/* one frame, its content size in its header, no checksum of its own (crc32 below) */
	comp_len = ZSTD_compressCCtx(cctx, c + PTG_CHUNK_HDR_LEN, comp_len, raw, raw_len, level);
	if (ZSTD_isError(comp_len))
		return -EIO;
	/*
	 * The header has 32 bits for each length and readers refuse more than
	 * PTG_CHUNK_MAX_LEN: every caller stays far below (a target plus one entry
	 * of at most PTG_ARGS_MAX or 2 * PTG_SYM_STR_MAX), checked all the same.
	 */
	if (raw_len > PTG_CHUNK_MAX_LEN || comp_len > PTG_CHUNK_MAX_LEN)
		return -EFBIG;
	put_le32(c, PTG_CHUNK_MAGIC);
	put_le32(c + 4, type);
	put_le32(c + 8, (uint32_t)raw_len);
	put_le32(c + 12, (uint32_t)comp_len);
	put_le32(c + 16, (uint32_t)crc32(0, c + PTG_CHUNK_HDR_LEN, (uInt)comp_len));
	put_le32(c + 20, count);
	*len = PTG_CHUNK_HDR_LEN + comp_len;
	return 0;
}

enum cstate {
	C_IDLE,	  /* nothing given, or the chunk taken */
	C_QUEUED, /* a chunk for the thread to compress */
	C_DONE,	  /* compressed (or failed): the caller takes it */
	C_STOP,	  /* the thread ends */
};

struct compressor {
	pthread_t thread;
	ZSTD_CCtx *cctx; /* the thread's */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum cstate state; /* under mu */
	/* the thread's while C_QUEUED, the caller's otherwise */
	uint8_t *raw;
	size_t raw_len;
	size_t raw_cap;
	uint32_t count;
	uint8_t *chunk; /* header + compressed payload */
	size_t chunk_cap;
	size_t chunk_len;
	int err;
};

static void *compressor_main(void *arg)
{
	struct compressor *k = arg;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (k->state == C_IDLE || k->state == C_DONE)
			pthread_cond_wait(&k->cv, &k->mu);
		if (k->state == C_STOP)
			break;
		pthread_mutex_unlock(&k->mu);
		k->err =
		    chunk_compress(k->cctx, &k->chunk, &k->chunk_cap, PTG_CHUNK_RECORDS, k->raw,
				   k->raw_len, k->count, PTG_ZSTD_LEVEL_RECORDS, &k->chunk_len);
		pthread_mutex_lock(&k->mu);
		k->state = C_DONE;
		pthread_cond_broadcast(&k->cv);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

static void set_state(struct compressor *k, enum cstate st)
{
	pthread_mutex_lock(&k->mu);
	k->state = st;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

/* Until the thread is done with the chunk it holds, if any. */
static void wait_done(struct compressor *k)
{
	pthread_mutex_lock(&k->mu);
	while (k->state == C_QUEUED)
		pthread_cond_wait(&k->cv, &k->mu);
	pthread_mutex_unlock(&k->mu);
}

struct compressor *compressor__new(size_t raw_cap)
{
	struct compressor *k = calloc(1, sizeof(*k));
	bool mu = false, cv = false;
	sigset_t all, old;

	if (!k)
		return NULL;
	k->raw_cap = raw_cap;
	k->raw = malloc(raw_cap);
	k->cctx = ZSTD_createCCtx();
	mu = k->raw && k->cctx && !pthread_mutex_init(&k->mu, NULL);
	cv = mu && !pthread_cond_init(&k->cv, NULL);
	if (cv) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&k->thread, NULL, compressor_main, k)) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return k;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (cv)
		pthread_cond_destroy(&k->cv);
	if (mu)
		pthread_mutex_destroy(&k->mu);
	ZSTD_freeCCtx(k->cctx);
	free(k->raw);
	free(k);
	return NULL;
}

void compressor__give(struct compressor *k, uint8_t **raw, size_t *cap, size_t len, uint32_t count)
{
	uint8_t *spare = k->raw;
	size_t spare_cap = k->raw_cap;

	k->raw = *raw;
	k->raw_cap = *cap;
	k->raw_len = len;
	k->count = count;
	*raw = spare;
	*cap = spare_cap;
	set_state(k, C_QUEUED);
}

int compressor__take(struct compressor *k, const uint8_t **chunk, size_t *len, uint32_t *count)
{
	wait_done(k);
	*chunk = k->chunk;
	*len = k->chunk_len;
	*count = k->count;
	return k->err;
}

void compressor__free(struct compressor *k)
{
	if (!k)
		return;
	wait_done(k);
	set_state(k, C_STOP);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	ZSTD_freeCCtx(k->cctx);
	free(k->raw);
	free(k->chunk);
	free(k);
}
