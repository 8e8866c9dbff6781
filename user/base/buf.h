/* SPDX-License-Identifier: MIT */
/*
 * A growable byte buffer for text and binary output. The first failed
 * allocation sticks in err and later appends do nothing, so a writer can
 * append a whole document and check once at the end. data is always followed
 * by a NUL (once anything was appended), so text is a C string.
 */
#ifndef PTG_BUF_H
#define PTG_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	union { /* one memory, seen as bytes or as text */
		uint8_t *data;
		char *text;
	};
	size_t len, cap;
	int err; /* 0 or the first -errno */
};

/* Room for more bytes past len (and the NUL): 0 or b->err (-ENOMEM). */
int buf__reserve(struct buf *b, size_t more);
/* Appends n bytes of p; 0 or b->err. */
int buf__put(struct buf *b, const void *p, size_t n);
int buf__puts(struct buf *b, const char *s);
int __attribute__((format(printf, 2, 3))) buf__printf(struct buf *b, const char *fmt, ...);
/* Appends v as a LEB128 varint (base/varint.h). */
int buf__put_varint(struct buf *b, uint64_t v);
/* Empties b and clears err, keeping its memory for reuse. */
void buf__reset(struct buf *b);
/* Frees the memory; b is empty and usable again. */
void buf__free(struct buf *b);

#endif /* PTG_BUF_H */
