// SPDX-License-Identifier: MIT
/*
 * Reads .ptg traces (docs/trace-format.md). Open walks every chunk header,
 * loads the small chunks (META, SYMS, LOSS, END) and only indexes RECORDS
 * chunks, which next() decompresses one at a time (zstd since version 3,
 * zlib before). Every length read from the file is checked against the file
 * size and PTG_CHUNK_MAX_LEN before use: a damaged trace gives an error
 * message, never a crash or a huge allocation.
 * A trace cut short (no END) reads up to its last complete chunk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/array.h"
#include "trace/chunk_decompress.h"
#include "trace/losses.h"
#include "trace/trace.h"
#include "trace/trace_format.h"
#include "trace/trace_sniff.h"

/* Buffer size for decompressing the payload of a cut chunk piece by piece. */
#define CUT_BUF_LEN (64u * 1024)

struct rchunk {
	uint64_t off; /* of the payload */
	uint32_t index;
	uint32_t raw_len;
	uint32_t comp_len;
	uint32_t crc;
	uint32_t count;
};

struct meta_pair {
	char *key;
	char *value;
};

struct cursor {
	const uint8_t *p;
	const uint8_t *end;
};

struct trace_reader {
	int fd;
	uint64_t size;
	uint32_t version;
	uint64_t cut_at; /* end of the last complete chunk of a cut trace, else 0 */
	char err[256];

	struct meta_pair *meta;
	size_t nmeta;
	size_t meta_cap;

	struct ptg_sym *syms; /* syms[id - 1]; name and file share one allocation */
	uint32_t nsyms;
	size_t syms_cap;

	struct loss_table losses;

	struct rchunk *chunks; /* RECORDS chunks in file order */
	size_t nchunks;
	size_t chunks_cap;
	uint64_t nrecords;

	/* buffers reused for every chunk read */
	uint8_t *comp;
	size_t comp_cap;
	uint8_t *raw;
	size_t raw_cap;
	struct chunk_decoder *dec; /* for the file's version, from its header on */

	/* position of next() */
	int failed;
	size_t next_chunk;
	const struct rchunk *cur;
	struct cursor in;
	uint32_t left;
	struct ptg_record prev[PTG_REC_NR_KINDS];
	uint64_t prev_ts;
	/* args blob of the last record, copied out to add the NUL */
	char *args;
	size_t args_len, args_cap;
	bool has_args;
};

__attribute__((format(printf, 3, 4))) static int reader_fail(struct trace_reader *r, int err,
							     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return err;
}

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	uint8_t *p;

	if (need <= *cap)
		return 0;
	p = realloc(*buf, need);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = need;
	return 0;
}

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
		p += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Reads, checks and decompresses a chunk's payload into r->raw. */
static int chunk_load(struct trace_reader *r, const struct rchunk *c)
{
	int err;

	/* +1: zlib wants a non-empty output buffer even for an empty payload */
	if (reserve(&r->comp, &r->comp_cap, c->comp_len + 1) ||
	    reserve(&r->raw, &r->raw_cap, (size_t)c->raw_len + 1))
		return reader_fail(r, -ENOMEM, "out of memory reading chunk %u", c->index);
	err = read_full(r->fd, r->comp, c->comp_len, c->off);
	if (err)
		return reader_fail(r, err, "cannot read chunk %u: %s", c->index, strerror(-err));
	if (crc32(0, r->comp, c->comp_len) != c->crc)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: checksum mismatch in chunk %u", c->index);
	if (!chunk_decoder__whole(r->dec, r->raw, c->raw_len, r->comp, c->comp_len))
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: chunk %u does not decompress to %u bytes",
				   c->index, c->raw_len);
	return 0;
}

static int cur_u64(struct cursor *c, uint64_t *v)
{
	return varint_get(&c->p, c->end, v);
}

