// SPDX-License-Identifier: MIT
/*
 * Per-version layouts of CPython: the one table that record, sample and the
 * name readers use. Each number comes from that version's headers
 * (offsetof() in tests/pyheaders/test_pyversions.c, run against every
 * interpreter's headers that CI has) and, from 3.13 on, is checked at attach
 * time against the interpreter's own _Py_DebugOffsets (user/pyinterp/pydebugoffsets.c).
 *
 * What changed, in short: 3.12 moved the current thread state to a thread
 * local and added C-stack shim frames (owner 3); 3.13 dropped _PyCFrame
 * (tstate->current_frame), renamed f_code to f_executable and prev_instr to
 * instr_ptr, and keeps instance values inline; 3.14 made frame references
 * tagged _PyStackRefs and renumbered the frame owners.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "pyinterp/pyversions.h"

/* The dict entry structs and the object header did not change from 3.11 to 3.15. */
#define DICT_ENTRIES                                                                               \
	.dict_keys = 32, .dict_values = 40, .keys_log2_index_bytes = 9, .keys_kind = 10,           \
	.keys_nentries = 24, .keys_indices = 32, .entry_size = 24, .entry_key = 8,                 \
	.entry_value = 16, .uentry_size = 16, .uentry_key = 0, .uentry_value = 8,                  \
	.kind_general = 0 /* DICT_KEYS_GENERAL */

