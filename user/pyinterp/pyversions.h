/* SPDX-License-Identifier: MIT */
/*
 * What ptrace-gpu knows of each CPython minor version (pyversions.c): the
 * struct layouts, one table for record, sample and the name readers alike.
 */
#ifndef PTG_PYVERSIONS_H
#define PTG_PYVERSIONS_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>
#include "ptrace_gpu/pyoffsets.h"

/*
 * How an object keeps its instance dict, which changed in each version:
 * 3.11: dict pointer at obj[-3], values (no dict yet) at obj[-4];
 * 3.12: one tagged word at obj[-3], a values pointer when its low bit is set;
 * 3.13+: dict pointer at obj[-3], values inline after the object (tp_basicsize).
 */
enum py_dict_scheme {
	PY_DICT_SPLIT_311 = 1,
	PY_DICT_TAGGED_312 = 2,
	PY_DICT_INLINE_313 = 3,
};

/*
 * Where an object's instance attributes are, and how a dict stores its
 * entries: what reading nn.Module._modules out of the target takes.
 */
struct py_dict_layout {
	enum py_dict_scheme scheme;
	uint32_t type_flags;	  /* PyTypeObject.tp_flags */
	uint32_t type_dictoffset; /* PyTypeObject.tp_dictoffset */
	uint32_t type_basicsize;  /* PyTypeObject.tp_basicsize */
	uint32_t
	    heaptype_cached_keys;    /* PyHeapTypeObject.ht_cached_keys: shared keys of instances */
	uint64_t flag_managed_dict;  /* Py_TPFLAGS_MANAGED_DICT */
	uint64_t flag_inline_values; /* Py_TPFLAGS_INLINE_VALUES (3.13+), else 0 */
	int32_t managed_dict;	     /* offset of the dict pointer from the object (negative) */
	int32_t managed_values;	     /* offset of the values pointer (3.11 only) */
	uint32_t values_items;	     /* PyDictValues.values */
	uint32_t dict_keys, dict_values; /* PyDictObject.ma_keys, ma_values */
	uint32_t keys_log2_index_bytes, keys_kind, keys_nentries, keys_indices;
	uint32_t entry_size, entry_key, entry_value;	/* PyDictKeyEntry */
	uint32_t uentry_size, uentry_key, uentry_value; /* PyDictUnicodeEntry */
	uint8_t kind_general; /* dk_kind of keys with PyDictKeyEntry entries */
};

/*
 * Where _Py_DebugOffsets (the table at the start of _PyRuntime, 3.13+) keeps
 * the offsets that the version row also has: byte offsets into it, 0 where
 * it has none. Its layout changes between minor versions, so this is per row.
 */
struct py_debug_index {
	uint16_t size; /* sizeof(_Py_DebugOffsets); 0: this version has none */
	uint16_t free_threaded;
	uint16_t interp_head, interp_next, threads_head;
	uint16_t tstate_next, tstate_native_tid, tstate_current_frame;
	uint16_t frame_previous, frame_code, frame_instr, frame_localsplus, frame_owner;
	uint16_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno;
	uint16_t code_adaptive;
	uint16_t object_type, type_name;
	uint16_t unicode_state, unicode_length, unicode_ascii_size;
	uint16_t bytes_size, bytes_data;
};

/*
 * What ptrace-gpu knows of one CPython minor version: data, not code paths.
 * The one table of layouts, for record, sample and the name readers alike.
 * Opcode numbers are not here: they are read from each interpreter's own
 * standard library (user/pyinterp/pyopcodes.c).
 */
struct py_version_info {
	const char *name; /* "3.11" */
	uint32_t hex_min; /* first PY_VERSION_HEX covered */
	uint32_t hex_max; /* last PY_VERSION_HEX covered */
	struct ptg_py_offsets off;
	/* layouts user space reads through /proc/PID/mem */
	uint32_t code_name;	 /* the other code fields are in off */
	uint32_t code_linetable; /* PyCodeObject.co_linetable */
	uint32_t code_adaptive;	 /* PyCodeObject.co_code_adaptive: the first instruction */
	uint32_t bytes_size;	 /* PyBytesObject.ob_size */
	uint32_t bytes_data;	 /* PyBytesObject.ob_sval */
	uint32_t object_type, type_name;
	/*
	 * RESUME's oparg: the bits that say where the frame resumes (0: a call
	 * starts), and the value of that field that is no call at all (3.15's
	 * RESUME_AT_GEN_EXPR_START, run by a generator expression's frame before
	 * RETURN_GENERATOR hands it to the generator object), 0xff if none.
	 */
	uint8_t resume_where_mask, resume_not_a_call;
	struct py_dict_layout dict;
	struct py_debug_index debug;
};

/* "3.11" */
const char *py_supported_versions(void);
/* The name ("3.11") of the i-th version known, oldest first; NULL past the last. */
const char *py_version_name(size_t i);
const struct py_version_info *py_version_lookup(uint32_t version_hex);
/* The row of the newest version known. */
const struct py_version_info *py_version_newest(void);
/*
 * Sets the blocks of o (see PTG_PY_FRAME_BLOCK_MAX) from its offsets and
 * PyCodeObject.co_code_adaptive's; -E2BIG if one is larger than the BPF
 * side's buffer.
 */
int py_offsets_blocks(struct ptg_py_offsets *o, uint32_t code_adaptive);

#endif /* PTG_PYVERSIONS_H */
