/* SPDX-License-Identifier: MIT */
/*
 * Structure offsets of one CPython version, as the BPF programs need them.
 * Filled by user space from the one version table (user/pyinterp/pyversions.c, checked
 * against _Py_DebugOffsets on 3.13+) and put in the BPF programs' read-only
 * data (record) or in a per-process map value (sample) before use.
 */
#ifndef PTRACE_GPU_PYOFFSETS_H
#define PTRACE_GPU_PYOFFSETS_H

/* An offset that this version does not have. */
#define PTG_OFF_NONE 0xffffffffu

/*
 * Frame and code references are tagged pointers from 3.14 on (_PyStackRef:
 * the low bits say how the reference is counted). Objects are 8-byte aligned
 * at least, so clearing the low 3 bits is right for every version.
 */
#define PTG_PY_REF_MASK (~7ull)

/*
 * record's hot path reads the fields it needs of a struct with one
 * bpf_probe_read_user of the block that holds them all: a read costs about
 * 100 ns whatever its size at these sizes (the fault-safe user copy, not the
 * bytes), and a call read a dozen fields. py_offsets_blocks()
 * (user/pyinterp/pyversions.c) computes each version's blocks and refuses one larger
 * than these buffers.
 */
#define PTG_PY_TSTATE_BLOCK_MAX 128
#define PTG_PY_FRAME_BLOCK_MAX	96
#define PTG_PY_CODE_BLOCK_MAX	176
/* the code block also holds this much of co_code_adaptive: where a call's RESUME is */
#define PTG_PY_CODE_UNIT_BYTES 24

struct ptg_py_offsets {
	/* finding a thread's PyThreadState: walk the interpreters' thread lists */
	__u32 runtime_interp_head; /* _PyRuntimeState.interpreters.head */
	__u32 interp_next;	   /* PyInterpreterState.next */
	__u32 interp_threads_head; /* PyInterpreterState.threads.head */
	__u32 tstate_next;	   /* PyThreadState.next */
	__u32 tstate_native_tid;   /* PyThreadState.native_thread_id */
	/* its innermost frame: tstate->cframe->current_frame (3.11, 3.12) or tstate->current_frame
	 */
	__u32 tstate_cframe;	    /* PyThreadState.cframe, PTG_OFF_NONE from 3.13 */
	__u32 cframe_current_frame; /* _PyCFrame.current_frame, or PyThreadState.current_frame */
	__u32 frame_code;	    /* _PyInterpreterFrame.f_code / f_executable */
	__u32 frame_previous;	    /* _PyInterpreterFrame.previous */
	__u32 frame_prev_instr;	    /* _PyInterpreterFrame.prev_instr / instr_ptr (3.13+) */
	__u32 frame_owner;	    /* _PyInterpreterFrame.owner */
	__u32 frame_is_entry;	    /* _PyInterpreterFrame.is_entry (3.11), else PTG_OFF_NONE */
	__u32 frameobj_frame;	    /* PyFrameObject.f_frame */
	__u32 frame_localsplus;	    /* _PyInterpreterFrame.localsplus */
	__u32 code_filename;	    /* PyCodeObject.co_filename */
	__u32 code_qualname;	    /* PyCodeObject.co_qualname */
	__u32 code_firstlineno;	    /* PyCodeObject.co_firstlineno */
	/*
	 * Frames whose owner is this or more run no Python code: the C-stack
	 * shim frames of 3.12/3.13 (FRAME_OWNED_BY_CSTACK), the interpreter's
	 * entry frames of 3.14+ (FRAME_OWNED_BY_INTERPRETER and up). 0xff: none (3.11).
	 */
	__u32 owner_cstack;
	__u32 unicode_length;	    /* PyASCIIObject.length */
	__u32 unicode_state;	    /* PyASCIIObject.state */
	__u32 unicode_ascii_data;   /* sizeof(PyASCIIObject): data of a compact ASCII str */
	__u32 unicode_compact_data; /* sizeof(PyCompactUnicodeObject): data of other compact strs */
	/* the blocks (8-aligned start, size): set by py_offsets_blocks(), not in the table */
	__u32 tstate_block, tstate_block_size; /* native_thread_id, cframe or current_frame */
	__u32 frame_head_size;		       /* from 0: code, previous, prev_instr, owner */
	__u32 frame_block_size;		       /* the head and localsplus[0] */
	__u32 code_block, code_block_size;     /* qualname, filename, firstlineno */
	__u32 code_block_units_size; /* and the unit before co_code_adaptive and its first */
};

#endif /* PTRACE_GPU_PYOFFSETS_H */
