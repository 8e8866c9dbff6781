/* SPDX-License-Identifier: MIT */
/*
 * Records passed from the BPF programs to the loader through ring buffers.
 * Included by BPF (with vmlinux.h) and by user space (with linux/types.h):
 * fixed-width kernel types and fixed sizes only.
 */
#ifndef PTRACE_GPU_EVENTS_H
#define PTRACE_GPU_EVENTS_H

#define PTG_MAX_SNAPSHOT_DEPTH 128

/*
 * Kinds of ring-buffer record, in one range per probe module (the tracer
 * routes each range to its module): Python 1-15, dispatcher ops 16-31,
 * CUDA calls 32-47, scheduler 48-63, library loads 64-71, processes 72-79.
 */
enum ptg_ev_kind {
	PTG_EV_PY_START = 1, /* a new Python call: a = frame, b = code, aux = code fingerprint */
	PTG_EV_PY_RESUME =
	    2, /* a generator/coroutine continues: a = frame, b = code, aux = fingerprint */
	PTG_EV_PY_RETURN = 3, /* frame a returns */
	PTG_EV_PY_YIELD = 4,  /* frame a suspends (yield / await) */
	PTG_EV_PY_UNWIND = 5, /* frames above frame a exited by an exception (a may be 0: all) */
	PTG_EV_PY_STACK = 6,  /* snapshot of the thread's frame chain, see ptg_stack_event */
	PTG_EV_PY_CODE = 7, /* names of a code object seen for the first time, see ptg_code_event */

	/* a = op index (PTG_OP_COOKIE_OP), b = stack pointer, aux = enum ptg_op_site */
	PTG_EV_OP_ENTER = 16, /* first instruction of at::_ops::<op>::call */
	PTG_EV_OP_EXIT = 17,  /* a ret of it, or the jump of its tail call */

	/* aux = api | nesting depth << 8 (| result << 16 in EXIT); a = call id, b = stream, c =
	   bytes */
	PTG_EV_CUDA_ENTER = 32, /* a CUDA API call starts */
	PTG_EV_CUDA_EXIT = 33,	/* it returned: d = its ENTER's ts */

	PTG_EV_SCHED_OFF =
	    48, /* the thread is back on a CPU: ts = when it left, a = ns off-CPU,
		 * b = run-queue delay ns, c = waker tid, aux = enum ptg_sched_reason */

	PTG_EV_LIB_CHANGE = 64, /* the dynamic loader changed the set of mapped objects;
				 * aux = PTG_LIB_EXEC: the process exec'd a new image,
				 * the file a = inode, b = device (the kernel's dev_t) */

	/* record --children (bpf/proctree.bpf.c): pid = the process, a = its parent */
	PTG_EV_PROC_FORK = 72, /* a recorded process forked pid: recorded too, from its start */
	PTG_EV_PROC_EXEC = 73, /* recorded process pid exec()'d (tid: the thread that did) */
	PTG_EV_PROC_EXIT = 74, /* recorded process pid ended (its last thread exited) */
};

#define PTG_LIB_EXEC 1
/*
 * aux = PTG_LIB_MAP: the process mapped a CUDA or PyTorch library executable
 * while no probe of ours was on that file (struct ptg_lib_map_event); a = its
 * inode, b = when it was seen: PTG_LIB_MAP_*. A loader notice (aux 0) with
 * a = 1 stopped its thread there until the recorder resumes it.
 */
#define PTG_LIB_MAP	   2
#define PTG_LIB_MAP_NOTICE 0 /* at a loader notice */
#define PTG_LIB_MAP_EXIT   1 /* as the process ended */
#define PTG_LIB_MAP_HELD   2 /* at a loader notice that stopped its thread */
#define PTG_LIB_NAME_LEN   64

/* A thread stopped at a loader notice (bpf/libwatch.bpf.c, map held: tid -> this). */
struct ptg_lib_held {
	__u64 ts;   /* the notice's */
	__u32 tgid; /* its process, whose threads are let go together */
	__u32 pad;
};

