// SPDX-License-Identifier: MIT
/*
 * The version table is data copied from CPython's headers: check the row of
 * the CPython whose headers this file is compiled against (tests/pyheaders/
 * run.sh compiles it once per interpreter) against offsetof() on those very
 * headers. Every field of the row, for every version.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_code.h>
#include <internal/pycore_dict.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#if PY_VERSION_HEX >= 0x030d0000
#include <internal/pycore_opcode_utils.h>
#endif
#include <internal/pycore_runtime.h>
#include <stddef.h>

#include "../unit/test.h"
#include "pyinterp/pyinterp.h"

#define CHECK(field, expr) ASSERT_EQ((long)vi->field, (long)(expr), #field)

static void check_threads(const struct py_version_info *vi)
{
	CHECK(off.runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	CHECK(off.interp_next, offsetof(PyInterpreterState, next));
	CHECK(off.interp_threads_head, offsetof(PyInterpreterState, threads.head));
	CHECK(off.tstate_next, offsetof(PyThreadState, next));
	CHECK(off.tstate_native_tid, offsetof(PyThreadState, native_thread_id));
#if PY_VERSION_HEX < 0x030d0000
	CHECK(off.tstate_cframe, offsetof(PyThreadState, cframe));
	CHECK(off.cframe_current_frame, offsetof(_PyCFrame, current_frame));
#else
	CHECK(off.tstate_cframe, PTG_OFF_NONE);
	CHECK(off.cframe_current_frame, offsetof(PyThreadState, current_frame));
#endif
}

static void check_frames(const struct py_version_info *vi)
{
#if PY_VERSION_HEX < 0x030d0000
	CHECK(off.frame_code, offsetof(_PyInterpreterFrame, f_code));
	CHECK(off.frame_prev_instr, offsetof(_PyInterpreterFrame, prev_instr));
#else
	CHECK(off.frame_code, offsetof(_PyInterpreterFrame, f_executable));
	CHECK(off.frame_prev_instr, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
#if PY_VERSION_HEX < 0x030c0000
	CHECK(off.frame_is_entry, offsetof(_PyInterpreterFrame, is_entry));
	CHECK(off.owner_cstack, 0xff);
#elif PY_VERSION_HEX < 0x030e0000
	CHECK(off.frame_is_entry, PTG_OFF_NONE);
	CHECK(off.owner_cstack, FRAME_OWNED_BY_CSTACK);
#else
	/* entry frames are FRAME_OWNED_BY_INTERPRETER, and any owner above it is no Python frame */
	CHECK(off.frame_is_entry, PTG_OFF_NONE);
	CHECK(off.owner_cstack, FRAME_OWNED_BY_INTERPRETER);
#endif
	CHECK(off.frame_previous, offsetof(_PyInterpreterFrame, previous));
	CHECK(off.frame_owner, offsetof(_PyInterpreterFrame, owner));
	CHECK(off.frame_localsplus, offsetof(_PyInterpreterFrame, localsplus));
	CHECK(off.frameobj_frame, offsetof(PyFrameObject, f_frame));
}

