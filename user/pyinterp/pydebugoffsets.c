// SPDX-License-Identifier: MIT
/* Checking the version row against the interpreter's own _Py_DebugOffsets. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pyinterp/pydebugoffsets.h"

struct debug_field {
	const char *name;
	uint16_t at;	   /* byte offset in _Py_DebugOffsets, 0: not there */
	uint64_t expected; /* the row's value */
};

static uint64_t u64_at(const uint8_t *raw, uint16_t at)
{
	uint64_t v;

	memcpy(&v, raw + at, sizeof(v));
	return v;
}

/* The fields that the row and the table both have; n is their count. */
static size_t debug_fields(const struct py_version_info *vi, struct debug_field *f)
{
	const struct py_debug_index *d = &vi->debug;
	const struct ptg_py_offsets *o = &vi->off;
	size_t n = 0;

#define F(name, idx, value) f[n++] = (struct debug_field){name, d->idx, value}
	F("interpreters.head", interp_head, o->runtime_interp_head);
	F("PyInterpreterState.next", interp_next, o->interp_next);
	F("PyInterpreterState.threads.head", threads_head, o->interp_threads_head);
	F("PyThreadState.next", tstate_next, o->tstate_next);
	F("PyThreadState.native_thread_id", tstate_native_tid, o->tstate_native_tid);
	F("PyThreadState.current_frame", tstate_current_frame, o->cframe_current_frame);
	F("_PyInterpreterFrame.previous", frame_previous, o->frame_previous);
	F("_PyInterpreterFrame.f_executable", frame_code, o->frame_code);
	F("_PyInterpreterFrame.instr_ptr", frame_instr, o->frame_prev_instr);
	F("_PyInterpreterFrame.localsplus", frame_localsplus, o->frame_localsplus);
	F("_PyInterpreterFrame.owner", frame_owner, o->frame_owner);
	F("PyCodeObject.co_filename", code_filename, o->code_filename);
	F("PyCodeObject.co_name", code_name, vi->code_name);
	F("PyCodeObject.co_qualname", code_qualname, o->code_qualname);
	F("PyCodeObject.co_linetable", code_linetable, vi->code_linetable);
	F("PyCodeObject.co_firstlineno", code_firstlineno, o->code_firstlineno);
	F("PyCodeObject.co_code_adaptive", code_adaptive, vi->code_adaptive);
	F("PyObject.ob_type", object_type, vi->object_type);
	F("PyTypeObject.tp_name", type_name, vi->type_name);
	F("PyBytesObject.ob_size", bytes_size, vi->bytes_size);
	F("PyBytesObject.ob_sval", bytes_data, vi->bytes_data);
	F("PyASCIIObject.state", unicode_state, o->unicode_state);
	F("PyASCIIObject.length", unicode_length, o->unicode_length);
	F("sizeof(PyASCIIObject)", unicode_ascii_size, o->unicode_ascii_data);
#undef F
	return n;
}

int py_debug_offsets__check(const struct py_version_info *vi, uint32_t version_hex,
			    const uint8_t *raw, size_t len, char *err, size_t errlen)
{
	struct debug_field f[32];
	size_t n;

	if (!vi->debug.size)
		return 0;
	if (len < vi->debug.size || memcmp(raw, PY_DEBUG_COOKIE, 8)) {
		snprintf(err, errlen, "no _Py_DebugOffsets at the start of _PyRuntime");
		return -EINVAL;
	}
	if (u64_at(raw, 8) != version_hex) {
		snprintf(err, errlen, "_Py_DebugOffsets is for version 0x%08llx, not 0x%08x",
			 (unsigned long long)u64_at(raw, 8), version_hex);
		return -EINVAL;
	}
	if (vi->debug.free_threaded && u64_at(raw, vi->debug.free_threaded)) {
		snprintf(err, errlen,
			 "free-threaded CPython builds (%st) are not supported: their frames and "
			 "thread states differ; use the default (GIL) build",
			 vi->name);
		return -EPROTONOSUPPORT;
	}
	n = debug_fields(vi, f);
	for (size_t i = 0; i < n; i++) {
		uint64_t got;

		if (!f[i].at || f[i].at + 8u > len)
			continue;
		got = u64_at(raw, f[i].at);
		if (got != f[i].expected) {
			snprintf(err, errlen,
				 "layout differs from CPython %s's: %s is at %llu, expected %llu "
				 "(a patched build?)",
				 vi->name, f[i].name, (unsigned long long)got,
				 (unsigned long long)f[i].expected);
			return -EPROTO;
		}
	}
	return 0;
}
