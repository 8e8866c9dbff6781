// SPDX-License-Identifier: MIT
/*
 * The framing of the agent's byte stream (agent/ptg_cupti_proto.h): a
 * header, then its payload. Shared by the socket's reader and the decoder's
 * stream entry; needs no CUPTI header.
 */
#include <errno.h>
#include <string.h>

#include "gpu/cupti_proto.h"
#include "ptg_cupti_proto.h"

int cupti_split_msgs(const void *buf, size_t len, size_t *used, cupti_msg_fn fn, void *ctx)
{
	const uint8_t *p = buf;
	struct ptg_cupti_msg_hdr h;
	size_t off = 0;
	int err = 0;

	while (!err && len - off >= sizeof(h)) {
		memcpy(&h, p + off, sizeof(h));
		if (h.len > PTG_CUPTI_MAX_MSG) {
			err = -EPROTO;
			break;
		}
		if (len - off - sizeof(h) < h.len)
			break;
		err = fn(ctx, h.type, p + off + sizeof(h), h.len);
		off += sizeof(h) + h.len;
	}
	*used = off;
	return err;
}