static void check_objects(const struct py_version_info *vi)
{
	CHECK(off.code_filename, offsetof(PyCodeObject, co_filename));
	CHECK(off.code_qualname, offsetof(PyCodeObject, co_qualname));
	CHECK(off.code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	CHECK(code_name, offsetof(PyCodeObject, co_name));
	CHECK(code_linetable, offsetof(PyCodeObject, co_linetable));
	CHECK(code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
	CHECK(bytes_size, offsetof(PyVarObject, ob_size));
	CHECK(bytes_data, offsetof(PyBytesObject, ob_sval));
	CHECK(off.unicode_length, offsetof(PyASCIIObject, length));
	CHECK(off.unicode_state, offsetof(PyASCIIObject, state));
	CHECK(off.unicode_ascii_data, sizeof(PyASCIIObject));
	CHECK(off.unicode_compact_data, sizeof(PyCompactUnicodeObject));
	CHECK(object_type, offsetof(PyObject, ob_type));
	CHECK(type_name, offsetof(PyTypeObject, tp_name));
#ifdef RESUME_OPARG_LOCATION_MASK
	CHECK(resume_where_mask, RESUME_OPARG_LOCATION_MASK);
#else
	CHECK(resume_where_mask, 3); /* 3.11, 3.12: 0 start, 1-3 after yield, yield from, await */
#endif
#ifdef RESUME_AT_GEN_EXPR_START
	CHECK(resume_not_a_call, RESUME_AT_GEN_EXPR_START);
#else
	CHECK(resume_not_a_call, 0xff);
#endif
}

static void check_dicts(const struct py_version_info *vi)
{
	CHECK(dict.type_flags, offsetof(PyTypeObject, tp_flags));
	CHECK(dict.type_dictoffset, offsetof(PyTypeObject, tp_dictoffset));
	CHECK(dict.type_basicsize, offsetof(PyTypeObject, tp_basicsize));
	CHECK(dict.heaptype_cached_keys, offsetof(PyHeapTypeObject, ht_cached_keys));
	CHECK(dict.flag_managed_dict, Py_TPFLAGS_MANAGED_DICT);
#ifdef Py_TPFLAGS_INLINE_VALUES
	CHECK(dict.flag_inline_values, Py_TPFLAGS_INLINE_VALUES);
#else
	CHECK(dict.flag_inline_values, 0);
#endif
	CHECK(dict.values_items, offsetof(PyDictValues, values));
	CHECK(dict.dict_keys, offsetof(PyDictObject, ma_keys));
	CHECK(dict.dict_values, offsetof(PyDictObject, ma_values));
	CHECK(dict.keys_log2_index_bytes, offsetof(PyDictKeysObject, dk_log2_index_bytes));
	CHECK(dict.keys_kind, offsetof(PyDictKeysObject, dk_kind));
	CHECK(dict.keys_nentries, offsetof(PyDictKeysObject, dk_nentries));
	CHECK(dict.keys_indices, offsetof(PyDictKeysObject, dk_indices));
	CHECK(dict.entry_size, sizeof(PyDictKeyEntry));
	CHECK(dict.entry_key, offsetof(PyDictKeyEntry, me_key));
	CHECK(dict.entry_value, offsetof(PyDictKeyEntry, me_value));
	CHECK(dict.uentry_size, sizeof(PyDictUnicodeEntry));
	CHECK(dict.uentry_key, offsetof(PyDictUnicodeEntry, me_key));
	CHECK(dict.uentry_value, offsetof(PyDictUnicodeEntry, me_value));
	CHECK(dict.kind_general, DICT_KEYS_GENERAL);
}

/* Where _Py_DebugOffsets keeps each offset: what attach checks the row against. */
static void check_debug_offsets(const struct py_version_info *vi)
{
#if PY_VERSION_HEX >= 0x030d0000
#define DBG(field, member) CHECK(debug.field, offsetof(_Py_DebugOffsets, member))
	CHECK(debug.size, sizeof(_Py_DebugOffsets));
	DBG(free_threaded, free_threaded);
	DBG(interp_head, runtime_state.interpreters_head);
	DBG(interp_next, interpreter_state.next);
	DBG(threads_head, interpreter_state.threads_head);
	DBG(tstate_next, thread_state.next);
	DBG(tstate_native_tid, thread_state.native_thread_id);
	DBG(tstate_current_frame, thread_state.current_frame);
	DBG(frame_previous, interpreter_frame.previous);
	DBG(frame_code, interpreter_frame.executable);
	DBG(frame_instr, interpreter_frame.instr_ptr);
	DBG(frame_localsplus, interpreter_frame.localsplus);
	DBG(frame_owner, interpreter_frame.owner);
	DBG(code_filename, code_object.filename);
	DBG(code_name, code_object.name);
	DBG(code_qualname, code_object.qualname);
	DBG(code_linetable, code_object.linetable);
	DBG(code_firstlineno, code_object.firstlineno);
	DBG(code_adaptive, code_object.co_code_adaptive);
	DBG(object_type, pyobject.ob_type);
	DBG(type_name, type_object.tp_name);
	DBG(bytes_size, bytes_object.ob_size);
	DBG(bytes_data, bytes_object.ob_sval);
	DBG(unicode_state, unicode_object.state);
	DBG(unicode_length, unicode_object.length);
	DBG(unicode_ascii_size, unicode_object.asciiobject_size);
#else
	CHECK(debug.size, 0);
#endif
}

int main(void)
{
	const struct py_version_info *vi = py_version_lookup(PY_VERSION_HEX);

	printf("headers of Python %s\n", PY_VERSION);
	if (!ASSERT_TRUE(vi != NULL, "a row for " PY_VERSION))
		return TEST_DONE();
	check_threads(vi);
	check_frames(vi);
	check_objects(vi);
	check_dicts(vi);
	check_debug_offsets(vi);
	return TEST_DONE();
}
