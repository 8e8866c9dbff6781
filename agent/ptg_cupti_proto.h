/* SPDX-License-Identifier: MIT */
/*
 * What the CUPTI agent (agent/ptg_cupti_agent.c, inside the target) sends to
 * the loader (user/gpu/gpu.c) over one unix stream socket per process: a
 * sequence of messages, each a header and `len` bytes of payload. Agent and
 * loader are built from the same tree for the same machine, so integers are
 * in native byte order. The loader ends a session by shutting down its
 * writing side; the agent then flushes, sends DROPPED and END, and closes.
 * docs/gpu.md describes the protocol and its failure modes.
 */
#ifndef PTG_CUPTI_PROTO_H
#define PTG_CUPTI_PROTO_H

#include <stdint.h>

#define PTG_CUPTI_PROTO_VERSION 2
/* Environment of `record -- CMD`: the loader's abstract socket name. */
#define PTG_CUPTI_SOCKET_ENV "PTG_CUPTI_SOCKET"
/* Exported by the agent; `record -p` calls it after injecting the library. */
#define PTG_CUPTI_ATTACH_SYM "ptg_cupti_attach"
/* A message larger than this is a protocol error (CUPTI buffers are 2 MiB). */
#define PTG_CUPTI_MAX_MSG (64u << 20)

enum ptg_cupti_msg_type {
	PTG_CUPTI_MSG_HELLO = 1,       /* struct ptg_cupti_hello */
	PTG_CUPTI_MSG_STATUS = 2,      /* struct ptg_cupti_status + message text */
	PTG_CUPTI_MSG_CLOCK = 3,       /* struct ptg_cupti_clock */
	PTG_CUPTI_MSG_KERNEL_NAME = 4, /* struct ptg_cupti_kernel_name + name bytes */
	PTG_CUPTI_MSG_API_NAME = 5,    /* struct ptg_cupti_api_name + name bytes */
	PTG_CUPTI_MSG_BUFFER = 6,      /* CUpti_Activity records, as CUPTI wrote them */
	PTG_CUPTI_MSG_DROPPED = 7,     /* struct ptg_cupti_dropped: counts since the last one */
	PTG_CUPTI_MSG_END = 8,	       /* empty: the agent is done and closes */
	/*
	 * struct ptg_cupti_call_ring_msg, with the ring's memfd (SCM_RIGHTS):
	 * the CUDA calls come from CUPTI's callbacks from now on
	 * (ptg_cupti_calls.h); sent once, before ACTIVE
	 */
	PTG_CUPTI_MSG_CALL_RING = 9,
};

struct ptg_cupti_msg_hdr {
	uint32_t type;
	uint32_t len; /* payload bytes after the header */
};

struct ptg_cupti_hello {
	uint32_t proto_version;
	uint32_t pid;		      /* getpid() in the target's PID namespace */
	uint32_t cupti_version;	      /* cuptiGetVersion() of the loaded libcupti */
	uint32_t cupti_build_version; /* CUPTI_API_VERSION the agent was built with */
};

enum ptg_cupti_state {
	PTG_CUPTI_ACTIVE = 1, /* activity recording is on */
	PTG_CUPTI_BUSY = 2,   /* another CUPTI client (Kineto, Nsight) holds CUPTI: quiet */
	PTG_CUPTI_FAILED = 3, /* CUPTI refused for another reason: quiet */
};

struct ptg_cupti_status {
	int32_t state;	      /* enum ptg_cupti_state */
	int32_t cupti_result; /* CUptiResult of the failing call, 0 if none */
			      /* followed by a message, no NUL */
};

/* One paired reading of the two clocks, taken as close together as possible. */
struct ptg_cupti_clock {
	uint64_t cupti_ns; /* cuptiGetTimestamp() */
	uint64_t mono_ns;  /* clock_gettime(CLOCK_MONOTONIC) */
};

/* Kernel records carry a pointer to their name: sent once per pointer, before the first use. */
struct ptg_cupti_kernel_name {
	uint64_t ptr;
	/* followed by the name as CUPTI gives it (mangled), no NUL */
};

/* API records carry a callback id: its name, once per (domain, cbid), before the first use. */
struct ptg_cupti_api_name {
	uint32_t domain; /* CUPTI_CB_DOMAIN_RUNTIME_API or CUPTI_CB_DOMAIN_DRIVER_API */
	uint32_t cbid;
	/* followed by cuptiGetCallbackName()'s text, no NUL */
};

/*
 * The agent never waits for the loader while the application does: when the
 * loader lags, the agent's buffers stay queued, CUPTI gets no new buffer and
 * drops records, and counts them here.
 */
struct ptg_cupti_dropped {
	uint64_t cupti;	  /* cuptiActivityGetNumDroppedRecords(): CUPTI had no buffer */
	uint64_t unknown; /* records of a kind this build does not decode, not sent */
};

struct ptg_cupti_call_ring_msg {
	uint64_t size;	   /* of the memfd: PTG_CUPTI_CALLS_OFF + nrecs * rec_size */
	uint64_t since_ns; /* CLOCK_MONOTONIC before the callbacks were enabled */
	uint32_t enabled;  /* calls of the table whose callbacks CUPTI turned on */
	uint32_t pad;
};

#endif /* PTG_CUPTI_PROTO_H */
