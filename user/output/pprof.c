// SPDX-License-Identifier: MIT
/*
 * profile.proto by hand. Samples are encoded as they are added, so memory
 * holds the tables (strings, functions, locations, mappings) and the bytes
 * of the samples, not a copy of every sample's fields.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/outfile.h"
#include "base/u64map.h"
#include "base/varint.h"
#include "output/pprof.h"

#define WIRE_VARINT 0
#define WIRE_LEN    2

/* Field numbers of profile.proto */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
};

void pb_varint(struct buf *b, uint64_t v)
{
	buf__put_varint(b, v);
}

static void pb_key(struct buf *b, uint32_t field, uint32_t wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

void pb_uint(struct buf *b, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WIRE_VARINT);
	pb_varint(b, v);
}

/* int64 (not sint64): a negative value is its two's complement, ten bytes */
void pb_int(struct buf *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

void pb_bool(struct buf *b, uint32_t field, bool v)
{
	pb_uint(b, field, v);
}

void pb_bytes(struct buf *b, uint32_t field, const void *data, size_t len)
{
	pb_key(b, field, WIRE_LEN);
	pb_varint(b, len);
	buf__put(b, data, len);
}

void pb_packed_uint(struct buf *b, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;

	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += varint_len(v[i]);
	pb_key(b, field, WIRE_LEN);
	pb_varint(b, len);
	for (size_t i = 0; i < n; i++)
		pb_varint(b, v[i]);
}

void pb_packed_int(struct buf *b, uint32_t field, const int64_t *v, size_t n)
{
	pb_packed_uint(b, field, (const uint64_t *)v, n);
}

/* The body is written first; end() moves it up to make room for its length. */
size_t pb_begin(struct buf *b, uint32_t field)
{
	pb_key(b, field, WIRE_LEN);
	return b->len;
}

void pb_end(struct buf *b, size_t mark)
{
	size_t body = b->len - mark, n = varint_len(body);

	if (b->err || buf__reserve(b, n))
		return;
	memmove(b->data + mark + n, b->data + mark, body);
	varint_put(b->data + mark, body);
	b->len += n;
}

struct pprof_function {
	int64_t name, filename, start_line;
};

struct pprof_mapping {
	uint64_t start, limit, offset;
	int64_t filename;
	unsigned int flags; /* PPROF_HAS_* */
};

struct pprof_location {
	uint64_t mapping, address, function;
	int64_t line;
};

struct pprof_value_type {
	int64_t type, unit;
};

/* A label with its strings as string-table indices. */
struct pprof_slabel {
	int64_t key, str, num, unit;
};

/* One Sample: its locations and labels live in the pools of struct pprof. */
struct pprof_sample {
	size_t locs, nlocs;
	size_t labels, nlabels;
	int64_t values[PPROF_MAX_VALUES];
};

struct pprof {
	char **strings;
	size_t nstrings, strings_cap;
	struct u64map string_idx;     /* hash -> index + 1 */
	struct pprof_function *funcs; /* names that need no demangling: no system_name */
	size_t nfuncs, funcs_cap;
	struct u64map func_idx; /* hash -> id */
	struct pprof_mapping *maps;
	size_t nmaps, maps_cap;
	struct u64map map_idx;
	struct pprof_location *locs;
	size_t nlocs, locs_cap;
	struct u64map loc_idx;
	struct pprof_value_type types[PPROF_MAX_VALUES];
	size_t ntypes;
	struct pprof_value_type period_type;
	int64_t period, time_nanos, duration_nanos;
	/*
	 * One Sample per distinct (locations, labels): pprof, Pyroscope and
	 * Parca show a stack once however many rows of ours map to it.
	 */
	struct pprof_sample *samples;
	size_t nsamples, samples_cap;
	struct u64map sample_idx; /* hash -> index + 1 */
	uint64_t *sample_locs;
	size_t nsample_locs, sample_locs_cap;
	struct pprof_slabel *sample_labels;
	size_t nsample_labels, sample_labels_cap;
};

int pprof__new(struct pprof **out)
{
	struct pprof *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (pprof__string(p, "") < 0) {
		pprof__free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void pprof__free(struct pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nstrings; i++)
		free(p->strings[i]);
	free(p->strings);
	free(p->funcs);
	free(p->maps);
	free(p->locs);
	u64map__free(&p->string_idx);
	u64map__free(&p->func_idx);
	u64map__free(&p->map_idx);
	u64map__free(&p->loc_idx);
	u64map__free(&p->sample_idx);
	free(p->samples);
	free(p->sample_locs);
	free(p->sample_labels);
	free(p);
}

int64_t pprof__string(struct pprof *p, const char *s)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, s, strlen(s)), *idx;
	char *copy;

	/* probe on past other strings with the same hash */
	for (;; h++) {
		idx = u64map__get(&p->string_idx, u64map_key(h));
		if (!idx)
			break;
		if (!strcmp(p->strings[*idx - 1], s))
			return (int64_t)*idx - 1;
	}
	if (array_grow((void **)&p->strings, &p->strings_cap, p->nstrings + 1, sizeof(*p->strings)))
		return -ENOMEM;
	copy = strdup(s);
	if (!copy || u64map__put(&p->string_idx, u64map_key(h), p->nstrings + 1)) {
		free(copy);
		return -ENOMEM;
	}
	p->strings[p->nstrings++] = copy;
	return (int64_t)p->nstrings - 1;
}