static const struct py_version_info
    versions[] =
	{
	    {
		.name = "3.11",
		.hex_min = 0x030b00a0,
		.hex_max = 0x030bffff,
		.off =
		    {
			.runtime_interp_head = 40,
			.interp_next = 0,
			.interp_threads_head = 16,
			.tstate_next = 8,
			.tstate_native_tid = 160,
			.tstate_cframe = 56,
			.cframe_current_frame = 8,
			.frame_code = 32,
			.frame_previous = 48,
			.frame_prev_instr = 56,
			.frame_owner = 69,
			.frame_is_entry = 68,
			.frameobj_frame = 24,
			.frame_localsplus = 72,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 72,
			.owner_cstack = 0xff, /* 3.11 has no shim frames */
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 48,
			.unicode_compact_data = 72,
		    },
		.code_name = 120,
		.code_linetable = 136,
		.code_adaptive = 184,
		.bytes_size = 16,
		.bytes_data = 32,
		.object_type = 8,
		.type_name = 24,
		.resume_where_mask = 3,
		.resume_not_a_call = 0xff,
		.dict =
		    {
			.scheme = PY_DICT_SPLIT_311,
			.type_flags = 168,
			.type_dictoffset = 288,
			.type_basicsize = 32,
			.heaptype_cached_keys = 872,
			.flag_managed_dict = 1 << 4,
			.managed_dict = -24,   /* ((PyObject **)obj)[-3] */
			.managed_values = -32, /* ((PyDictValues **)obj)[-4] */
			.values_items = 0,
			DICT_ENTRIES,
		    },
	    },
	    {
		.name = "3.12",
		.hex_min = 0x030c00a0,
		.hex_max = 0x030cffff,
		.off =
		    {
			.runtime_interp_head = 40,
			.interp_next = 0,
			.interp_threads_head = 72,
			.tstate_next = 8,
			.tstate_native_tid = 144,
			.tstate_cframe = 56,
			.cframe_current_frame = 0,
			.frame_code = 0,
			.frame_previous = 8,
			.frame_prev_instr = 56,
			.frame_owner = 70,
			.frame_is_entry = PTG_OFF_NONE,
			.frameobj_frame = 24,
			.frame_localsplus = 72,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 68,
			.owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 40,
			.unicode_compact_data = 56,
		    },
		.code_name = 120,
		.code_linetable = 136,
		.code_adaptive = 192,
		.bytes_size = 16,
		.bytes_data = 32,
		.object_type = 8,
		.type_name = 24,
		.resume_where_mask = 3,
		.resume_not_a_call = 0xff,
		.dict =
		    {
			.scheme = PY_DICT_TAGGED_312,
			.type_flags = 168,
			.type_dictoffset = 288,
			.type_basicsize = 32,
			.heaptype_cached_keys = 880,
			.flag_managed_dict = 1 << 4,
			.managed_dict = -24, /* PyDictOrValues, values when bit 0 is set */
			.managed_values = -24,
			.values_items = 0,
			DICT_ENTRIES,
		    },
	    },
	    {
		.name = "3.13",
		.hex_min = 0x030d00a0,
		.hex_max = 0x030dffff,
		.off =
		    {
			.runtime_interp_head = 632,
			.interp_next = 7264,
			.interp_threads_head = 7344,
			.tstate_next = 8,
			.tstate_native_tid = 160,
			.tstate_cframe = PTG_OFF_NONE,
			.cframe_current_frame = 72, /* PyThreadState.current_frame */
			.frame_code = 0,	    /* f_executable */
			.frame_previous = 8,
			.frame_prev_instr = 56, /* instr_ptr */
			.frame_owner = 70,
			.frame_is_entry = PTG_OFF_NONE,
			.frameobj_frame = 24,
			.frame_localsplus = 72,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 68,
			.owner_cstack = 3,
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 40,
			.unicode_compact_data = 56,
		    },
		.code_name = 120,
		.code_linetable = 136,
		.code_adaptive = 200,
		.bytes_size = 16,
		.bytes_data = 32,
		.object_type = 8,
		.type_name = 24,
		.resume_where_mask = 3,
		.resume_not_a_call = 0xff,
		.dict =
		    {
			.scheme = PY_DICT_INLINE_313,
			.type_flags = 168,
			.type_dictoffset = 288,
			.type_basicsize = 32,
			.heaptype_cached_keys = 880,
			.flag_managed_dict = 1 << 4,
			.flag_inline_values = 1 << 2,
			.managed_dict = -24,
			.managed_values = PTG_OFF_NONE,
			.values_items = 8, /* capacity, size, embedded, valid, then the values */
			DICT_ENTRIES,
		    },
		.debug =
		    {
			.size = 584,
			.free_threaded = 16,
			.interp_head = 40,
			.interp_next = 64,
			.threads_head = 72,
			.tstate_next = 168,
			.tstate_native_tid = 200,
			.tstate_current_frame = 184,
			.frame_previous = 232,
			.frame_code = 240,
			.frame_instr = 248,
			.frame_localsplus = 256,
			.frame_owner = 264,
			.code_filename = 280,
			.code_name = 288,
			.code_qualname = 296,
			.code_linetable = 304,
			.code_firstlineno = 312,
			.code_adaptive = 344,
			.object_type = 360,
			.type_name = 376,
			.bytes_size = 520,
			.bytes_data = 528,
			.unicode_state = 544,
			.unicode_length = 552,
			.unicode_ascii_size = 560,
		    },
	    },
	    {
		.name = "3.14",
		.hex_min = 0x030e00a0,
		.hex_max = 0x030effff,
		.off =
		    {
			.runtime_interp_head = 808,
			.interp_next = 7272,
			.interp_threads_head = 7344,
			.tstate_next = 8,
			.tstate_native_tid = 160,
			.tstate_cframe = PTG_OFF_NONE,
			.cframe_current_frame = 72,
			.frame_code = 0, /* f_executable, a tagged _PyStackRef */
			.frame_previous = 8,
			.frame_prev_instr = 56,
			.frame_owner = 74,
			.frame_is_entry = PTG_OFF_NONE,
			.frameobj_frame = 24,
			.frame_localsplus = 80,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 68,
			.owner_cstack = 3 /* FRAME_OWNED_BY_INTERPRETER and up: entry frames */,
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 40,
			.unicode_compact_data = 56,
		    },
		.code_name = 120,
		.code_linetable = 136,
		.code_adaptive = 208,
		.bytes_size = 16,
		.bytes_data = 32,
		.object_type = 8,
		.type_name = 24,
		.resume_where_mask = 3,
		.resume_not_a_call = 0xff,
		.dict =
		    {
			.scheme = PY_DICT_INLINE_313,
			.type_flags = 168,
			.type_dictoffset = 288,
			.type_basicsize = 32,
			.heaptype_cached_keys = 880,
			.flag_managed_dict = 1 << 4,
			.flag_inline_values = 1 << 2,
			.managed_dict = -24,
			.managed_values = PTG_OFF_NONE,
			.values_items = 8,
			DICT_ENTRIES,
		    },
		.debug =
		    {
			.size = 760,
			.free_threaded = 16,
			.interp_head = 40,
			.interp_next = 64,
			.threads_head = 72,
			.tstate_next = 192,
			.tstate_native_tid = 224,
			.tstate_current_frame = 208,
			.frame_previous = 256,
			.frame_code = 264,
			.frame_instr = 272,
			.frame_localsplus = 280,
			.frame_owner = 288,
			.code_filename = 320,
			.code_name = 328,
			.code_qualname = 336,
			.code_linetable = 344,
			.code_firstlineno = 352,
			.code_adaptive = 384,
			.object_type = 408,
			.type_name = 424,
			.bytes_size = 600,
			.bytes_data = 608,
			.unicode_state = 624,
			.unicode_length = 632,
			.unicode_ascii_size = 640,
		    },
	    },
	    {
		.name = "3.15",
		.hex_min = 0x030f00a0,
		.hex_max = 0x030fffff,
		.off =
		    {
			.runtime_interp_head = 936,
			.interp_next = 7264,
			.interp_threads_head = 7336,
			.tstate_next = 8,
			.tstate_native_tid = 184,
			.tstate_cframe = PTG_OFF_NONE,
			.cframe_current_frame = 72,
			.frame_code = 0, /* f_executable, a tagged _PyStackRef */
			.frame_previous = 8,
			.frame_prev_instr = 56,
			.frame_owner = 74,
			.frame_is_entry = PTG_OFF_NONE,
			.frameobj_frame = 24,
			.frame_localsplus = 80,
			.code_filename = 112,
			.code_qualname = 128,
			.code_firstlineno = 68,
			.owner_cstack = 3 /* FRAME_OWNED_BY_INTERPRETER */,
			.unicode_length = 16,
			.unicode_state = 32,
			.unicode_ascii_data = 40,
			.unicode_compact_data = 56,
		    },
		.code_name = 120,
		.code_linetable = 136,
		.code_adaptive = 208,
		.bytes_size = 16,
		.bytes_data = 32,
		.object_type = 8,
		.type_name = 24,
		.resume_where_mask = 7,
		.resume_not_a_call = 4 /* RESUME_AT_GEN_EXPR_START */,
		.dict =
		    {
			.scheme = PY_DICT_INLINE_313,
			.type_flags = 168,
			.type_dictoffset = 288,
			.type_basicsize = 32,
			.heaptype_cached_keys = 888,
			.flag_managed_dict = 1 << 4,
			.flag_inline_values = 1 << 2,
			.managed_dict = -24,
			.managed_values = PTG_OFF_NONE,
			.values_items = 8,
			DICT_ENTRIES,
		    },
		.debug =
		    {
			.size = 888,
			.free_threaded = 16,
			.interp_head = 40,
			.interp_next = 64,
			.threads_head = 72,
			.tstate_next = 192,
			.tstate_native_tid = 248,
			.tstate_current_frame = 208,
			.frame_previous = 320,
			.frame_code = 328,
			.frame_instr = 336,
			.frame_localsplus = 344,
			.frame_owner = 352,
			.code_filename = 384,
			.code_name = 392,
			.code_qualname = 400,
			.code_linetable = 408,
			.code_firstlineno = 416,
			.code_adaptive = 448,
			.object_type = 472,
			.type_name = 488,
			.bytes_size = 696,
			.bytes_data = 704,
			.unicode_state = 720,
			.unicode_length = 728,
			.unicode_ascii_size = 736,
		    },
	    },
};

