/* SPDX-License-Identifier: MIT */
/*
 * Structure offsets of one CPython version, as the BPF programs need them.
 * Filled by user space from the version tables (user/pyversions.c) and put in
 * the BPF programs' read-only data before load.
 */
#ifndef PTRACE_GPU_PYOFFSETS_H
#define PTRACE_GPU_PYOFFSETS_H

struct ptg_py_offsets {
	__u32 runtime_tstate_current; /* _PyRuntimeState.gilstate.tstate_current */
	__u32 tstate_cframe;	      /* PyThreadState.cframe (3.11) */
	__u32 cframe_current_frame;   /* _PyCFrame.current_frame */
	__u32 frame_code;	      /* _PyInterpreterFrame.f_code */
	__u32 frame_previous;	      /* _PyInterpreterFrame.previous */
	__u32 frame_prev_instr;	      /* _PyInterpreterFrame.prev_instr */
	__u32 frame_owner;	      /* _PyInterpreterFrame.owner */
	__u32 frameobj_frame;	      /* PyFrameObject.f_frame */
	__u32 frame_localsplus;	      /* _PyInterpreterFrame.localsplus */
	__u32 code_filename;	      /* PyCodeObject.co_filename */
	__u32 code_qualname;	      /* PyCodeObject.co_qualname */
	__u32 code_firstlineno;	      /* PyCodeObject.co_firstlineno */
	__u32 owner_cstack;	      /* value of owner for C-stack shim frames (3.12+), 0xff if none */
	__u32 unicode_length;	      /* PyASCIIObject.length */
	__u32 unicode_state;	      /* PyASCIIObject.state */
	__u32 unicode_ascii_data;     /* sizeof(PyASCIIObject): data of a compact ASCII str */
	__u32 unicode_compact_data;   /* sizeof(PyCompactUnicodeObject): data of other compact strs */
};

#endif /* PTRACE_GPU_PYOFFSETS_H */