int pprof__add_sample_type(struct pprof *p, const char *type, const char *unit)
{
	int64_t t = pprof__string(p, type), u = pprof__string(p, unit);

	if (t < 0 || u < 0)
		return -ENOMEM;
	if (p->ntypes >= PPROF_MAX_VALUES)
		return -E2BIG;
	p->types[p->ntypes++] = (struct pprof_value_type){t, u};
	return 0;
}

void pprof__set_period(struct pprof *p, const char *type, const char *unit, int64_t period)
{
	p->period_type.type = pprof__string(p, type);
	p->period_type.unit = pprof__string(p, unit);
	p->period = period;
}

void pprof__set_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

uint64_t pprof__function(struct pprof *p, const char *name, const char *filename,
			 int64_t start_line)
{
	struct pprof_function f = {pprof__string(p, name), pprof__string(p, filename), start_line};
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, &f, sizeof(f)), *id;

	if (f.name < 0 || f.filename < 0)
		return 0;
	for (;; h++) {
		id = u64map__get(&p->func_idx, u64map_key(h));
		if (!id)
			break;
		if (!memcmp(&p->funcs[*id - 1], &f, sizeof(f)))
			return *id;
	}
	if (array_grow((void **)&p->funcs, &p->funcs_cap, p->nfuncs + 1, sizeof(f)) ||
	    u64map__put(&p->func_idx, u64map_key(h), p->nfuncs + 1))
		return 0;
	p->funcs[p->nfuncs++] = f;
	return p->nfuncs;
}

uint64_t pprof__mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
			const char *filename, unsigned int flags)
{
	struct pprof_mapping m = {start, limit, offset, pprof__string(p, filename), flags};
	uint64_t *id;

	if (m.filename < 0)
		return 0;
	/* string indices are unique: the filename's index is the key */
	id = u64map__get(&p->map_idx, u64map_key((uint64_t)m.filename));
	if (id)
		return *id;
	if (array_grow((void **)&p->maps, &p->maps_cap, p->nmaps + 1, sizeof(m)) ||
	    u64map__put(&p->map_idx, u64map_key((uint64_t)m.filename), p->nmaps + 1))
		return 0;
	p->maps[p->nmaps++] = m;
	return p->nmaps;
}

uint64_t pprof__location(struct pprof *p, uint64_t mapping, uint64_t address, uint64_t function,
			 int64_t line)
{
	struct pprof_location l = {mapping, address, function, line};
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, &l, sizeof(l)), *id;

	for (;; h++) {
		id = u64map__get(&p->loc_idx, u64map_key(h));
		if (!id)
			break;
		if (!memcmp(&p->locs[*id - 1], &l, sizeof(l)))
			return *id;
	}
	if (array_grow((void **)&p->locs, &p->locs_cap, p->nlocs + 1, sizeof(l)) ||
	    u64map__put(&p->loc_idx, u64map_key(h), p->nlocs + 1))
		return 0;
	p->locs[p->nlocs++] = l;
	return p->nlocs;
}

static int intern_label(struct pprof *p, const struct pprof_label *l, struct pprof_slabel *out)
{
	out->key = pprof__string(p, l->key);
	out->str = l->str ? pprof__string(p, l->str) : 0;
	out->num = l->str ? 0 : l->num;
	out->unit = l->unit ? pprof__string(p, l->unit) : 0;
	return out->key < 0 || out->str < 0 || out->unit < 0 ? -ENOMEM : 0;
}