const struct py_version_info *py_version_lookup(uint32_t version_hex)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		if (version_hex >= versions[i].hex_min && version_hex <= versions[i].hex_max)
			return &versions[i];
	}
	return NULL;
}

const struct py_version_info *py_version_newest(void)
{
	return &versions[sizeof(versions) / sizeof(versions[0]) - 1];
}

const char *py_version_name(size_t i)
{
	return i < sizeof(versions) / sizeof(versions[0]) ? versions[i].name : NULL;
}

const char *py_supported_versions(void)
{
	static char buf[64];
	size_t n = 0;

	if (buf[0])
		return buf;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? ", " : "", versions[i].name);
	return buf;
}

/* Grows the block [*lo, *hi) to hold n bytes at off. */
static void block_add(uint32_t *lo, uint32_t *hi, uint32_t off, uint32_t n)
{
	if (off < *lo)
		*lo = off;
	if (off + n > *hi)
		*hi = off + n;
}

int py_offsets_blocks(struct ptg_py_offsets *o, uint32_t code_adaptive)
{
	uint32_t frame_ptr =
	    o->tstate_cframe != PTG_OFF_NONE ? o->tstate_cframe : o->cframe_current_frame;
	uint32_t lo = UINT32_MAX, hi = 0;

	/* native_thread_id is an unsigned long */
	block_add(&lo, &hi, o->tstate_native_tid, 8);
	block_add(&lo, &hi, frame_ptr, 8);
	/* 8-aligned starts keep every field naturally aligned in the BPF stack buffer */
	o->tstate_block = lo & ~7u;
	o->tstate_block_size = hi - o->tstate_block;
	lo = 0;
	hi = 0;
	block_add(&lo, &hi, o->frame_code, 8);
	block_add(&lo, &hi, o->frame_previous, 8);
	block_add(&lo, &hi, o->frame_prev_instr, 8);
	block_add(&lo, &hi, o->frame_owner, 1);
	o->frame_head_size = hi;
	block_add(&lo, &hi, o->frame_localsplus, 8);
	o->frame_block_size = hi;
	lo = UINT32_MAX;
	hi = 0;
	block_add(&lo, &hi, o->code_qualname, 8);
	block_add(&lo, &hi, o->code_filename, 8);
	block_add(&lo, &hi, o->code_firstlineno, 4);
	o->code_block = lo & ~7u;
	o->code_block_size = hi - o->code_block;
	/* prev_instr may point at the unit before the first instruction */
	block_add(&lo, &hi, code_adaptive - 2, PTG_PY_CODE_UNIT_BYTES + 2);
	o->code_block_units_size = lo < o->code_block ? 0 : hi - o->code_block;
	if (o->tstate_block_size > PTG_PY_TSTATE_BLOCK_MAX ||
	    o->frame_block_size > PTG_PY_FRAME_BLOCK_MAX ||
	    o->code_block_units_size > PTG_PY_CODE_BLOCK_MAX || !o->code_block_units_size)
		return -E2BIG;
	return 0;
}