/*
 * bpf_cookie of a CUDA entry point's uprobe: which API it is and where its
 * arguments are. An argument "slot" is its eightbyte in the SysV x86-64 call
 * (0-5 in registers, 6 and up on the stack); a struct such as dim3 passed by
 * value takes one slot per eightbyte.
 */
#define PTG_CUDA_MAX_NEST  4 /* calls open at once on a thread (runtime -> driver) */
#define PTG_CUDA_SLOT_NONE 0xff
#define PTG_CUDA_DIRECT	   0xff /* stream_off: the slot holds the stream itself */
#define PTG_CUDA_COOKIE(api, stream_slot, stream_off, bytes_slot, bytes_shift)                     \
	((__u64)(api) | (__u64)(stream_slot) << 16 | (__u64)(stream_off) << 24 |                   \
	 (__u64)(bytes_slot) << 32 | (__u64)(bytes_shift) << 40)
#define PTG_CUDA_API(c)		((__u32)((c)&0xffff))
#define PTG_CUDA_STREAM_SLOT(c) ((__u32)((c) >> 16) & 0xff)
#define PTG_CUDA_STREAM_OFF(c)                                                                     \
	((__u32)((c) >> 24) & 0xff) /* else: at this offset in the slot's struct */
#define PTG_CUDA_BYTES_SLOT(c)	((__u32)((c) >> 32) & 0xff)
#define PTG_CUDA_BYTES_SHIFT(c) ((__u32)((c) >> 40) & 0xff) /* bytes = count << shift */

/*
 * bpf_cookie of a dispatcher op's uprobe site: the op's index in the
 * loader's table, what the site is, and where the stack pointer of the op's
 * entry is at the site: base register (stack or frame pointer) + delta.
 */
enum ptg_op_site {
	PTG_OP_SITE_ENTRY = 0,
	PTG_OP_SITE_RET = 1,   /* a ret instruction */
	PTG_OP_SITE_TAIL = 2,  /* a jmp to another function, the stack as at entry */
	PTG_OP_SITE_CHECK = 3, /* the stack-protector jne on the way to a ret */
};
#define PTG_OP_COOKIE(op, site, fp, delta)                                                         \
	((__u64)(op) << 32 | (__u64)(__u16)(delta) << 16 | (__u64)(fp) << 2 | (site))
#define PTG_OP_COOKIE_OP(c)    ((c) >> 32)
#define PTG_OP_COOKIE_SITE(c)  ((__u32)((c)&3))
#define PTG_OP_COOKIE_FP(c)    ((__u32)((c) >> 2) & 1) /* 1: rbp + delta, 0: rsp + delta */
#define PTG_OP_COOKIE_DELTA(c) ((__s16)((c) >> 16))

/*
 * Where a kernel has no BPF cookies (before 5.15), the legacy builds find a
 * uprobe's cookie by its site: the probed file's inode and the site's offset
 * in the file (bpf/sitecookie.bpf.h's site_cookies, filled by the loader).
 * Preallocated (a tracing program's run-time allocated hash map makes 5.10
 * WARN in the kernel log): ten times the 6,388 op sites of PyTorch 2.x's
 * wheel, about 5 MiB.
 */
#define PTG_SITE_COOKIES_MAX (1 << 16)
struct ptg_site_key {
	__u64 ino;
	__u64 off;
};

/*
 * record -- CMD: a process's ops handed to the RecordFunction callback at
 * its first op (bpf/torchops.bpf.c, handover). What stops the thread is one
 * uprobe, on at::getStepCallbacksUnlessEmpty(), which every op's dispatch
 * calls before the op runs: no op probe is needed for it.
 */
