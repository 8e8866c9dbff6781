// SPDX-License-Identifier: MIT
/*
 * The JSON text builder of the Chrome exporter (chrome_json.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/utf8.h"
#include "chrome/chrome_json.h"

/* A JSON string literal; a byte that starts no valid UTF-8 sequence becomes U+FFFD. */
void jb_json(struct buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run;
	char esc[8];
	size_t n;

	jb_put(b, "\"", 1);
	for (;;) {
		/* what needs no care goes in one piece: most names are plain ASCII */
		for (run = p; *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\'; p++)
			;
		jb_put(b, run, (size_t)(p - run));
		if (!*p)
			break;
		n = utf8_seq_len(p);
		if (!n) {
			jb_put(b, UTF8_REPLACEMENT, 3);
			n = 1;
		} else if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			jb_put(b, esc, 2);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			jb_put(b, esc, 6);
		} else {
			jb_put(b, (const char *)p, n);
		}
		p += n;
	}
	jb_put(b, "\"", 1);
}

/* The decimal digits of v, ending at end; returns where they start. */
static char *digits(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

/* printf's %" PRId64 ", without printf: the exporter writes several per event */
void jb_int(struct buf *b, int64_t v)
{
	char t[24], *p = digits(t + sizeof(t), v < 0 ? -(uint64_t)v : (uint64_t)v);

	if (v < 0)
		*--p = '-';
	jb_put(b, p, (size_t)(t + sizeof(t) - p));
}

void jb_uint(struct buf *b, uint64_t v)
{
	char t[24], *p = digits(t + sizeof(t), v);

	jb_put(b, p, (size_t)(t + sizeof(t) - p));
}

/* ns -> µs with exactly 3 decimals: the importer reads it back to the same ns */
void jb_us(struct buf *b, uint64_t ns)
{
	char t[32], *p = digits(t + sizeof(t), 1000 + ns % 1000);

	/* 1000 + the remainder gives its 3 digits with their zeros; the 1 becomes the point */
	*p = '.';
	p = digits(p, ns / 1000);
	jb_put(b, p, (size_t)(t + sizeof(t) - p));
}

void jarg_key(struct jargs *a, const char *key)
{
	if (a->open)
		jb_lit(a->b, ", ");
	else
		jb_lit(a->b, ", \"args\": {");
	a->open = true;
	jb_json(a->b, key);
	jb_lit(a->b, ": ");
}

void jarg_int(struct jargs *a, const char *key, int64_t v)
{
	jarg_key(a, key);
	jb_int(a->b, v);
}

/* An id stored as value + 1 (0 = absent). */
void jarg_id1(struct jargs *a, const char *key, int64_t v)
{
	if (v)
		jarg_int(a, key, v - 1);
}

void jarg_nz(struct jargs *a, const char *key, uint64_t v)
{
	if (v)
		jarg_int(a, key, (int64_t)v);
}

/* The shortest text that reads back as the same double, as Kineto's fmt writes it. */
void jarg_double(struct jargs *a, const char *key, double v)
{
	char buf[32];
	int prec;

	for (prec = 15; prec < 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	snprintf(buf, sizeof(buf), "%.*g", prec, v);
	jarg_key(a, key);
	/* a whole number stays a JSON float, as 7.0 */
	buf__puts(a->b, buf);
	if (!strpbrk(buf, ".eEn"))
		jb_lit(a->b, ".0");
}

void jarg_str(struct jargs *a, const char *key, const char *v)
{
	jarg_key(a, key);
	jb_json(a->b, v);
}

void jarg_dims(struct jargs *a, const char *key, int64_t xy, int64_t z)
{
	jarg_key(a, key);
	buf__printf(a->b, "[%u, %u, %" PRId64 "]", (uint32_t)xy, (uint32_t)((uint64_t)xy >> 32), z);
}

/* A record's own further args (PTG_F_ARGS_ADD): the blob's members inside "args". */
void jarg_members(struct jargs *a, const char *blob)
{
	size_t n = strlen(blob);

	if (n <= 2 || blob[0] != '{' || blob[n - 1] != '}')
		return;
	buf__puts(a->b, a->open ? ", " : ", \"args\": {");
	a->open = true;
	buf__put(a->b, blob + 1, n - 2);
}

/*
 * A top-level value of an imported trace, kept as JSON text in the trace's
 * metadata: any .ptg can hold any text there, so it is parsed and written
 * again (as valid UTF-8), or written as a string when it is no JSON.
 */
void jb_json_value(struct buf *b, const char *text)
{
	json_object *o = json_tokener_parse(text);
	char *valid;

	/* json-c's NULL is also what it parses "null" into */
	if (!o && strcmp(text, "null")) {
		jb_json(b, text);
		return;
	}
	valid = utf8_valid_dup(o ? json_object_to_json_string_ext(
				       o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
				 : "null");
	json_object_put(o);
	if (!valid) {
		b->err = -ENOMEM;
		return;
	}
	buf__puts(b, valid);
	free(valid);
}
