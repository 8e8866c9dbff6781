// SPDX-License-Identifier: MIT
/*
 * Writes .ptg traces (docs/trace-format.md). Records are delta-encoded into a
 * raw buffer that is compressed (zstd) into one RECORDS chunk every
 * PTG_CHUNK_RAW_TARGET bytes; symbols and metadata wait in memory and go out
 * as SYMS/META chunks just before the next RECORDS chunk, so a reader always
 * sees a symbol before the first record that uses it.
 *
 * A full RECORDS chunk is compressed on a thread of its own
 * (chunk_compress.c) while the caller fills the next one (compression was
 * about 40% of the loader's CPU per event with zlib's deflate, about 15%
 * with zstd); the caller writes it, in order, when it hands over the next
 * chunk or closes. Everything else (the file, the counts, every error) stays on
 * the caller's thread.
 *
 * The file is written through outfile: it appears at its name, complete,
 * when closed. A writer told to keep_partial (record) that fails to write
 * (a full disk) ends the file after its last complete chunk instead, with an
 * end marker that counts only what is on disk, so that it is still a trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/outfile.h"
#include "trace/chunk_compress.h"
#include "trace/losses.h"
#include "trace/trace.h"
#include "trace/trace_format.h"

struct wbuf {
	struct buf b;
	uint32_t count; /* entries in b, for the chunk header */
};

struct wsym {
	uint32_t kind;
	uint32_t line;
	uint64_t hash;
	char *name;
	char *file;
};

/*
 * Room kept past the end of the file for what salvage() writes (LOSS and END
 * chunks of a few hundred bytes): a full disk leaves it that much.
 */
#define PTG_TAIL_RESERVE (64u * 1024)

struct trace_writer {
	struct outfile *of;
	int fd;	 /* of's */
	int err; /* first failure; every later call returns it */
	char *path;
	bool keep_partial;
	bool write_failed; /* err came from writing the file */

	/* what complete chunks hold: the file ends there if a write fails */
	uint64_t good_len;
	uint64_t disk_records;
	uint32_t disk_syms;

	/* RECORDS chunk being filled; the delta state restarts with each chunk */
	uint8_t *raw;
	size_t raw_len;
	size_t raw_cap; /* PTG_CHUNK_RAW_TARGET + PTG_REC_MAX_BYTES, more for big args */
	uint32_t raw_count;
	struct ptg_record prev[PTG_REC_NR_KINDS];
	uint64_t prev_ts;

	uint8_t *comp; /* chunk header + compressed payload */
	size_t comp_cap;
	ZSTD_CCtx *cctx;	     /* for the chunks compressed inline */
	struct compressor *comp_thr; /* from the first full RECORDS chunk; NULL: none (yet) */
	bool comp_busy;		     /* a chunk given to it and not yet written */

	struct wsym *syms; /* syms[id - 1] */
	uint32_t nsyms;
	uint32_t syms_cap;
	uint32_t syms_flushed; /* syms[0 .. syms_flushed) are on disk */
	uint32_t *htab;	       /* open addressing: symbol id, 0 = empty */
	uint32_t hmask;

	struct wbuf meta; /* encoded pairs not yet on disk */

	struct loss_table losses;

	uint64_t nrecords;
	uint64_t nchunks;
};

static int writer_fail(struct trace_writer *w, int err, const char *what)
{
	if (!w->err) {
		pr_err("trace: %s %s: %s", what, w->path, strerror(-err));
		w->err = err;
	}
	return w->err;
}

/* Best effort: where nothing can be reserved, the chunk cut off usually frees as much. */
static void reserve_tail(struct trace_writer *w)
{
	if (w->keep_partial)
		fallocate(w->fd, FALLOC_FL_KEEP_SIZE, (off_t)w->good_len, PTG_TAIL_RESERVE);
}

/* Appends a length-prefixed string; the caller reserved strlen + PTG_VARINT_MAX. */
static void wbuf_put_str(struct wbuf *b, const char *s, size_t len)
{
	buf__put_varint(&b->b, len);
	buf__put(&b->b, s, len);
}

