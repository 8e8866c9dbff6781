/* SPDX-License-Identifier: MIT */
/*
 * pprof profiles (github.com/google/pprof, proto/profile.proto), encoded by
 * hand: a protobuf writer for the few wire types profile.proto uses, and a
 * builder that deduplicates strings, functions and locations, so callers add
 * samples as they come. Files are gzip-compressed, as pprof tools expect.
 */
#ifndef PTG_PPROF_H
#define PTG_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* The writer appends to a base/buf.h buffer; a failed allocation sticks in its err. */
void pb_varint(struct buf *b, uint64_t v);
/* Fields; proto3 leaves out zero scalars and these do too. */
void pb_uint(struct buf *b, uint32_t field, uint64_t v);
void pb_int(struct buf *b, uint32_t field, int64_t v);
void pb_bool(struct buf *b, uint32_t field, bool v);
void pb_bytes(struct buf *b, uint32_t field, const void *data, size_t len);
/* A repeated scalar field, packed (one length-delimited run of varints). */
void pb_packed_uint(struct buf *b, uint32_t field, const uint64_t *v, size_t n);
void pb_packed_int(struct buf *b, uint32_t field, const int64_t *v, size_t n);
/* A nested message: what is written between begin and end becomes its body. */
size_t pb_begin(struct buf *b, uint32_t field);
void pb_end(struct buf *b, size_t mark);

#define PPROF_MAX_VALUES 4

struct pprof_label {
	const char *key;
	const char *str; /* NULL: a numeric label */
	int64_t num;
	const char *unit; /* of num, or NULL */
};

struct pprof;

int pprof__new(struct pprof **out);
void pprof__free(struct pprof *p);
/* Index of s in the string table; "" is 0. Returns -ENOMEM on failure. */
int64_t pprof__string(struct pprof *p, const char *s);
/* Appends a value type (up to PPROF_MAX_VALUES); every sample has one value per type. */
int pprof__add_sample_type(struct pprof *p, const char *type, const char *unit);
void pprof__set_period(struct pprof *p, const char *type, const char *unit, int64_t period);
void pprof__set_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos);
/* Returns the id (>= 1) of the function, added once; 0 when out of memory. */
uint64_t pprof__function(struct pprof *p, const char *name, const char *filename,
			 int64_t start_line);
/* Mapping.has_* flags: what the profile already holds for its locations. */
#define PPROF_HAS_FUNCTIONS	0x1
#define PPROF_HAS_FILENAMES	0x2
#define PPROF_HAS_LINE_NUMBERS	0x4
#define PPROF_HAS_INLINE_FRAMES 0x8

/* A mapping of an object file, added once per filename; flags: PPROF_HAS_*. */
uint64_t pprof__mapping(struct pprof *p, uint64_t start, uint64_t limit, uint64_t offset,
			const char *filename, unsigned int flags);
/* A location (one function and line, or an address in a mapping), added once. */
uint64_t pprof__location(struct pprof *p, uint64_t mapping, uint64_t address, uint64_t function,
			 int64_t line);
/*
 * locs: leaf first; nvalues must equal the number of sample types. A sample
 * with the same locations and labels as an earlier one adds its values to it.
 */
int pprof__add_sample(struct pprof *p, const uint64_t *locs, size_t nlocs, const int64_t *values,
		      size_t nvalues, const struct pprof_label *labels, size_t nlabels);
/* The encoded Profile message. */
int pprof__encode(struct pprof *p, struct buf *out);
/* Encodes, gzips and writes to path (a new 0600 file renamed into place: outfile.h). */
int pprof__write(struct pprof *p, const char *path);

/* gzip (RFC 1952) of data, as pprof files are stored. */
int pprof_gzip(const void *data, size_t len, struct buf *out);

#endif /* PTG_PPROF_H */
