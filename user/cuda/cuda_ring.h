/* SPDX-License-Identifier: MIT */
/*
 * The ring of CUDA calls that a CUPTI agent writes from CUPTI's callbacks
 * (agent/ptg_cupti_calls.h), read by the loader: mapped from the memfd the
 * agent passed, checked against what the target could do to it (shrink it,
 * grow it, lie in it), and read in order. What a call means is cuda.c's.
 */
#ifndef PTG_CUDA_RING_H
#define PTG_CUDA_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "ptg_cupti_calls.h"

struct cuda_ring;

/*
 * Maps fd (the agent's memfd of size bytes, said in its message; fd stays
 * the caller's). -EPROTO when it is not a ring of this build, or the target
 * could still change its size.
 */
int cuda_ring__open(int fd, uint64_t size, struct cuda_ring **out);
/* The oldest record not consumed, copied into *rec: true, or false when none is published. */
bool cuda_ring__peek(const struct cuda_ring *r, struct ptg_cupti_call_rec *rec);
/* The record peek gave is read: its slot goes back to the agent. */
void cuda_ring__consume(struct cuda_ring *r);
/* Calls the agent found no room for, so far. */
uint64_t cuda_ring__dropped(const struct cuda_ring *r);
void cuda_ring__free(struct cuda_ring *r);

#endif /* PTG_CUDA_RING_H */
