#!/usr/bin/env bash
# Prints the structure offsets ptrace-gpu needs for an installed CPython, from
# its own headers: the numbers that make up a row of user/pyversions.c.
#   tools/py-offsets.sh /usr/include/python3.11
set -euo pipefail
inc=${1:-/usr/include/python3.11}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/off.c" <<'C'
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#include <stddef.h>
#include <stdio.h>
#define P(name, expr) printf("%-28s %zu\n", name, (size_t)(expr))
int main(void)
{
	P("runtime_tstate_current", offsetof(_PyRuntimeState, gilstate.tstate_current));
	P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
	P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
	P("tstate_next", offsetof(PyThreadState, next));
	P("tstate_cframe", offsetof(PyThreadState, cframe));
	P("tstate_native_tid", offsetof(PyThreadState, native_thread_id));
	P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
	P("frame_code", offsetof(_PyInterpreterFrame, f_code));
	P("frame_previous", offsetof(_PyInterpreterFrame, previous));
	P("frame_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
	P("frame_owner", offsetof(_PyInterpreterFrame, owner));
	P("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
	P("frameobj_frame", offsetof(PyFrameObject, f_frame));
	P("code_filename", offsetof(PyCodeObject, co_filename));
	P("code_name", offsetof(PyCodeObject, co_name));
	P("code_qualname", offsetof(PyCodeObject, co_qualname));
	P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("unicode_length", offsetof(PyASCIIObject, length));
	P("unicode_state", offsetof(PyASCIIObject, state));
	P("ascii_data", sizeof(PyASCIIObject));
	P("compact_data", sizeof(PyCompactUnicodeObject));
	P("object_type", offsetof(PyObject, ob_type));
	P("type_name", offsetof(PyTypeObject, tp_name));
	return 0;
}
C
cc -I"$inc" -I"$inc/internal" "$tmp/off.c" -o "$tmp/off"
"$tmp/off"
