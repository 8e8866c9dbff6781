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

#include "output/chrome_json.h"
#include "base/utf8.h"

static void jb_reserve(struct jbuf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *p;

	if (b->err || b->len + more + 1 <= b->cap)
		return;
	while (cap < b->len + more + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return;
	}
	b->p = p;
	b->cap = cap;
}

void jb_put(struct jbuf *b, const char *s, size_t n)
{
	jb_reserve(b, n);
	if (b->err)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void jb_str(struct jbuf *b, const char *s)
{
	jb_put(b, s, strlen(s));
}

void __attribute__((format(printf, 2, 3))) jb_printf(struct jbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n >= 0)
		jb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string literal; a byte that starts no valid UTF-8 sequence becomes U+FFFD. */
void jb_json(struct jbuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];
	size_t n;

	jb_put(b, "\"", 1);
	for (; *p; p += n) {
		n = utf8_seq_len(p);
		if (!n) {
			jb_put(b, UTF8_REPLACEMENT, 3);
			n = 1;
		} else if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = *p;
			jb_put(b, esc, 2);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			jb_put(b, esc, 6);
		} else {
			jb_put(b, (const char *)p, n);
		}
	}
	jb_put(b, "\"", 1);
}

/* ns -> µs with exactly 3 decimals: the importer reads it back to the same ns */
void jb_us(struct jbuf *b, uint64_t ns)
{
	jb_printf(b, "%" PRIu64 ".%03u", ns / 1000, (unsigned int)(ns % 1000));
}

void jarg_key(struct jargs *a, const char *key)
{
	jb_str(a->b, a->open ? ", " : ", \"args\": {");
	a->open = true;
	jb_json(a->b, key);
	jb_str(a->b, ": ");
}

void jarg_int(struct jargs *a, const char *key, int64_t v)
{
	jarg_key(a, key);
	jb_printf(a->b, "%" PRId64, v);
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
	jb_str(a->b, buf);
	if (!strpbrk(buf, ".eEn"))
		jb_str(a->b, ".0");
}

void jarg_str(struct jargs *a, const char *key, const char *v)
{
	jarg_key(a, key);
	jb_json(a->b, v);
}

void jarg_dims(struct jargs *a, const char *key, int64_t xy, int64_t z)
{
	jarg_key(a, key);
	jb_printf(a->b, "[%u, %u, %" PRId64 "]", (uint32_t)xy, (uint32_t)((uint64_t)xy >> 32), z);
}

/* A record's own further args (PTG_F_ARGS_ADD): the blob's members inside "args". */
void jarg_members(struct jargs *a, const char *blob)
{
	size_t n = strlen(blob);

	if (n <= 2 || blob[0] != '{' || blob[n - 1] != '}')
		return;
	jb_str(a->b, a->open ? ", " : ", \"args\": {");
	a->open = true;
	jb_put(a->b, blob + 1, n - 2);
}

/*
 * A top-level value of an imported trace, kept as JSON text in the trace's
 * metadata: any .ptg can hold any text there, so it is parsed and written
 * again (as valid UTF-8), or written as a string when it is no JSON.
 */
void jb_json_value(struct jbuf *b, const char *text)
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
	jb_str(b, valid);
	free(valid);
}
