// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

size_t utf8_seq_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF do not decode */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

char *utf8_valid_dup(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), out = 0, n;
	char *buf = malloc(len * 3 + 1);

	if (!buf)
		return NULL;
	for (size_t i = 0; i < len; i += n) {
		n = utf8_seq_len(p + i);
		if (n) {
			memcpy(buf + out, p + i, n);
			out += n;
		} else {
			memcpy(buf + out, UTF8_REPLACEMENT, 3);
			out += 3;
			n = 1;
		}
	}
	buf[out] = '\0';
	return buf;
}
