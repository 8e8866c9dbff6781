/* SPDX-License-Identifier: MIT */
/*
 * Maps shared by bpf/sample.bpf.c and the sampler (user/sample/sample.c). The BPF
 * side only counts: per (process, thread, Python stack, native stack) one
 * counter, and each distinct Python stack once, keyed by a hash of its
 * frames. User space reads aggregates and resolves code objects to names.
 * Fixed-width kernel types only: both sides must see the same bytes.
 */
#ifndef PTRACE_GPU_SAMPLE_H
#define PTRACE_GPU_SAMPLE_H

#include "ptrace_gpu/pyoffsets.h"

#define PTG_SAMPLE_MAX_DEPTH 128
/* ptg_sample_frame.instr: prev_instr / instr_ptr was not readable */
#define PTG_SAMPLE_INSTR_NONE 0x7fffffffu
/*
 * ptg_sample_frame.instr: the frame was entered from C, its own eval-loop
 * invocation (3.11: _PyInterpreterFrame.is_entry; 3.12+: a C-stack shim
 * frame is its previous).
 */
#define PTG_SAMPLE_FRAME_ENTRY 0x80000000u

/* Value of the procs map (key: tgid): where a process keeps its interpreter state. */
struct ptg_sample_proc {
	__u64 runtime_addr; /* runtime address of _PyRuntime */
	/* the version's row with its blocks (py_offsets_blocks()), as record has it */
	struct ptg_py_offsets off;
};

/*
 * The frame fields (from the frame's start) and the code fields (from
 * off.code_block, where record's code block starts) are read as one block of
 * this many bytes each: two reads per frame instead of seven. A field
 * outside its block is read on its own.
 */
#define PTG_SAMPLE_WINDOW 80

/* Value of the threads map (key: tid): the thread's PyThreadState, found by a walk. */
struct ptg_sample_thread {
	__u64 tstate; /* 0: the thread has none (yet) */
	__u64 checked_ns;
	__u32 tgid;
	__u32 ns_tid; /* the tid in the target's pid namespace: what native_thread_id holds */
};

/*
 * One Python frame as sampled. instr is prev_instr (3.11, 3.12) or
 * instr_ptr (3.13+) minus the code object's address in bytes (user space
 * subtracts the offset of co_code_adaptive and maps the instruction to a
 * line through co_linetable), or'ed with PTG_SAMPLE_FRAME_ENTRY.
 */
struct ptg_sample_frame {
	__u64 code;
	__u32 fingerprint; /* see ptg_code_fingerprint() */
	__u32 instr;
};

/* Value of the py_stacks map (key: hash of the frames), innermost frame first. */
struct ptg_sample_stack {
	__u32 depth;
	__u32 truncated; /* the outermost frames are missing: too deep, or one was unreadable */
	struct ptg_sample_frame frames[PTG_SAMPLE_MAX_DEPTH];
};

enum ptg_sample_kind {
	PTG_SAMPLE_CPU = 0,    /* a timer tick on a thread: count 1, ns = period */
	PTG_SAMPLE_OFFCPU = 1, /* a thread blocked: count 1, ns = time until it ran again */
};

/* Key of the counts map. */
struct ptg_sample_key {
	__u32 tgid;
	__u32 tid;
	__u64 py_stack;	    /* key in py_stacks; 0: no Python frame (no thread state) */
	__s32 native_stack; /* id in native_stacks; < 0: none taken or the take failed */
	__u16 kind;	    /* enum ptg_sample_kind */
	__u16 gen;	    /* the interval it was counted in (continuous mode) */
};

struct ptg_sample_value {
	__u64 count;
	__u64 ns;
};

enum ptg_sample_notice_kind {
	PTG_SAMPLE_NEW_STACK = 1,  /* a Python stack was stored for the first time */
	PTG_SAMPLE_NEW_THREAD = 2, /* a thread was sampled for the first time: read its name */
};

/* Ring-buffer record: something user space reads while the process lives. */
struct ptg_sample_notice {
	__u64 py_stack;
	__u32 tgid;
	__u32 tid;
	__u32 kind;
	__u32 pad;
};

/* Counters in the BPF program's .bss, per CPU, indexed by this. */
enum ptg_sample_stat {
	PTG_SAMPLE_STAT_TICKS = 0,    /* samples taken of threads of sampled processes */
	PTG_SAMPLE_STAT_NO_TSTATE,    /* the thread had no PyThreadState */
	PTG_SAMPLE_STAT_READ_ERR,     /* a read of target memory failed mid-walk */
	PTG_SAMPLE_STAT_TRUNCATED,    /* stack deeper than PTG_SAMPLE_MAX_DEPTH */
	PTG_SAMPLE_STAT_STACKS_FULL,  /* py_stacks full: the sample lost its Python stack */
	PTG_SAMPLE_STAT_COUNTS_FULL,  /* counts full: the sample was dropped */
	PTG_SAMPLE_STAT_NATIVE_ERR,   /* bpf_get_stackid failed (map full, collision) */
	PTG_SAMPLE_STAT_RINGBUF_DROP, /* notice dropped (resolved at the next sweep) */
	PTG_SAMPLE_STAT_TSTATE_WALKS, /* walks of the interpreter's thread list */
	PTG_SAMPLE_STAT_NR = 16,
};

#define PTG_SAMPLE_MAX_CPUS 256

#endif /* PTRACE_GPU_SAMPLE_H */
