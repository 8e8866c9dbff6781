/* SPDX-License-Identifier: MIT */
/*
 * Unsigned LEB128 varints, as both the trace format and protobuf write them:
 * seven bits a byte, low first, the top bit set on every byte but the last.
 * (CPython's line tables use another, 6-bit varint: sample_resolve.c.)
 */
#ifndef PTG_VARINT_H
#define PTG_VARINT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* The longest varint of a u64: ceil(64 / 7) bytes. */
#define PTG_VARINT_MAX 10

/* Bytes varint_put() writes for v. */
static inline size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* p must have varint_len(v) (at most PTG_VARINT_MAX) bytes of room. Returns the new end. */
static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/*
 * Decodes one varint from [*pp, end) into *out and moves *pp past it. Returns
 * 0, or -EINVAL, leaving *pp and *out alone, when it runs past end or does not
 * fit in 64 bits: input read from a file may be hostile, never a crash.
 */
static inline int varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	unsigned int shift;

	for (shift = 0; shift < 64 && p < end; shift += 7) {
		uint8_t b = *p++;

		/* the 10th byte may only carry the top bit of a u64 */
		if (shift == 63 && b > 1)
			return -EINVAL;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*out = v;
			return 0;
		}
	}
	return -EINVAL;
}

#endif /* PTG_VARINT_H */