static int cur_u32(struct cursor *c, uint32_t *v)
{
	uint64_t x;

	if (varint_get(&c->p, c->end, &x) || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

/* A length-prefixed string, copied into *out (NUL-terminated, malloc'ed). */
static int cur_str(struct cursor *c, char **out)
{
	uint64_t len;

	if (cur_u64(c, &len) || len > (uint64_t)(c->end - c->p))
		return -EBADMSG;
	*out = strndup((const char *)c->p, len);
	if (!*out)
		return -ENOMEM;
	c->p += len;
	return 0;
}

static int parse_meta(struct trace_reader *r, struct cursor *c, uint32_t count)
{
	struct meta_pair m;
	int err;

	while (count--) {
		if (array_grow((void **)&r->meta, &r->meta_cap, r->nmeta + 1, sizeof(m)))
			return -ENOMEM;
		err = cur_str(c, &m.key);
		if (err)
			return err;
		err = cur_str(c, &m.value);
		if (err) {
			free(m.key);
			return err;
		}
		r->meta[r->nmeta++] = m;
	}
	return 0;
}

static int parse_sym(struct trace_reader *r, struct cursor *c)
{
	struct ptg_sym *s = &r->syms[r->nsyms];
	uint64_t nlen, flen;
	const uint8_t *name;
	char *str;

	if (cur_u32(c, &s->id) || s->id != r->nsyms + 1 || cur_u32(c, &s->kind) ||
	    cur_u32(c, &s->line) || cur_u64(c, &nlen) || nlen > (uint64_t)(c->end - c->p))
		return -EBADMSG;
	name = c->p;
	c->p += nlen;
	if (cur_u64(c, &flen) || flen > (uint64_t)(c->end - c->p))
		return -EBADMSG;
	str = malloc(nlen + flen + 2);
	if (!str)
		return -ENOMEM;
	memcpy(str, name, nlen);
	str[nlen] = 0;
	memcpy(str + nlen + 1, c->p, flen);
	str[nlen + 1 + flen] = 0;
	c->p += flen;
	s->name = str;
	s->file = str + nlen + 1;
	r->nsyms++;
	return 0;
}

static int parse_syms(struct trace_reader *r, struct cursor *c, uint32_t count)
{
	int err;

	while (count--) {
		/* ids are u32 from 1: one more would wrap nsyms + 1 to 0, and syms[] with it */
		if (r->nsyms == UINT32_MAX)
			return -EBADMSG;
		if (array_grow((void **)&r->syms, &r->syms_cap, r->nsyms + 1, sizeof(*r->syms)))
			return -ENOMEM;
		err = parse_sym(r, c);
		if (err)
			return err;
	}
	return 0;
}

static int parse_loss(struct trace_reader *r, struct cursor *c, uint32_t count)
{
	struct ptg_loss l;
	uint64_t len;

	while (count--) {
		memset(&l, 0, sizeof(l));
		if (cur_u64(c, &len) || len >= sizeof(l.what) || len > (uint64_t)(c->end - c->p))
			return -EBADMSG;
		memcpy(l.what, c->p, len);
		c->p += len;
		if (cur_u32(c, &l.cpu) || cur_u64(c, &l.count))
			return -EBADMSG;
		if (loss_table__add(&r->losses, l.what, l.cpu, l.count))
			return -ENOMEM;
	}
	return 0;
}

static int check_end(struct trace_reader *r, struct cursor *c, uint32_t count, uint32_t index)
{
	uint64_t nrecords, nsyms, nchunks;

	/* END has no entries: a count there is damage to its header */
	if (count || cur_u64(c, &nrecords) || cur_u64(c, &nsyms) || cur_u64(c, &nchunks))
		return -EBADMSG;
	if (nrecords != r->nrecords || nsyms != r->nsyms || nchunks != index)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: end marker counts %llu records, %llu "
				   "symbols, %llu chunks; the file has %llu, %u, %u",
				   (unsigned long long)nrecords, (unsigned long long)nsyms,
				   (unsigned long long)nchunks, (unsigned long long)r->nrecords,
				   r->nsyms, index);
	return 0;
}

/* Loads one META, SYMS, LOSS or END chunk; the payload must be consumed exactly. */
static int chunk_parse(struct trace_reader *r, const struct rchunk *c, uint32_t type)
{
	struct cursor cur;
	int err;

	err = chunk_load(r, c);
	if (err)
		return err;
	cur.p = r->raw;
	cur.end = r->raw + c->raw_len;
	if (type == PTG_CHUNK_META)
		err = parse_meta(r, &cur, c->count);
	else if (type == PTG_CHUNK_SYMS)
		err = parse_syms(r, &cur, c->count);
	else if (type == PTG_CHUNK_LOSS)
		err = parse_loss(r, &cur, c->count);
	else
		err = check_end(r, &cur, c->count, c->index);
	if (err == -ENOMEM)
		return reader_fail(r, err, "out of memory reading chunk %u", c->index);
	if (err && !r->err[0])
		return reader_fail(r, err, "corrupted trace file: bad contents in chunk %u",
				   c->index);
	if (!err && cur.p != cur.end)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: %zu stray bytes at the end of chunk %u",
				   (size_t)(cur.end - cur.p), c->index);
	return err;
}

