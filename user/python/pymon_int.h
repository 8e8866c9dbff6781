/* SPDX-License-Identifier: MIT */
/*
 * What the two halves of user/python/pymon.c share: the agents' connections
 * (pymon.c) and the reading of their rings into frame and op events
 * (pymon_records.c).
 */
#ifndef PTG_PYMON_INT_H
#define PTG_PYMON_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/u64map.h"
#include "ptg_pymon_proto.h"
#include "pyinterp/pyinterp.h"
#include "python/pystack.h"
#include "tracer/tracer.h"

#define MAX_TIDS    65536      /* threads of one target: more is a lying agent */
#define MAX_FPRINTS (1u << 20) /* code objects whose fingerprints are cached */
#define MAX_OPNAMES (1u << 16) /* op names of one recording: more is a lying agent */

struct pymon {
	struct py_interp py;
	struct tracer *t;
	struct pystack *ps;
	uint64_t start_time; /* of py.pid (proc_start_time): injection checks it is the same */
	pid_t held_tid;	     /* pymon__hold(): injected into this held, stopped thread */
	uint64_t since_ts;   /* pymon__since(): frame events before are the uprobes' */
	uint64_t began_ns;   /* the agent's: its callbacks in, the GIL still held */
	int agent_fd;	     /* the agent file, checked by trusted_open() */
	char agent[PATH_MAX];
	int sock; /* the agent's end of a socketpair the target made (inject_opts.pass_socket) */
	int memfd;
	struct ptg_pymon_ring *ring;
	struct ptg_pymon_rec *recs;
	size_t map_len;
	uint64_t nrecs;
	uint64_t tail;	       /* our copy: the shared one is only written */
	uint64_t ahead;	       /* records up to here had their code objects read */
	struct u64map depths;  /* tid -> frames on its stack as we know it */
	struct u64map fprints; /* code -> fingerprint << 1 | 1 */
	int memfd_target;      /* /proc/PID/mem, for fingerprints */
	struct ptg_stack_event snap;
	uint64_t bad;
	int tool_id;
	unsigned int ring_mb;
	struct torchops *ops; /* where op records go; NULL: none asked for */
	bool ops_on;	      /* the agent's RecordFunction callback is in */
	char ops_msg[256];    /* why not, from the agent */
	bool ops_only;	      /* pymon__open_ops(): the probes record the frames */
	bool fall_back;	      /* pymon__fall_back(): an attach that fails is said by record */
	bool exec_gone;	      /* pymon__exec(): the agent went with the image its process left */
	bool dropped;	      /* pymon__drop(): never took over, nothing of it is read */
	char failure[PATH_MAX + 640]; /* and why it failed */
	struct u64map opnames;	      /* name id -> symbol << 1 | 1 */
	/* record -p A,B --in-process: the other processes, each its own agent (pymon__add()) */
	struct pymon *next;
	struct pymon *route; /* of the first: the process of the previous frame event */
};

/*
 * tracer.h's source: every agent's records up to upto_ts (ctx: the first
 * pymon); 1 when newer ones wait.
 */
int pymon_drain(struct tracer *t, void *ctx, uint64_t upto_ts);
/* tracer.h's finish: the agents' losses and their stack engines'. */
int pymon_write_losses(struct tracer *t, void *ctx);
/* The frame events' handler: each to the stack engine of its process. */
int pymon_handle(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size);

#endif /* PTG_PYMON_INT_H */