static int build_failed(struct trace_writer *w, int err)
{
	return writer_fail(w, err, err == -EFBIG ? "chunk too large in" : "compress chunk of");
}

/* Appends a built chunk to the file, and counts what is on disk. */
static int chunk_emit(struct trace_writer *w, uint32_t type, const uint8_t *chunk, size_t len,
		      uint32_t count)
{
	int err = outfile__write(w->of, chunk, len);

	if (err) {
		w->write_failed = true;
		return writer_fail(w, err, "write");
	}
	w->nchunks++;
	w->good_len += len;
	if (type == PTG_CHUNK_RECORDS)
		w->disk_records += count;
	else if (type == PTG_CHUNK_SYMS)
		w->disk_syms += count;
	reserve_tail(w);
	return 0;
}

static int write_chunk(struct trace_writer *w, uint32_t type, const uint8_t *raw, size_t raw_len,
		       uint32_t count, int level)
{
	size_t len = 0;
	int err;

	if (w->err)
		return w->err;
	err =
	    chunk_compress(w->cctx, &w->comp, &w->comp_cap, type, raw, raw_len, count, level, &len);
	if (err)
		return build_failed(w, err);
	return chunk_emit(w, type, w->comp, len, count);
}

/* Writes the chunk given to the compressor, once compressed. */
static int comp_drain(struct trace_writer *w)
{
	const uint8_t *chunk;
	uint32_t count;
	size_t len;
	int err;

	if (!w->comp_busy)
		return w->err;
	err = compressor__take(w->comp_thr, &chunk, &len, &count);
	w->comp_busy = false;
	if (w->err)
		return w->err;
	if (err)
		return build_failed(w, err);
	return chunk_emit(w, PTG_CHUNK_RECORDS, chunk, len, count);
}

/* Gives the RECORDS chunk being filled to the compressor; false without one. */
static bool comp_give(struct trace_writer *w)
{
	if (!w->comp_thr && !(w->comp_thr = compressor__new(w->raw_cap)))
		return false;
	compressor__give(w->comp_thr, &w->raw, &w->raw_cap, w->raw_len, w->raw_count);
	w->comp_busy = true;
	return true;
}

static int wbuf_flush(struct trace_writer *w, struct wbuf *b, uint32_t type)
{
	int err;

	if (!b->count)
		return w->err;
	err = write_chunk(w, type, (const uint8_t *)b->b.data, b->b.len, b->count,
			  PTG_ZSTD_LEVEL_AUX);
	buf__reset(&b->b);
	b->count = 0;
	return err;
}

/* Writes symbols not yet on disk, in SYMS chunks of about PTG_CHUNK_AUX_TARGET bytes. */
static int flush_syms(struct trace_writer *w)
{
	struct wbuf b = {};
	int err = 0;

	while (w->syms_flushed < w->nsyms && !err) {
		const struct wsym *s = &w->syms[w->syms_flushed];
		size_t nlen = strlen(s->name), flen = strlen(s->file);

		if (buf__reserve(&b.b, nlen + flen + 5 * PTG_VARINT_MAX)) {
			err = writer_fail(w, -ENOMEM, "symbols of");
			break;
		}
		buf__put_varint(&b.b, ++w->syms_flushed);
		buf__put_varint(&b.b, s->kind);
		buf__put_varint(&b.b, s->line);
		wbuf_put_str(&b, s->name, nlen);
		wbuf_put_str(&b, s->file, flen);
		b.count++;
		if (b.b.len >= PTG_CHUNK_AUX_TARGET)
			err = wbuf_flush(w, &b, PTG_CHUNK_SYMS);
	}
	if (!err)
		err = wbuf_flush(w, &b, PTG_CHUNK_SYMS);
	buf__free(&b.b);
	return err;
}

/*
 * Ends the RECORDS chunk being filled: the one before it (on the thread) is
 * written first, then the symbols and metadata its records may use, then
 * this one, compressed on the thread unless inline (the last one).
 */
