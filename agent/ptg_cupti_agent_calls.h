/* SPDX-License-Identifier: MIT */
/*
 * Inside the CUPTI agent: what its session (ptg_cupti_agent.c) asks of the
 * CUDA calls taken from CUPTI's callbacks (ptg_cupti_agent_calls.c).
 */
#ifndef PTG_CUPTI_AGENT_CALLS_H
#define PTG_CUPTI_AGENT_CALLS_H

#include <stdbool.h>

#include <cupti_callbacks.h>

#include "ptg_cupti_proto.h"

/* The subscriber's callback (cuptiSubscribe): calls of the table into the ring. */
void CUPTIAPI calls_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			     const void *data);
/*
 * Makes the ring (once per process) and turns on the callbacks of every
 * call of the table: the memfd to pass, with *m filled; or -errno with
 * every callback off (then the loader keeps its uprobes).
 */
int calls_start(CUpti_SubscriberHandle sub, struct ptg_cupti_call_ring_msg *m);
/* The loader said it reads no calls (struct ptg_cupti_call_ring.unread): calls_stop() them. */
bool calls_unread(void);
/* Turns the callbacks off (the ring stays mapped: a callback may still be in it). */
void calls_stop(CUpti_SubscriberHandle sub);
/* A forked child: the ring is its parent's, shared; it lets go of it. */
void calls_fork_child(void);

#endif /* PTG_CUPTI_AGENT_CALLS_H */