static bool same_sample(const struct pprof *p, const struct pprof_sample *s, const uint64_t *locs,
			size_t nlocs, const struct pprof_slabel *labels, size_t nlabels)
{
	return s->nlocs == nlocs && s->nlabels == nlabels &&
	       !memcmp(p->sample_locs + s->locs, locs, nlocs * sizeof(*locs)) &&
	       !memcmp(p->sample_labels + s->labels, labels, nlabels * sizeof(*labels));
}

static int sample_append(struct pprof *p, uint64_t key, const uint64_t *locs, size_t nlocs,
			 const struct pprof_slabel *labels, size_t nlabels,
			 struct pprof_sample **out)
{
	struct pprof_sample *s;

	if (array_grow((void **)&p->samples, &p->samples_cap, p->nsamples + 1,
		       sizeof(*p->samples)) ||
	    array_grow((void **)&p->sample_locs, &p->sample_locs_cap, p->nsample_locs + nlocs + 1,
		       sizeof(*p->sample_locs)) ||
	    array_grow((void **)&p->sample_labels, &p->sample_labels_cap,
		       p->nsample_labels + nlabels + 1, sizeof(*p->sample_labels)) ||
	    u64map__put(&p->sample_idx, key, p->nsamples + 1))
		return -ENOMEM;
	s = &p->samples[p->nsamples++];
	s->locs = p->nsample_locs;
	s->nlocs = nlocs;
	s->labels = p->nsample_labels;
	s->nlabels = nlabels;
	memcpy(p->sample_locs + s->locs, locs, nlocs * sizeof(*locs));
	memcpy(p->sample_labels + s->labels, labels, nlabels * sizeof(*labels));
	p->nsample_locs += nlocs;
	p->nsample_labels += nlabels;
	*out = s;
	return 0;
}

int pprof__add_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		      size_t nvalues, const struct pprof_label *labels, size_t nlabels)
{
	struct pprof_slabel *sl = calloc(nlabels + 1, sizeof(*sl));
	struct pprof_sample *s = NULL;
	uint64_t h, *idx;
	int err = sl ? 0 : -ENOMEM;

	if (nvalues != p->ntypes)
		err = -EINVAL;
	for (size_t i = 0; i < nlabels && !err; i++)
		err = intern_label(p, &labels[i], &sl[i]);
	if (err)
		goto cleanup;
	h = u64map_hash(U64MAP_HASH_SEED, locs, nlocs * sizeof(*locs));
	h = u64map_hash(h, sl, nlabels * sizeof(*sl));
	/* probe on past other samples with the same hash */
	for (;; h++) {
		idx = u64map__get(&p->sample_idx, u64map_key(h));
		if (!idx || same_sample(p, &p->samples[*idx - 1], locs, nlocs, sl, nlabels))
			break;
	}
	if (idx)
		s = &p->samples[*idx - 1];
	else
		err = sample_append(p, u64map_key(h), locs, nlocs, sl, nlabels, &s);
	for (size_t i = 0; !err && i < nvalues; i++)
		s->values[i] += values[i];
cleanup:
	free(sl);
	return err;
}

static void encode_samples(const struct pprof *p, struct buf *b)
{
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct pprof_sample *s = &p->samples[i];
		size_t m = pb_begin(b, PROFILE_SAMPLE), l;

		pb_packed_uint(b, 1, p->sample_locs + s->locs, s->nlocs);
		pb_packed_int(b, 2, s->values, p->ntypes);
		for (size_t j = 0; j < s->nlabels; j++) {
			const struct pprof_slabel *lab = &p->sample_labels[s->labels + j];

			l = pb_begin(b, 3);
			pb_int(b, 1, lab->key);
			pb_int(b, 2, lab->str);
			pb_int(b, 3, lab->num);
			pb_int(b, 4, lab->unit);
			pb_end(b, l);
		}
		pb_end(b, m);
	}
}

static void encode_value_type(struct buf *b, uint32_t field, const struct pprof_value_type *t)
{
	size_t m = pb_begin(b, field);

	pb_int(b, 1, t->type);
	pb_int(b, 2, t->unit);
	pb_end(b, m);
}