enum ptg_op_handover_state {
	PTG_OP_HANDOVER_OFF = 0,     /* the probes record this process's ops */
	PTG_OP_HANDOVER_ARMED = 1,   /* its first op stops its thread, if it can */
	PTG_OP_HANDOVER_STOPPED = 2, /* stopped: the op agent goes in */
	PTG_OP_HANDOVER_AGENT = 3,   /* the callback records them */
	/*
	 * its first op could not stop it for the agent (another thread, a SIGURG
	 * handler): the probes go in, that thread stopped meanwhile where it can be
	 */
	PTG_OP_HANDOVER_UNSTOPPED = 4,
};
struct ptg_op_handover {
	__u64 state; /* enum ptg_op_handover_state (64 bits: BPF's compare-and-swap) */
	__u32 tid;   /* the thread its first op stopped */
	__u32 cpu;
	__u64 ts; /* when */
	/* ops of other threads while it was stopped (or the probes went in): in no record */
	__u64 missed;
	/* the first op, as the trigger saw it: return address, stack and frame pointers */
	__u64 ret;
	__u64 sp; /* the caller's stack pointer at the call */
	__u64 fp;
	/* UNSTOPPED: its thread (not the main one) was stopped all the same, for the probes */
	__u32 held;
	__u32 pad;
};

/*
 * record -- CMD: the command's Python calls move from the uprobes to the
 * in-process agent where its script starts (user/record/record_handover.c).
 * One uprobe, on PySys_Audit(), stops the main thread at the audit event
 * "cpython.run_*" that Py_RunMain raises before it runs the script, the
 * -c command, the -m module or stdin: no Python frame is on its stack then,
 * and the interpreter is initialized. bpf/pyframe.bpf.c, py_audit.
 */
enum ptg_py_handover_state {
	PTG_PY_HANDOVER_OFF = 0,     /* the uprobes record this process's calls */
	PTG_PY_HANDOVER_ARMED = 1,   /* its script's start stops its main thread, if it can */
	PTG_PY_HANDOVER_STOPPED = 2, /* stopped there: the agent goes in */
	/* it could not be stopped (a SIGURG handler, blocked or pending): the uprobes stay */
	PTG_PY_HANDOVER_UNSTOPPED = 3,
};
struct ptg_py_handover {
	__u64 state; /* enum ptg_py_handover_state */
	__u64 ts;    /* when the script's start was seen */
};

/*
 * BPF cookie of each Python probe site:
 *   bits  0-7   what the handler at that address does (enum ptg_py_probe)
 *   bits  8-12  the site's number (< PTG_PY_MAX_SITES): its state in BPF
 *   bits 16-23  1 + the pt_regs slot of the register that holds the frame
 *               there (user/proc/probesite.h), 0 when none does; with
 *               PTG_PY_REG_TSTATE it is the thread state's current frame
 *               (the caller, past a return handler's switch), not the
 *               handler's own
 *   bits 32-63  for probes on a file rather than one process, _PyRuntime's
 *               address less the site's (signed): the same in every process
 *               that maps the file, so the probe finds _PyRuntime at any load
 *               address
 */
#define PTG_PY_MAX_SITES 32
#define PTG_PY_NR_REGS	 15 /* general registers but rsp, in pt_regs order: r15 .. rdi */
#define PTG_PY_COOKIE(probe, site, reg1, delta)                                                    \
	((__u64)(probe) | (__u64)((site) & (PTG_PY_MAX_SITES - 1)) << 8 |                          \
	 (__u64)(__u8)(reg1) << 16 | (__u64)(__u32)(delta) << 32)
#define PTG_PY_COOKIE_PROBE(c) ((__u32)((c)&0xff))
#define PTG_PY_COOKIE_SITE(c)  ((__u32)((c) >> 8) & (PTG_PY_MAX_SITES - 1))
#define PTG_PY_COOKIE_REG1(c)  ((__u32)((c) >> 16) & 0x7f)
#define PTG_PY_REG_TSTATE      0x80 /* in the register byte */
#define PTG_PY_COOKIE_OWN(c)   (!((c) >> 16 & PTG_PY_REG_TSTATE))
#define PTG_PY_COOKIE_DELTA(c) ((__s64)(__s32)((c) >> 32))
/*
 * The legacy build of pyframe.bpf.c (kernels before bpf_loop, 5.17; before
 * cookies, 5.15) finds a site's cookie in a map the loader fills as it
 * attaches to a process: (tgid, the site's address in it) -> cookie.
 */
