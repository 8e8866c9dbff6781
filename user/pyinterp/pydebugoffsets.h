/* SPDX-License-Identifier: MIT */
/*
 * _Py_DebugOffsets: the offsets table CPython 3.13+ keeps at the start of
 * _PyRuntime for out-of-process tools. ptrace-gpu keeps its own row per
 * version (user/pyinterp/pyversions.c) and checks it against the interpreter's table,
 * so a build with another layout (a patched or free-threaded interpreter) is
 * refused instead of read wrongly.
 */
#ifndef PTG_PYDEBUGOFFSETS_H
#define PTG_PYDEBUGOFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "pyinterp/pyversions.h"

#define PY_DEBUG_COOKIE "xdebugpy"

/*
 * Checks raw (the first len bytes of _PyRuntime) against vi's row. Returns 0
 * when every offset agrees (or the version has no table), -EPROTONOSUPPORT
 * for a free-threaded build, -EPROTO naming the first field that differs,
 * -EINVAL for a missing cookie or another version; a one-line reason in err.
 */
int py_debug_offsets__check(const struct py_version_info *vi, uint32_t version_hex,
			    const uint8_t *raw, size_t len, char *err, size_t errlen);

#endif /* PTG_PYDEBUGOFFSETS_H */
