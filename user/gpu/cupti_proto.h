/* SPDX-License-Identifier: MIT */
/*
 * The framing of the CUPTI agent's stream (agent/ptg_cupti_proto.h): a
 * header, then its payload, message after message.
 */
#ifndef PTG_GPU_CUPTI_PROTO_H
#define PTG_GPU_CUPTI_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* One message of the agent's protocol (agent/ptg_cupti_proto.h). */
typedef int (*cupti_msg_fn)(void *ctx, uint32_t type, const uint8_t *data, size_t len);

/*
 * Calls fn for each complete message at the start of buf (len bytes) and sets
 * *used to the bytes they take; what follows is the start of an incomplete
 * one. Returns 0, -EPROTO for a header announcing more than
 * PTG_CUPTI_MAX_MSG bytes, or the first error of fn.
 */
int cupti_split_msgs(const void *buf, size_t len, size_t *used, cupti_msg_fn fn, void *ctx);

#endif /* PTG_GPU_CUPTI_PROTO_H */