struct ptg_py_site_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};
enum ptg_py_probe {
	PTG_PY_PROBE_RESUME = 1,    /* RESUME / RESUME_QUICK handler */
	PTG_PY_PROBE_RETURN = 2,    /* RETURN_VALUE handler */
	PTG_PY_PROBE_YIELD = 3,	    /* YIELD_VALUE handler */
	PTG_PY_PROBE_TRACEBACK = 4, /* PyTraceBack_Here() */
	PTG_PY_PROBE_CODE_FREE = 5, /* code_dealloc(), PyCode_Type's tp_dealloc */
};

/* Why a stack snapshot was taken. */
enum ptg_snapshot_reason {
	PTG_SNAP_FIRST = 1, /* first event seen from this thread */
	PTG_SNAP_RESYNC = 2 /* events of this thread were dropped before */
};

struct ptg_event {
	__u64 ts; /* CLOCK_MONOTONIC ns */
	__u32 pid;
	__u32 tid;
	__u16 kind;
	__u16 cpu;
	__u32 aux;
	__u64 a;
	__u64 b;
	__u64 c; /* PY_START: the frame's first local (self of a method), for module paths */
	__u64 d; /* PY_START, PY_RESUME: the frame's previous frame (the caller) */
};

/* PTG_EV_LIB_CHANGE with aux PTG_LIB_MAP */
struct ptg_lib_map_event {
	struct ptg_event e;
	char name[PTG_LIB_NAME_LEN]; /* the file's base name, cut to fit */
};

/*
 * Code objects are freed and their addresses reused (a module's code, once it
 * ran): the fingerprint of its name, file and first line tells two apart.
 */
struct ptg_frame_ref {
	__u64 frame;
	__u64 code;
	__u64
	    local0; /* its first local (self of a method) when sent: user space reads it too late */
	__u32 fingerprint;
	__u32 pad;
};

/*
 * Sent before the event that triggered it: the frames that were on the thread's
 * stack before that event, innermost first.
 */
struct ptg_stack_event {
	struct ptg_event hdr; /* kind = PTG_EV_PY_STACK, aux = reason, a = depth, b = truncated */
	struct ptg_frame_ref frames[PTG_MAX_SNAPSHOT_DEPTH];
};

#define PTG_CODE_NAME_BYTES 256
#define PTG_CODE_FILE_BYTES 512

/*
 * Sent before the first event that names a code object (per address and
 * fingerprint), so a process that exits right after is still named. Strings
 * are the raw characters of CPython's compact str: width 1, 2 or 4 bytes per
 * character (0: could not be read, user space reads /proc/PID/mem instead).
 */
struct ptg_code_event {
	struct ptg_event
	    hdr; /* kind = PTG_EV_PY_CODE, a = code, aux = fingerprint, b = first line */
	__u8 name_width;
	__u8 file_width;
	__u16 name_chars;
	__u16 file_chars;
	__u16 pad;
	__u8 name[PTG_CODE_NAME_BYTES]; /* co_qualname */
	__u8 file[PTG_CODE_FILE_BYTES]; /* co_filename */
};

/* Loss accounting: per-CPU counters in .bss, indexed by this. */
enum ptg_loss_kind {
	PTG_LOSS_PY_EVENT = 0, /* ring buffer full: a Python event was dropped */
	PTG_LOSS_PY_STACK = 1, /* ring buffer full: a stack snapshot was dropped */
	PTG_LOSS_PY_READ = 2,  /* a read of target memory failed in BPF */
	PTG_LOSS_PY_DEPTH = 3, /* a snapshot was cut at PTG_MAX_SNAPSHOT_DEPTH */
	PTG_LOSS_PY_CODE = 4,  /* ring buffer full: the names of a code object were not sent */
	PTG_LOSS_NR_KINDS = 8,
};

#define PTG_MAX_CPUS 256

#endif /* PTRACE_GPU_EVENTS_H */
