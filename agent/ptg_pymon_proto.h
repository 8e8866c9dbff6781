/* SPDX-License-Identifier: MIT */
/*
 * `record --in-process`: what the sys.monitoring agent (agent/ptg_pymon_agent.c,
 * inside the target) and the loader (user/python/pymon.c) share. The loader
 * makes a memfd (sealed against shrink and grow), passes it over a unix
 * socket with struct ptg_pymon_setup, and the agent answers once with struct
 * ptg_pymon_status. The memfd holds struct ptg_pymon_ring and, from
 * PTG_PYMON_RECS_OFF, a ring of struct ptg_pymon_rec written by the target's
 * threads and read by the loader. The loader ends the session by closing
 * the socket (or by dying: the kernel closes it); the agent then takes its
 * callbacks out. Agent and loader come from the same build: native byte order.
 */
#ifndef PTG_PYMON_PROTO_H
#define PTG_PYMON_PROTO_H

#include <stdint.h>

#define PTG_PYMON_PROTO_VERSION 8
/* Exported by the agent; the loader calls it through ptrace after injecting the library. */
#define PTG_PYMON_ATTACH_SYM "ptg_pymon_attach"
/* record -- CMD: then called on the held thread that has the GIL, for the session to take it */
#define PTG_PYMON_LET_IN_SYM "ptg_pymon_let_in"
/* and at its first PyTorch op, on the thread that op stopped: the op callback goes in */
#define PTG_PYMON_OPS_IN_SYM "ptg_pymon_ops_in"
#define PTG_PYMON_MAGIC	     0x6e6f6d7970677470ull /* "ptgpymon" */
#define PTG_PYMON_RECS_OFF   4096u
/* The most frames one snapshot carries, as PTG_MAX_SNAPSHOT_DEPTH (events.h) */
#define PTG_PYMON_MAX_DEPTH 128u

enum ptg_pymon_kind {
	PTG_PYMON_START = 1,  /* PY_START: a new call of code */
	PTG_PYMON_RESUME = 2, /* PY_RESUME: a generator or coroutine continues */
	PTG_PYMON_RETURN = 3, /* PY_RETURN */
	PTG_PYMON_YIELD = 4,  /* PY_YIELD */
	PTG_PYMON_UNWIND = 5, /* PY_UNWIND: the frame exits by an exception */
	PTG_PYMON_THROW = 6,  /* PY_THROW: a generator resumed by throw() */
	/*
	 * The thread's stack before the event that follows the group, as
	 * code objects: one STACK (code = depth n, aux = enum
	 * ptg_snapshot_reason, tid's first event or after a drop) and n FRAME
	 * records (code = the code object), innermost first. A group is
	 * reserved at once, so its records are consecutive.
	 */
	PTG_PYMON_STACK = 7,
	PTG_PYMON_FRAME = 8,
	/*
	 * PyTorch ops, from a RecordFunction callback (FUNCTION scope: what
	 * torch.profiler records as aten::*): code = the op's key on its thread
	 * (PTG_PYMON_OP_KEY_TOP - its nesting depth there); ENTER's arg = its
	 * name's id (a 64-bit hash of the name, sent once as a NAME group
	 * first), EXIT's 0 (the key pairs it).
	 */
	PTG_PYMON_OP_ENTER = 9,
	PTG_PYMON_OP_EXIT = 10,
	/*
	 * A name: NAME (code = its length, at most PTG_PYMON_MAX_NAME; arg = its
	 * id) and ceil(length / 16) NAME_BYTES records, each carrying 16 bytes
	 * in ts and arg; reserved at once with the op record that first uses it.
	 */
	PTG_PYMON_NAME = 11,
	PTG_PYMON_NAME_BYTES = 12,
	/*
	 * A code object's names, sent at its first sight in a generation of
	 * the agent's code set, ahead of every record that names it: CODE
	 * (code = the code object; arg = co_firstlineno in bits 0-31, the
	 * qualname's length in bits 32-47, at most PTG_PYMON_MAX_QUALNAME, and
	 * the filename's in 48-63, at most PTG_PYMON_MAX_FILENAME) and 1 +
	 * ceil((qualname + filename) / 16) NAME_BYTES records: the addresses
	 * of the two str objects (ts, arg: what ptg_code_fingerprint() hashes,
	 * so that the loader's other readers of the object agree), then the
	 * qualname's bytes and the filename's, as UTF-8 with no NUL. It names
	 * the address from its place in the ring on: a later group for the same
	 * address (a new code object where a freed one was) renames it there.
	 * Both lengths 0: names that could not be had; the loader reads the
	 * object from memory (the agent keeps it alive until the loader has
	 * read past the records that name it).
	 */
	PTG_PYMON_CODE = 13,
	PTG_PYMON_NR_KINDS,
};

/*
 * 32 bytes; seq is (the record's index + 1) mod 2^32, stored last (release)
 * once the rest is written.
 */