/* "not a ptrace-gpu trace: <what it is instead>" for a file with the wrong magic. */
static int reader_fail_foreign(struct trace_reader *r, size_t have)
{
	uint8_t head[512];
	const char *what;
	size_t n = r->size < sizeof(head) ? r->size : sizeof(head);

	if (!have)
		return reader_fail(r, -EINVAL, "empty file, not a ptrace-gpu trace");
	if (read_full(r->fd, head, n, 0))
		n = 0;
	what = trace_sniff(head, n);
	if (!what)
		return reader_fail(r, -EINVAL, "not a ptrace-gpu trace (bad magic)");
	return reader_fail(r, -EINVAL, "not a ptrace-gpu trace but %s", what);
}

static int check_file_header(struct trace_reader *r)
{
	uint8_t hdr[PTG_FILE_HDR_LEN];
	size_t have = r->size < sizeof(hdr) ? r->size : sizeof(hdr);
	uint32_t version, flags;
	int err;

	err = read_full(r->fd, hdr, have, 0);
	if (err)
		return reader_fail(r, err, "cannot read header: %s", strerror(-err));
	if (!have ||
	    memcmp(hdr, PTG_FILE_MAGIC, have < PTG_FILE_MAGIC_LEN ? have : PTG_FILE_MAGIC_LEN))
		return reader_fail_foreign(r, have);
	if (have < sizeof(hdr))
		return reader_fail(r, -EBADMSG, "truncated trace file: %zu-byte file header", have);
	version = get_le32(hdr + 8);
	flags = get_le32(hdr + 12);
	if (version < PTG_TRACE_VERSION_MIN || version > PTG_TRACE_VERSION)
		return reader_fail(r, -EPROTONOSUPPORT,
				   "unsupported trace version %u (this build reads %u to %u)",
				   version, PTG_TRACE_VERSION_MIN, PTG_TRACE_VERSION);
	r->version = version;
	if (flags & ~PTG_FILE_FLAGS_KNOWN)
		return reader_fail(r, -EPROTONOSUPPORT, "unsupported trace flags 0x%x",
				   flags & ~PTG_FILE_FLAGS_KNOWN);
	r->dec = chunk_decoder__new(version);
	return r->dec ? 0 : reader_fail(r, -ENOMEM, "out of memory");
}

/*
 * Whether the stored bytes of chunk c, from its payload to the end of the
 * file, are what a cut leaves: the beginning of a compressed stream that has
 * not ended and decompresses to no more than raw_len bytes. A comp_len
 * damaged to reach past the end of the file fails this: the stream ends
 * early (the next chunk follows it) or the bytes are not compressed data.
 * 1 = cut, 0 = not.
 */
static int payload_is_cut(struct trace_reader *r, const struct rchunk *c)
{
	uint64_t off = c->off;
	int err = 0, going = 1;

	if (reserve(&r->comp, &r->comp_cap, CUT_BUF_LEN) ||
	    reserve(&r->raw, &r->raw_cap, CUT_BUF_LEN) || chunk_decoder__stream_begin(r->dec))
		return reader_fail(r, -ENOMEM, "out of memory reading chunk %u", c->index);
	while (!err && going && off < r->size) {
		size_t n = r->size - off < CUT_BUF_LEN ? r->size - off : CUT_BUF_LEN;

		err = read_full(r->fd, r->comp, n, off);
		off += n;
		if (!err)
			going = chunk_decoder__stream_feed(r->dec, r->comp, n, r->raw, CUT_BUF_LEN,
							   c->raw_len);
	}
	chunk_decoder__stream_end(r->dec);
	if (err)
		return reader_fail(r, err, "cannot read chunk %u: %s", c->index, strerror(-err));
	return going;
}

