/* SPDX-License-Identifier: MIT */
/*
 * JSON text as the Chrome exporter writes it (Kineto's spacing), appended to
 * a base/buf.h buffer (which keeps its first error instead of failing each
 * call): string literals made valid UTF-8, times in µs that read back to the
 * same ns, and an event's "args" object written member by member.
 */
#ifndef PTG_CHROME_JSON_H
#define PTG_CHROME_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"

/*
 * buf__put() with the common case inline: the exporter appends a dozen small
 * pieces per event, millions of events.
 */
static inline void jb_put(struct buf *b, const void *p, size_t n)
{
	if (!b->err && b->len + n < b->cap) {
		memcpy(b->data + b->len, p, n);
		b->len += n;
		b->data[b->len] = '\0';
	} else {
		buf__put(b, p, n);
	}
}

/* A string literal, its length known at compile time. */
#define jb_lit(b, lit) jb_put(b, "" lit, sizeof(lit) - 1)

/* A JSON string literal; a byte that starts no valid UTF-8 sequence becomes U+FFFD. */
void jb_json(struct buf *b, const char *s);

/* An integer in decimal. */
void jb_int(struct buf *b, int64_t v);
void jb_uint(struct buf *b, uint64_t v);

/* ns -> µs with exactly 3 decimals: the importer reads it back to the same ns */
void jb_us(struct buf *b, uint64_t ns);

/*
 * A top-level value kept as JSON text in a trace's metadata, parsed and
 * written again (as valid UTF-8), or written as a string when it is no JSON.
 */
void jb_json_value(struct buf *b, const char *text);

/* Args are written as they come; the first one opens the object. */
struct jargs {
	struct buf *b;
	bool open;
};

void jarg_key(struct jargs *a, const char *key);
void jarg_int(struct jargs *a, const char *key, int64_t v);
/* An id stored as value + 1 (0 = absent): written as value, or not at all. */
void jarg_id1(struct jargs *a, const char *key, int64_t v);
/* Written only when not 0. */
void jarg_nz(struct jargs *a, const char *key, uint64_t v);
/* The shortest text that reads back as the same double, as Kineto's fmt writes it. */
void jarg_double(struct jargs *a, const char *key, double v);
void jarg_str(struct jargs *a, const char *key, const char *v);
/* Kineto's [x, y, z] launch dimensions from x | y << 32 and z. */
void jarg_dims(struct jargs *a, const char *key, int64_t xy, int64_t z);
/* A record's own further args (PTG_F_ARGS_ADD): the blob's members inside "args". */
void jarg_members(struct jargs *a, const char *blob);

#endif /* PTG_CHROME_JSON_H */
