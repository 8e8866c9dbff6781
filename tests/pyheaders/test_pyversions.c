// SPDX-License-Identifier: MIT
/*
 * The version table is data copied from CPython's headers: check the row of
 * the installed CPython against offsetof() on those very headers.
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <opcode.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>

#include "../unit/test.h"
#include "pyinterp.h"

#define CHECK(field, expr) ASSERT_EQ(vi->field, (expr), #field)

int main(void)
{
	const struct py_version_info *vi = py_version_lookup(PY_VERSION_HEX);

	if (!ASSERT_TRUE(vi != NULL, "a row for " PY_VERSION))
		return TEST_DONE();
	CHECK(off.runtime_tstate_current, offsetof(_PyRuntimeState, gilstate.tstate_current));
	CHECK(off.tstate_cframe, offsetof(PyThreadState, cframe));
	CHECK(off.cframe_current_frame, offsetof(_PyCFrame, current_frame));
	CHECK(off.frame_code, offsetof(_PyInterpreterFrame, f_code));
	CHECK(off.frame_previous, offsetof(_PyInterpreterFrame, previous));
	CHECK(off.frame_prev_instr, offsetof(_PyInterpreterFrame, prev_instr));
	CHECK(off.frame_owner, offsetof(_PyInterpreterFrame, owner));
	CHECK(off.frame_localsplus, offsetof(_PyInterpreterFrame, localsplus));
	CHECK(off.frameobj_frame, offsetof(PyFrameObject, f_frame));
	CHECK(off.code_filename, offsetof(PyCodeObject, co_filename));
	CHECK(off.code_qualname, offsetof(PyCodeObject, co_qualname));
	CHECK(off.code_firstlineno, offsetof(PyCodeObject, co_firstlineno));
	CHECK(code_name, offsetof(PyCodeObject, co_name));
	CHECK(off.unicode_length, offsetof(PyASCIIObject, length));
	CHECK(off.unicode_ascii_data, sizeof(PyASCIIObject));
	CHECK(off.unicode_compact_data, sizeof(PyCompactUnicodeObject));
	CHECK(object_type, offsetof(PyObject, ob_type));
	CHECK(type_name, offsetof(PyTypeObject, tp_name));
	CHECK(runtime_interp_head, offsetof(_PyRuntimeState, interpreters.head));
	CHECK(interp_threads_head, offsetof(PyInterpreterState, threads.head));
	CHECK(tstate_next, offsetof(PyThreadState, next));
	CHECK(tstate_native_tid, offsetof(PyThreadState, native_thread_id));
	ASSERT_EQ(vi->op_resume[0], RESUME, "RESUME");
	ASSERT_EQ(vi->op_resume[1], RESUME_QUICK, "RESUME_QUICK");
	ASSERT_EQ(vi->op_return[0], RETURN_VALUE, "RETURN_VALUE");
	ASSERT_EQ(vi->op_yield[0], YIELD_VALUE, "YIELD_VALUE");
	return TEST_DONE();
}