/*
 * Reads and bounds-checks the header of chunk c->index at offset off. Returns
 * 1 when the file ends inside the chunk and what it holds of it is a valid
 * beginning (magic, lengths within limits, payload_is_cut()): a cut, not
 * damage.
 */
static int chunk_header(struct trace_reader *r, uint64_t off, struct rchunk *c, uint32_t *type)
{
	uint8_t h[PTG_CHUNK_HDR_LEN] = {}, magic[4];
	size_t have = r->size - off < sizeof(h) ? r->size - off : sizeof(h);
	int err;

	err = read_full(r->fd, h, have, off);
	if (err)
		return reader_fail(r, err, "cannot read chunk %u: %s", c->index, strerror(-err));
	put_le32(magic, PTG_CHUNK_MAGIC);
	if (memcmp(h, magic, have < sizeof(magic) ? have : sizeof(magic)))
		return reader_fail(r, -EBADMSG, "corrupted trace file: no chunk %u at offset %llu",
				   c->index, (unsigned long long)off);
	*type = get_le32(h + 4);
	c->raw_len = get_le32(h + 8);
	c->comp_len = get_le32(h + 12);
	c->crc = get_le32(h + 16);
	c->count = get_le32(h + 20);
	c->off = off + PTG_CHUNK_HDR_LEN;
	/* both lengths are in the first 16 bytes: checked as soon as they are there */
	if (have >= 16 &&
	    (c->raw_len > PTG_CHUNK_MAX_LEN || c->comp_len > PTG_CHUNK_MAX_LEN ||
	     c->raw_len > (uint64_t)c->comp_len *
			      (r->version >= 3 ? PTG_ZSTD_MAX_RATIO : PTG_ZLIB_MAX_RATIO)))
		return reader_fail(
		    r, -EBADMSG, "corrupted trace file: impossible lengths in chunk %u", c->index);
	if (have < sizeof(h))
		return 1;
	if (c->comp_len <= r->size - c->off)
		return 0;
	err = payload_is_cut(r, c);
	if (!err)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: chunk %u ends past end of file, but its "
				   "payload is not cut short",
				   c->index);
	return err;
}

static int index_records(struct trace_reader *r, const struct rchunk *c)
{
	if (array_grow((void **)&r->chunks, &r->chunks_cap, r->nchunks + 1, sizeof(*c)))
		return reader_fail(r, -ENOMEM, "out of memory indexing chunk %u", c->index);
	r->chunks[r->nchunks++] = *c;
	r->nrecords += c->count;
	return 0;
}

/* What a cut trace has lost is unknown: a loss counter says it was cut. */
static int note_cut(struct trace_reader *r, uint64_t off)
{
	/* one per cut */
	const char *what = ptg_lost_name(PTG_LOST_TRACE_TRUNCATED);

	r->cut_at = off;
	if (loss_table__add(&r->losses, what, UINT32_MAX, 1))
		return reader_fail(r, -ENOMEM, "out of memory");
	return 0;
}

static int scan_chunks(struct trace_reader *r)
{
	uint64_t off = PTG_FILE_HDR_LEN;
	struct rchunk c = {};
	bool ended = false;
	uint32_t type = 0;
	int err = 0;

	for (c.index = 0; off < r->size; c.index++) {
		if (ended)
			return reader_fail(r, -EBADMSG,
					   "corrupted trace file: data after the end marker");
		err = chunk_header(r, off, &c, &type);
		if (err)
			break;
		if (type == PTG_CHUNK_RECORDS)
			err = index_records(r, &c);
		else if (type >= PTG_CHUNK_META && type <= PTG_CHUNK_END)
			err = chunk_parse(r, &c, type);
		/* other types are extensions this build does not know: skipped */
		if (err)
			return err;
		ended = type == PTG_CHUNK_END;
		off = c.off + c.comp_len;
	}
	if (err < 0)
		return err;
	/* no END: a recorder killed, a disk full, a copy cut short; read what is whole */
	return ended ? 0 : note_cut(r, off);
}