static int flush_records(struct trace_writer *w, bool inline_)
{
	int err;

	err = comp_drain(w);
	err = err ?: flush_syms(w);
	if (!err)
		err = wbuf_flush(w, &w->meta, PTG_CHUNK_META);
	if (err || !w->raw_count)
		return err;
	if (inline_ || !comp_give(w))
		err = write_chunk(w, PTG_CHUNK_RECORDS, w->raw, w->raw_len, w->raw_count,
				  PTG_ZSTD_LEVEL_RECORDS);
	w->raw_len = 0;
	w->raw_count = 0;
	memset(w->prev, 0, sizeof(w->prev));
	w->prev_ts = 0;
	return err;
}

int trace_writer__open(const char *path, struct trace_writer **out)
{
	struct trace_writer *w;
	uint8_t hdr[PTG_FILE_HDR_LEN];
	int err;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->path = strdup(path);
	w->raw_cap = PTG_CHUNK_RAW_TARGET + PTG_REC_MAX_BYTES;
	w->raw = malloc(w->raw_cap);
	w->cctx = ZSTD_createCCtx();
	if (!w->path || !w->raw || !w->cctx) {
		err = -ENOMEM;
		pr_err("trace: open %s: %s", path, strerror(-err));
		goto cleanup;
	}
	err = outfile__open(path, &w->of);
	if (err) {
		pr_err("trace: cannot create %s: %s", path, strerror(-err));
		goto cleanup;
	}
	w->fd = outfile__fd(w->of);
	memcpy(hdr, PTG_FILE_MAGIC, PTG_FILE_MAGIC_LEN);
	put_le32(hdr + 8, PTG_TRACE_VERSION);
	put_le32(hdr + 12, 0);
	err = outfile__write(w->of, hdr, sizeof(hdr));
	if (err) {
		pr_err("trace: write %s: %s", path, strerror(-err));
		goto cleanup;
	}
	w->good_len = sizeof(hdr);
	*out = w;
	return 0;
cleanup:
	trace_writer__abort(w);
	return err;
}

void trace_writer__keep_partial(struct trace_writer *w)
{
	w->keep_partial = true;
	reserve_tail(w);
}

int trace_writer__meta(struct trace_writer *w, const char *key, const char *value)
{
	size_t klen = strlen(key), vlen = strlen(value);

	if (w->err)
		return w->err;
	if (klen > PTG_SYM_STR_MAX || vlen > PTG_SYM_STR_MAX) {
		pr_err("trace: metadata %s longer than %u bytes", key, PTG_SYM_STR_MAX);
		return -EINVAL;
	}
	if (buf__reserve(&w->meta.b, klen + vlen + 2 * PTG_VARINT_MAX))
		return writer_fail(w, -ENOMEM, "metadata of");
	wbuf_put_str(&w->meta, key, klen);
	wbuf_put_str(&w->meta, value, vlen);
	w->meta.count++;
	if (w->meta.b.len >= PTG_CHUNK_AUX_TARGET)
		return wbuf_flush(w, &w->meta, PTG_CHUNK_META);
	return 0;
}

