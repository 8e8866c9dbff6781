/* SPDX-License-Identifier: MIT */
/*
 * Names read from a target's memory or from an imported file are not
 * trusted to be valid UTF-8, while JSON, XML and marshal readers reject a
 * whole file for one bad byte: writers pass names through these.
 */
#ifndef PTG_UTF8_H
#define PTG_UTF8_H

#include <stddef.h>

/* U+FFFD REPLACEMENT CHARACTER, what an invalid byte becomes */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/* Length of the valid UTF-8 sequence at s, or 0 when it is not one. */
size_t utf8_seq_len(const unsigned char *s);
/* A malloc'ed copy of s with each byte that starts no valid sequence as U+FFFD; NULL: no memory. */
char *utf8_valid_dup(const char *s);

#endif /* PTG_UTF8_H */