int trace_reader__open(const char *path, struct trace_reader **out, char *errbuf, size_t errlen)
{
	struct trace_reader *r;
	struct stat st;
	int err;

	r = calloc(1, sizeof(*r));
	if (!r) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "out of memory");
		return -ENOMEM;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		err = reader_fail(r, -errno, "cannot open %s: %s", path, strerror(errno));
		goto cleanup;
	}
	if (fstat(r->fd, &st)) {
		err = reader_fail(r, -errno, "cannot stat %s: %s", path, strerror(errno));
		goto cleanup;
	}
	r->size = st.st_size;
	err = check_file_header(r);
	if (!err)
		err = scan_chunks(r);
	if (err)
		goto cleanup;
	trace_reader__rewind(r);
	*out = r;
	return 0;
cleanup:
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", r->err);
	trace_reader__close(r);
	return err;
}

static int next_chunk(struct trace_reader *r)
{
	const struct rchunk *c;
	int err;

	if (r->in.p != r->in.end)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: %zu stray bytes after the records of "
				   "chunk %u",
				   (size_t)(r->in.end - r->in.p), r->cur->index);
	if (r->next_chunk == r->nchunks)
		return 0;
	c = &r->chunks[r->next_chunk++];
	err = chunk_load(r, c);
	if (err)
		return err;
	r->cur = c;
	r->in.p = r->raw;
	r->in.end = r->raw + c->raw_len;
	r->left = c->count;
	memset(r->prev, 0, sizeof(r->prev));
	r->prev_ts = 0;
	return 1;
}

static int decode_fields(struct cursor *in, uint32_t m, struct ptg_record *rec)
{
	uint64_t v;
	int i;

	if ((m & PTG_FB_FLAGS) && (cur_u64(in, &v) || v > UINT16_MAX))
		return -1;
	if (m & PTG_FB_FLAGS)
		rec->flags = (uint16_t)v;
	if ((m & PTG_FB_PID) && cur_u32(in, &rec->pid))
		return -1;
	if ((m & PTG_FB_TID) && cur_u32(in, &rec->tid))
		return -1;
	if ((m & PTG_FB_SYM) && cur_u32(in, &rec->sym))
		return -1;
	if ((m & PTG_FB_DUR) && cur_u64(in, &rec->dur))
		return -1;
	if ((m & PTG_FB_STREAM) && cur_u64(in, &rec->stream))
		return -1;
	if ((m & PTG_FB_CORR) && cur_u64(in, &v))
		return -1;
	if (m & PTG_FB_CORR)
		rec->corr += (uint64_t)zigzag_dec(v);
	if ((m & PTG_FB_EXT) && cur_u64(in, &v))
		return -1;
	if (m & PTG_FB_EXT)
		rec->ext += (uint64_t)zigzag_dec(v);
	if ((m & PTG_FB_DEVICE) && cur_u32(in, &rec->device))
		return -1;
	for (i = 0; i < 4; i++) {
		if (!(m & (PTG_FB_AUX0 << i)))
			continue;
		if (cur_u64(in, &v))
			return -1;
		rec->aux[i] = zigzag_dec(v);
	}
	return 0;
}

static int decode_args(struct trace_reader *r)
{
	uint64_t len;

	if (cur_u64(&r->in, &len) || len > PTG_ARGS_MAX || len > (uint64_t)(r->in.end - r->in.p))
		return -EBADMSG;
	if (reserve((uint8_t **)&r->args, &r->args_cap, len + 1))
		return reader_fail(r, -ENOMEM, "out of memory reading chunk %u", r->cur->index);
	memcpy(r->args, r->in.p, len);
	r->args[len] = '\0';
	r->args_len = len;
	r->in.p += len;
	r->has_args = true;
	return 0;
}