static uint64_t sym_hash(uint32_t kind, const char *name, const char *file, uint32_t line)
{
	uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)kind << 32 | line);
	const char *s;

	/* FNV-1a; the NUL between name and file keeps ("ab","c") != ("a","bc") */
	for (s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	h = (h ^ 0xff) * 0x100000001b3ull;
	for (s = file; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h ^ h >> 29;
}

static bool sym_equal(const struct wsym *s, uint64_t hash, uint32_t kind, const char *name,
		      const char *file, uint32_t line)
{
	return s->hash == hash && s->kind == kind && s->line == line && !strcmp(s->name, name) &&
	       !strcmp(s->file, file);
}

static int htab_grow(struct trace_writer *w)
{
	uint32_t cap = w->hmask ? (w->hmask + 1) * 2 : 1024, i, id;
	uint32_t *tab = calloc(cap, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	for (id = 1; id <= w->nsyms; id++) {
		for (i = (uint32_t)w->syms[id - 1].hash & (cap - 1); tab[i];
		     i = (i + 1) & (cap - 1))
			;
		tab[i] = id;
	}
	free(w->htab);
	w->htab = tab;
	w->hmask = cap - 1;
	return 0;
}

/* Stores a new symbol as id nsyms + 1 in slot; strings are copied. */
static int sym_add(struct trace_writer *w, uint32_t slot, uint64_t hash, uint32_t kind,
		   const char *name, const char *file, uint32_t line)
{
	struct wsym *s;

	if (w->nsyms == w->syms_cap) {
		uint32_t cap = w->syms_cap ? w->syms_cap * 2 : 256;

		s = realloc(w->syms, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		w->syms = s;
		w->syms_cap = cap;
	}
	s = &w->syms[w->nsyms];
	s->name = strdup(name);
	s->file = strdup(file);
	if (!s->name || !s->file) {
		free(s->name);
		free(s->file);
		return -ENOMEM;
	}
	s->kind = kind;
	s->line = line;
	s->hash = hash;
	w->htab[slot] = ++w->nsyms;
	return 0;
}

uint32_t trace_writer__sym(struct trace_writer *w, uint32_t kind, const char *name,
			   const char *file, uint32_t line)
{
	uint64_t hash;
	uint32_t i;

	if (!file)
		file = "";
	if (w->err || !name)
		return 0;
	if (strlen(name) > PTG_SYM_STR_MAX || strlen(file) > PTG_SYM_STR_MAX) {
		pr_err("trace: symbol name or file longer than %u bytes", PTG_SYM_STR_MAX);
		return 0;
	}
	/* keep the load under 1/2 so probes stay short */
	if ((uint64_t)(w->nsyms + 1) * 2 > w->hmask && htab_grow(w)) {
		writer_fail(w, -ENOMEM, "symbols of");
		return 0;
	}
	hash = sym_hash(kind, name, file, line);
	for (i = (uint32_t)hash & w->hmask; w->htab[i]; i = (i + 1) & w->hmask) {
		if (sym_equal(&w->syms[w->htab[i] - 1], hash, kind, name, file, line))
			return w->htab[i];
	}
	if (sym_add(w, i, hash, kind, name, file, line)) {
		writer_fail(w, -ENOMEM, "symbols of");
		return 0;
	}
	return w->nsyms;
}

static uint32_t record_mask(const struct ptg_record *r, const struct ptg_record *p)
{
	uint32_t m = 0;
	int i;

	m |= (r->flags != p->flags) ? PTG_FB_FLAGS : 0;
	m |= (r->pid != p->pid) ? PTG_FB_PID : 0;
	m |= (r->tid != p->tid) ? PTG_FB_TID : 0;
	m |= (r->sym != p->sym) ? PTG_FB_SYM : 0;
	m |= (r->dur != p->dur) ? PTG_FB_DUR : 0;
	m |= (r->stream != p->stream) ? PTG_FB_STREAM : 0;
	m |= (r->corr != p->corr) ? PTG_FB_CORR : 0;
	m |= (r->ext != p->ext) ? PTG_FB_EXT : 0;
	m |= (r->device != p->device) ? PTG_FB_DEVICE : 0;
	for (i = 0; i < 4; i++)
		m |= (r->aux[i] != p->aux[i]) ? PTG_FB_AUX0 << i : 0;
	return m;
}

/* Encodes r after p (the previous record of its kind); returns the new end. */
static uint8_t *record_encode(uint8_t *o, const struct ptg_record *r, const struct ptg_record *p,
			      uint64_t prev_ts, bool has_args)
{
	uint32_t m = record_mask(r, p) | (has_args ? PTG_FB_ARGS : 0);
	int i;

	*o++ = (uint8_t)r->kind;
	o = varint_put(o, m);
	o = varint_put(o, zigzag_enc((int64_t)(r->ts - prev_ts)));
	if (!m)
		return o;
	if (m & PTG_FB_FLAGS)
		o = varint_put(o, r->flags);
	if (m & PTG_FB_PID)
		o = varint_put(o, r->pid);
	if (m & PTG_FB_TID)
		o = varint_put(o, r->tid);
	if (m & PTG_FB_SYM)
		o = varint_put(o, r->sym);
	if (m & PTG_FB_DUR)
		o = varint_put(o, r->dur);
	if (m & PTG_FB_STREAM)
		o = varint_put(o, r->stream);
	/* correlation and external ids mostly count up: store the step */
	if (m & PTG_FB_CORR)
		o = varint_put(o, zigzag_enc((int64_t)(r->corr - p->corr)));
	if (m & PTG_FB_EXT)
		o = varint_put(o, zigzag_enc((int64_t)(r->ext - p->ext)));
	if (m & PTG_FB_DEVICE)
		o = varint_put(o, r->device);
	for (i = 0; i < 4; i++) {
		if (m & (PTG_FB_AUX0 << i))
			o = varint_put(o, zigzag_enc(r->aux[i]));
	}
	return o;
}

/* Room for one more record with len bytes of args: a chunk may exceed its target by one record. */
static int raw_reserve(struct trace_writer *w, size_t len)
{
	size_t need = w->raw_len + PTG_REC_MAX_BYTES + len;
	uint8_t *p;

	if (need <= w->raw_cap)
		return 0;
	p = realloc(w->raw, need);
	if (!p)
		return writer_fail(w, -ENOMEM, "records of");
	w->raw = p;
	w->raw_cap = need;
	return 0;
}

int trace_writer__record_args(struct trace_writer *w, const struct ptg_record *rec,
			      const char *args, size_t len)
{
	struct ptg_record *prev;
	uint8_t *end;
	int err;

	if (w->err)
		return w->err;
	if (rec->kind == 0 || rec->kind >= PTG_REC_NR_KINDS || rec->sym > w->nsyms) {
		pr_err("trace: bad record (kind %u, symbol %u of %u)", rec->kind, rec->sym,
		       w->nsyms);
		return -EINVAL;
	}
	if (len > PTG_ARGS_MAX) {
		pr_err("trace: args of a record longer than %u bytes", PTG_ARGS_MAX);
		return -EINVAL;
	}
	if (args && (err = raw_reserve(w, len)))
		return err;
	prev = &w->prev[rec->kind];
	end = record_encode(w->raw + w->raw_len, rec, prev, w->prev_ts, args != NULL);
	if (args) {
		end = varint_put(end, len);
		memcpy(end, args, len);
		end += len;
	}
	w->raw_len = end - w->raw;
	w->raw_count++;
	w->nrecords++;
	*prev = *rec;
	prev->pad = 0;
	w->prev_ts = rec->ts;
	if (w->raw_len >= PTG_CHUNK_RAW_TARGET)
		return flush_records(w, false);
	return 0;
}

int trace_writer__record(struct trace_writer *w, const struct ptg_record *rec)
{
	return trace_writer__record_args(w, rec, NULL, 0);
}

int trace_writer__loss(struct trace_writer *w, const char *what, uint32_t cpu, uint64_t count)
{
	if (w->err)
		return w->err;
	if (strlen(what) >= sizeof(w->losses.v->what)) {
		pr_err("trace: loss counter name '%s' too long", what);
		return -EINVAL;
	}
	if (loss_table__add(&w->losses, what, cpu, count))
		return writer_fail(w, -ENOMEM, "loss counters of");
	return 0;
}

int trace_writer__lost(struct trace_writer *w, enum ptg_lost kind, uint32_t cpu, uint64_t count)
{
	const char *name = ptg_lost_name(kind);

	if (!name) {
		pr_err("trace: loss kind %d has no name", (int)kind);
		return -EINVAL;
	}
	return trace_writer__loss(w, name, cpu, count);
}

const struct ptg_loss *trace_writer__losses(const struct trace_writer *w, size_t *n)
{
	*n = w->losses.n;
	return w->losses.v;
}

static int write_losses(struct trace_writer *w)
{
	struct wbuf b = {};
	size_t i;
	int err;

	if (buf__reserve(&b.b, w->losses.n * (sizeof(w->losses.v->what) + 3 * PTG_VARINT_MAX) + 1))
		return writer_fail(w, -ENOMEM, "loss counters of");
	for (i = 0; i < w->losses.n; i++) {
		wbuf_put_str(&b, w->losses.v[i].what, strlen(w->losses.v[i].what));
		buf__put_varint(&b.b, w->losses.v[i].cpu);
		buf__put_varint(&b.b, w->losses.v[i].count);
		b.count++;
	}
	err = wbuf_flush(w, &b, PTG_CHUNK_LOSS);
	/* on disk: salvage() after a failed END must not count them twice (readers add up) */
	if (!err) {
		loss_table__free(&w->losses);
		w->losses = (struct loss_table){};
	}
	buf__free(&b.b);
	return err;
}

static int write_end(struct trace_writer *w)
{
	uint8_t buf[3 * PTG_VARINT_MAX], *p = buf;

	/* on disk: all of them, unless salvage() ends the file early */
	p = varint_put(p, w->disk_records);
	p = varint_put(p, w->disk_syms);
	/* chunks before END: a dropped or duplicated whole chunk changes it */
	p = varint_put(p, w->nchunks);
	return write_chunk(w, PTG_CHUNK_END, buf, p - buf, 0, PTG_ZSTD_LEVEL_AUX);
}

/* Syncs the file and renames it into place; frees what the reserve holds past its end. */
static int commit(struct trace_writer *w)
{
	int err = 0;

	if (w->keep_partial && ftruncate(w->fd, (off_t)w->good_len))
		err = -errno;
	err = err ?: outfile__commit(w->of);
	w->of = NULL;
	if (err)
		pr_err("trace: cannot write %s: %s", w->path, strerror(-err));
	return err;
}

/*
 * After a write failed: cuts the file after its last complete chunk and
 * ends it there, the loss counters with "trace_write" (the records that were
 * not written) and an end marker that counts what is on disk. Records refer
 * only to symbols written before them, so the chunks kept stand alone.
 */
static int salvage(struct trace_writer *w)
{
	unsigned long long lost = w->nrecords - w->disk_records;
	int failure = w->err, err;

	if (ftruncate(w->fd, (off_t)w->good_len) || lseek(w->fd, 0, SEEK_END) < 0)
		return -errno;
	w->err = 0;
	err = trace_writer__lost(w, PTG_LOST_TRACE_WRITE, UINT32_MAX, lost);
	/* metadata still in memory when a SYMS chunk failed, such as stop.reason */
	err = err ?: wbuf_flush(w, &w->meta, PTG_CHUNK_META);
	err = err ?: write_losses(w);
	err = err ?: write_end(w);
	err = err ?: commit(w);
	if (!err)
		fprintf(stderr,
			"trace: %s keeps the %llu records written before the failure (%s); "
			"%llu more and every later event are lost\n",
			w->path, (unsigned long long)w->disk_records, strerror(-failure), lost);
	w->err = failure;
	return err;
}

int trace_writer__close(struct trace_writer *w)
{
	int err;

	err = flush_records(w, true);
	if (!err)
		err = write_losses(w);
	if (!err)
		err = write_end(w);
	if (!err)
		err = commit(w);
	trace_writer__abort(w);
	return err;
}

void trace_writer__abort(struct trace_writer *w)
{
	uint32_t i;

	if (!w)
		return;
	/* a chunk it held and was not written is lost, and counted so */
	compressor__free(w->comp_thr);
	if (w->of && w->keep_partial && w->write_failed)
		salvage(w);
	ZSTD_freeCCtx(w->cctx);
	outfile__abort(w->of);
	for (i = 0; i < w->nsyms; i++) {
		free(w->syms[i].name);
		free(w->syms[i].file);
	}
	free(w->syms);
	free(w->htab);
	buf__free(&w->meta.b);
	loss_table__free(&w->losses);
	free(w->comp);
	free(w->raw);
	free(w->path);
	free(w);
}