struct ptg_pymon_rec {
	uint32_t seq;
	uint32_t tid; /* gettid() in the target's pid namespace */
	uint64_t ts;  /* CLOCK_MONOTONIC ns, the BPF clock */
	/* the code object (user addresses are below 2^56) | enum ptg_pymon_kind << 56 */
	uint64_t code_kind;
	/*
	 * START, FRAME: the frame's first local (self of a method) when the
	 * agent could read it, else 0; STACK: enum ptg_snapshot_reason
	 */
	uint64_t arg;
};

#define PTG_PYMON_KIND_SHIFT   56
#define PTG_PYMON_OP_KEY_TOP   (1ull << 55)
#define PTG_PYMON_MAX_NAME     255u
#define PTG_PYMON_MAX_QUALNAME 255u
#define PTG_PYMON_MAX_FILENAME 511u
#define PTG_PYMON_CODE_MASK    ((1ull << PTG_PYMON_KIND_SHIFT) - 1)

/*
 * The memfd's first page. The loader fills magic .. nrecs before it sends
 * the fd; head and dropped are the agent's, tail the loader's (each on a
 * cache line of its own).
 */
struct ptg_pymon_ring {
	uint64_t magic;
	uint32_t version;
	uint32_t rec_size; /* sizeof(struct ptg_pymon_rec) */
	uint64_t nrecs;	   /* a power of two; the file is PTG_PYMON_RECS_OFF + nrecs * rec_size */
	uint8_t pad0[40];
	uint64_t head; /* records reserved by the agent */
	uint8_t pad1[56];
	uint64_t tail; /* records consumed by the loader */
	uint8_t pad2[56];
	uint64_t dropped; /* events the agent found no room for (the ring was full) */
};

/* Where a frame's first local is, from the interpreter's layout (pyoffsets.h); -1: none. */
struct ptg_pymon_layout {
	int32_t tstate_cframe;	  /* PyThreadState.cframe (3.12), -1 from 3.13 */
	int32_t current_frame;	  /* _PyCFrame.current_frame, or PyThreadState.current_frame */
	int32_t frame_code;	  /* _PyInterpreterFrame.f_code / f_executable */
	int32_t frame_localsplus; /* _PyInterpreterFrame.localsplus */
	int32_t frameobj_frame;	  /* PyFrameObject.f_frame */
	int32_t frame_prev_instr; /* _PyInterpreterFrame.prev_instr (3.11 only) */
	uint64_t ref_mask;	  /* the tag bits of a reference (3.14's stack refs) cleared */
	/*
	 * 3.11 (no sys.monitoring: a C profile function instead): where
	 * PyThreadState.c_profilefunc is (c_profileobj is 16 bytes on; the agent
	 * checks both on its own thread state before it trusts them), -1 from 3.12
	 */
	int32_t tstate_profilefunc;
	uint8_t resume_where_mask; /* RESUME's oparg bits: 0 a call starts, else a resume */
	uint8_t yield_ops[3];	   /* YIELD_VALUE (and forms), 0-ended */
	uint8_t resume_ops[8];	   /* RESUME and its specialized forms, 0-ended */
};

/* Loader to agent, with the memfd (SCM_RIGHTS). */
/* ptg_pymon_setup.flags */
#define PTG_PYMON_WANT_OPS 1u /* PyTorch's ops through a RecordFunction callback, if loaded */
/*
 * Ops alone (with WANT_OPS): no Python callbacks, the loader's probes
 * record the frames (record's default, docs/torch.md); no ops is a failure
 */
#define PTG_PYMON_OPS_ONLY 2u
/*
 * Handed over from the uprobes (record -- CMD, where its script starts, no
 * frame on the stopped thread): refused if any other thread runs Python,
 * whose frames began on the uprobes
 */
#define PTG_PYMON_ALONE 4u

struct ptg_pymon_setup {
	uint32_t version;
	uint32_t flags;
	struct ptg_pymon_layout layout;
	/* the target's libpython as it sees it, for an embedder that loaded it RTLD_LOCAL; or "" */
	char libpython[4096];
};

enum ptg_pymon_state {
	PTG_PYMON_ACTIVE = 1, /* the callbacks are in: records follow */
	PTG_PYMON_FAILED = 2, /* nothing was changed in the target; msg says why */
};

/* Agent to loader, once. */
struct ptg_pymon_status {
	uint32_t version;
	int32_t state;	   /* enum ptg_pymon_state */
	int32_t tool_id;   /* the sys.monitoring tool id taken, -1 if none */
	uint32_t pid;	   /* getpid() in the target's pid namespace */
	int32_t ops;	   /* 1: PyTorch's ops come as OP_* records (RecordFunction callback) */
	char msg[256];	   /* NUL-terminated */
	char ops_msg[256]; /* why ops do not come (ops 0), or "" */
	/*
	 * CLOCK_MONOTONIC once the callbacks were in, the GIL still held: no
	 * frame of any thread began between the callbacks going in and this;
	 * where a hand-over from the uprobes cuts the trace (PTG_PYMON_ALONE)
	 */
	uint64_t since_ns;
};

#endif /* PTG_PYMON_PROTO_H */