static int decode_record(struct trace_reader *r, struct ptg_record *rec)
{
	/* what version 1 did not have reads as corruption in a version 1 file */
	uint64_t all = r->version >= 2 ? PTG_FB_ALL : PTG_FB_ALL_V1;
	unsigned int nr_kinds = r->version >= 2 ? PTG_REC_NR_KINDS : PTG_REC_EVENT;
	struct ptg_record *prev;
	uint64_t m, dts;
	uint8_t kind;
	int err;

	r->has_args = false;
	if (r->in.p == r->in.end)
		goto corrupt;
	kind = *r->in.p++;
	if (kind == 0 || kind >= nr_kinds)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: unknown record kind %u in chunk %u", kind,
				   r->cur->index);
	prev = &r->prev[kind];
	if (cur_u64(&r->in, &m) || m & ~all || cur_u64(&r->in, &dts))
		goto corrupt;
	prev->kind = kind;
	prev->ts = r->prev_ts + (uint64_t)zigzag_dec(dts);
	if ((m & PTG_FB_ALL_V1) && decode_fields(&r->in, (uint32_t)m, prev))
		goto corrupt;
	if ((m & PTG_FB_ARGS) && (err = decode_args(r)))
		return err == -ENOMEM
			   ? err
			   : reader_fail(r, -EBADMSG, "corrupted trace file: bad args in chunk %u",
					 r->cur->index);
	if (prev->sym > r->nsyms)
		return reader_fail(r, -EBADMSG,
				   "corrupted trace file: unknown symbol %u in chunk %u", prev->sym,
				   r->cur->index);
	r->prev_ts = prev->ts;
	*rec = *prev;
	return 1;
corrupt:
	return reader_fail(r, -EBADMSG, "corrupted trace file: bad record in chunk %u",
			   r->cur->index);
}

int trace_reader__next(struct trace_reader *r, struct ptg_record *rec)
{
	int err;

	r->has_args = false;
	if (r->failed)
		return r->failed;
	while (!r->left) {
		err = next_chunk(r);
		if (err <= 0) {
			r->failed = err;
			return err;
		}
	}
	err = decode_record(r, rec);
	if (err < 0) {
		r->failed = err;
		return err;
	}
	r->left--;
	return 1;
}

const char *trace_reader__args(const struct trace_reader *r, size_t *len)
{
	if (!r->has_args)
		return NULL;
	if (len)
		*len = r->args_len;
	return r->args;
}

int trace_reader__rewind(struct trace_reader *r)
{
	r->has_args = false;
	r->failed = 0;
	r->next_chunk = 0;
	r->cur = NULL;
	r->in.p = r->in.end = NULL;
	r->left = 0;
	r->err[0] = 0;
	return 0;
}

const char *trace_reader__meta(const struct trace_reader *r, const char *key)
{
	size_t i;

	/* the last value written for a key wins */
	for (i = r->nmeta; i-- > 0;) {
		if (!strcmp(r->meta[i].key, key))
			return r->meta[i].value;
	}
	return NULL;
}

bool trace_reader__meta_at(const struct trace_reader *r, size_t i, const char **key,
			   const char **value)
{
	if (i >= r->nmeta)
		return false;
	*key = r->meta[i].key;
	*value = r->meta[i].value;
	return true;
}

const struct ptg_sym *trace_reader__sym(const struct trace_reader *r, uint32_t id)
{
	if (id == 0 || id > r->nsyms)
		return NULL;
	return &r->syms[id - 1];
}

size_t trace_reader__nsyms(const struct trace_reader *r)
{
	return r->nsyms;
}

const struct ptg_loss *trace_reader__losses(const struct trace_reader *r, size_t *n)
{
	*n = r->losses.n;
	return r->losses.v;
}

bool trace_reader__cut(const struct trace_reader *r, uint64_t *size, uint64_t *readable)
{
	if (size)
		*size = r->size;
	if (readable)
		*readable = r->cut_at;
	return r->cut_at != 0;
}

uint64_t trace_reader__nrecords(const struct trace_reader *r)
{
	return r->nrecords;
}

const char *trace_reader__error(const struct trace_reader *r)
{
	return r->err;
}

void trace_reader__close(struct trace_reader *r)
{
	size_t i;

	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	chunk_decoder__free(r->dec);
	for (i = 0; i < r->nmeta; i++) {
		free(r->meta[i].key);
		free(r->meta[i].value);
	}
	for (i = 0; i < r->nsyms; i++)
		free((char *)r->syms[i].name);
	free(r->meta);
	free(r->syms);
	loss_table__free(&r->losses);
	free(r->chunks);
	free(r->comp);
	free(r->raw);
	free(r->args);
	free(r);
}
