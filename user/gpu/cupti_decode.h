/* SPDX-License-Identifier: MIT */
/*
 * The CUPTI agent's messages -> trace records: cupti_decoder turns CUPTI
 * activity buffers, names and clock pairs into PTG_REC_GPU_* and
 * PTG_REC_CUDA_CALL records on CLOCK_MONOTONIC (docs/gpu.md).
 */
#ifndef PTG_CUPTI_DECODE_H
#define PTG_CUPTI_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/cupti_types.h"
#include "trace/trace.h"

struct cupti_decoder;

/* Records are written to w with pid (GPU records: tid 0; CUDA calls: the calling thread). */
int cupti_decoder__new(struct trace_writer *w, uint32_t pid, struct cupti_decoder **out);
/*
 * One message of the agent's protocol (PTG_CUPTI_MSG_CLOCK, _KERNEL_NAME,
 * _API_NAME, _BUFFER, _DROPPED; others are ignored). Returns 0, -EPROTO for a
 * malformed message, or an error of the writer.
 */
int cupti_decoder__message(struct cupti_decoder *d, uint32_t type, const void *data, size_t len);
/*
 * The messages of a byte stream as the agent sends it (headers and
 * payloads), as cupti_split_msgs() splits it; *used: the bytes of the
 * complete messages.
 */
int cupti_decoder__stream(struct cupti_decoder *d, const void *buf, size_t len, size_t *used);
/* Decodes a buffer of CUpti_Activity records (a BUFFER message's payload). */
int cupti_decoder__buffer(struct cupti_decoder *d, const void *buf, size_t len);
const struct cupti_decode_stats *cupti_decoder__stats(const struct cupti_decoder *d);
/*
 * From now on, an API record that fn matches to a host call is written as a
 * PTG_REC_FLOW linking the two (docs/trace-format.md), not as a CUDA_CALL.
 */
void cupti_decoder__set_join(struct cupti_decoder *d, cupti_join_fn fn, void *ctx);
/* Writes the loss counters (cupti_dropped, cupti_unknown, cupti_incomplete, cupti_undecoded). */
int cupti_decoder__losses(struct cupti_decoder *d);
void cupti_decoder__free(struct cupti_decoder *d);

#endif /* PTG_CUPTI_DECODE_H */