static void encode_tables(const struct pprof *p, struct buf *b)
{
	size_t m, l;

	for (size_t i = 0; i < p->nmaps; i++) {
		m = pb_begin(b, PROFILE_MAPPING);
		pb_uint(b, 1, i + 1);
		pb_uint(b, 2, p->maps[i].start);
		pb_uint(b, 3, p->maps[i].limit);
		pb_uint(b, 4, p->maps[i].offset);
		pb_int(b, 5, p->maps[i].filename);
		pb_bool(b, 7, p->maps[i].flags & PPROF_HAS_FUNCTIONS);
		pb_bool(b, 8, p->maps[i].flags & PPROF_HAS_FILENAMES);
		pb_bool(b, 9, p->maps[i].flags & PPROF_HAS_LINE_NUMBERS);
		pb_bool(b, 10, p->maps[i].flags & PPROF_HAS_INLINE_FRAMES);
		pb_end(b, m);
	}
	for (size_t i = 0; i < p->nlocs; i++) {
		m = pb_begin(b, PROFILE_LOCATION);
		pb_uint(b, 1, i + 1);
		pb_uint(b, 2, p->locs[i].mapping);
		pb_uint(b, 3, p->locs[i].address);
		if (p->locs[i].function) {
			l = pb_begin(b, 4);
			pb_uint(b, 1, p->locs[i].function);
			pb_int(b, 2, p->locs[i].line);
			pb_end(b, l);
		}
		pb_end(b, m);
	}
	for (size_t i = 0; i < p->nfuncs; i++) {
		m = pb_begin(b, PROFILE_FUNCTION);
		pb_uint(b, 1, i + 1);
		pb_int(b, 2, p->funcs[i].name);
		/*
		 * pprof demangles system_name into name when the two are equal,
		 * and strips <...> from what looks like C++: "<module>" became ""
		 * and showed as <unknown>. Only a mangled C++ symbol gets one.
		 */
		if (!strncmp(p->strings[p->funcs[i].name], "_Z", 2))
			pb_int(b, 3, p->funcs[i].name);
		pb_int(b, 4, p->funcs[i].filename);
		pb_int(b, 5, p->funcs[i].start_line);
		pb_end(b, m);
	}
}

int pprof__encode(struct pprof *p, struct buf *b)
{
	for (size_t i = 0; i < p->ntypes; i++)
		encode_value_type(b, PROFILE_SAMPLE_TYPE, &p->types[i]);
	encode_samples(p, b);
	encode_tables(p, b);
	/* a repeated string: "" at index 0 is written too */
	for (size_t i = 0; i < p->nstrings; i++)
		pb_bytes(b, PROFILE_STRING_TABLE, p->strings[i], strlen(p->strings[i]));
	pb_int(b, PROFILE_TIME_NANOS, p->time_nanos);
	pb_int(b, PROFILE_DURATION_NANOS, p->duration_nanos);
	if (p->period_type.type || p->period_type.unit)
		encode_value_type(b, PROFILE_PERIOD_TYPE, &p->period_type);
	pb_int(b, PROFILE_PERIOD, p->period);
	return b->err;
}

int pprof_gzip(const void *data, size_t len, struct buf *out)
{
	z_stream z = {};
	int ret;

	/* windowBits 15 + 16: a gzip header and trailer around the deflate stream */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
	    Z_OK)
		return -ENOMEM;
	if (buf__reserve(out, deflateBound(&z, len))) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = out->data + out->len;
	z.avail_out = (uInt)(out->cap - out->len);
	ret = deflate(&z, Z_FINISH);
	out->len += z.total_out;
	deflateEnd(&z);
	return ret == Z_STREAM_END ? 0 : -EIO;
}

/* Readers of a continuous profile directory never see half a file: outfile renames it in. */
static int write_file(const char *path, const struct buf *b)
{
	struct outfile *of;
	int err;

	err = outfile__open(path, &of);
	if (err)
		return err;
	err = outfile__write(of, b->data, b->len);
	if (err) {
		outfile__abort(of);
		return err;
	}
	return outfile__commit(of);
}

int pprof__write(struct pprof *p, const char *path)
{
	struct buf raw = {}, gz = {};
	int err;

	err = pprof__encode(p, &raw);
	if (!err)
		err = pprof_gzip(raw.data, raw.len, &gz);
	if (!err)
		err = write_file(path, &gz);
	buf__free(&raw);
	buf__free(&gz);
	return err;
}
