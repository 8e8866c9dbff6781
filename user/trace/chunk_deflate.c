// SPDX-License-Identifier: MIT
/*
 * Chunks of a .ptg trace deflated inline or on a thread of their own
 * (chunk_deflate.h). One chunk at a time is on the thread: the caller gives
 * it a full RECORDS chunk and takes it back deflated when it gives the next.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zlib.h>

#include "trace/chunk_deflate.h"
#include "trace/trace_format.h"

int chunk_deflate(uint8_t **buf, size_t *cap, uint32_t type, const uint8_t *raw, size_t raw_len,
		  uint32_t count, int level, size_t *len)
{
	uLongf comp_len = compressBound(raw_len);
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
	if (compress2(c + PTG_CHUNK_HDR_LEN, &comp_len, raw, raw_len, level) != Z_OK)
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

enum dstate {
	D_IDLE,	  /* nothing given, or the chunk taken */
	D_QUEUED, /* a chunk for the thread to deflate */
	D_DONE,	  /* deflated (or failed): the caller takes it */
	D_STOP,	  /* the thread ends */
};

struct deflater {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	enum dstate state; /* under mu */
	/* the thread's while D_QUEUED, the caller's otherwise */
	uint8_t *raw;
	size_t raw_len;
	size_t raw_cap;
	uint32_t count;
	uint8_t *chunk; /* header + deflated payload */
	size_t chunk_cap;
	size_t chunk_len;
	int err;
};

static void *deflater_main(void *arg)
{
	struct deflater *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (d->state == D_IDLE || d->state == D_DONE)
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->state == D_STOP)
			break;
		pthread_mutex_unlock(&d->mu);
		/* level 1: deflate at full speed still shrinks delta-encoded records ~2x */
		d->err = chunk_deflate(&d->chunk, &d->chunk_cap, PTG_CHUNK_RECORDS, d->raw,
				       d->raw_len, d->count, 1, &d->chunk_len);
		pthread_mutex_lock(&d->mu);
		d->state = D_DONE;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static void set_state(struct deflater *d, enum dstate st)
{
	pthread_mutex_lock(&d->mu);
	d->state = st;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Until the thread is done with the chunk it holds, if any. */
static void wait_done(struct deflater *d)
{
	pthread_mutex_lock(&d->mu);
	while (d->state == D_QUEUED)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
}

struct deflater *deflater__new(size_t raw_cap)
{
	struct deflater *d = calloc(1, sizeof(*d));
	bool mu = false, cv = false;
	sigset_t all, old;

	if (!d)
		return NULL;
	d->raw_cap = raw_cap;
	d->raw = malloc(raw_cap);
	mu = d->raw && !pthread_mutex_init(&d->mu, NULL);
	cv = mu && !pthread_cond_init(&d->cv, NULL);
	if (cv) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&d->thread, NULL, deflater_main, d)) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return d;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (cv)
		pthread_cond_destroy(&d->cv);
	if (mu)
		pthread_mutex_destroy(&d->mu);
	free(d->raw);
	free(d);
	return NULL;
}

void deflater__give(struct deflater *d, uint8_t **raw, size_t *cap, size_t len, uint32_t count)
{
	uint8_t *spare = d->raw;
	size_t spare_cap = d->raw_cap;

	d->raw = *raw;
	d->raw_cap = *cap;
	d->raw_len = len;
	d->count = count;
	*raw = spare;
	*cap = spare_cap;
	set_state(d, D_QUEUED);
}

int deflater__take(struct deflater *d, const uint8_t **chunk, size_t *len, uint32_t *count)
{
	wait_done(d);
	*chunk = d->chunk;
	*len = d->chunk_len;
	*count = d->count;
	return d->err;
}

void deflater__free(struct deflater *d)
{
	if (!d)
		return;
	wait_done(d);
	set_state(d, D_STOP);
	pthread_join(d->thread, NULL);
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d->raw);
	free(d->chunk);
	free(d);
}
