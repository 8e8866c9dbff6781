// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/varint.h"

int buf__reserve(struct buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *n;

	if (b->err)
		return b->err;
	/* +1: the NUL after the data */
	if (more > SIZE_MAX / 2 - b->len - 1)
		return b->err = -ENOMEM;
	if (b->len + more + 1 <= b->cap)
		return 0;
	while (cap < b->len + more + 1)
		cap *= 2;
	n = realloc(b->data, cap);
	if (!n)
		return b->err = -ENOMEM;
	b->data = n;
	b->cap = cap;
	return 0;
}

int buf__put(struct buf *b, const void *p, size_t n)
{
	if (buf__reserve(b, n))
		return b->err;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf__puts(struct buf *b, const char *s)
{
	return buf__put(b, s, strlen(s));
}

int buf__printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (buf__reserve(b, 0))
		return b->err;
	va_start(ap, fmt);
	n = vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return b->err = -EINVAL;
	if ((size_t)n >= b->cap - b->len) {
		/* did not fit: grow to the length it told and format again */
		if (buf__reserve(b, (size_t)n))
			return b->err;
		va_start(ap, fmt);
		vsnprintf(b->text + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
	return 0;
}

int buf__put_varint(struct buf *b, uint64_t v)
{
	if (buf__reserve(b, PTG_VARINT_MAX))
		return b->err;
	b->len = (size_t)(varint_put(b->data + b->len, v) - b->data);
	b->data[b->len] = '\0';
	return 0;
}

void buf__reset(struct buf *b)
{
	b->len = 0;
	b->err = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf__free(struct buf *b)
{
	free(b->data);
	*b = (struct buf){};
}
