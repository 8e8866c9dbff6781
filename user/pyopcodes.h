/* SPDX-License-Identifier: MIT */
/*
 * Opcode numbers of a CPython, read from its own standard library (never
 * typed in per version): _opcode_metadata.py from 3.13 on, opcode.py before,
 * whose specialized instructions take numbers by the build's own rule.
 */
#ifndef PTG_PYOPCODES_H
#define PTG_PYOPCODES_H

#include <stddef.h>
#include <stdint.h>

#include "pyinterp.h"

/*
 * Reads the opcode numbers of the CPython at prefix (its install prefix as
 * the target sees it: "/usr", "/root/.pyenv/versions/3.12.1") from its
 * standard library, resolving paths inside root ("/proc/PID/root" for a
 * process, "/" for the host). version_hex picks lib/pythonX.Y. On success
 * fills ops and writes the path of the file read (as the target sees it)
 * into used. Returns 0 or -errno with a one-line reason in err.
 */
int py_opcodes__read(const char *root, const char *prefix, uint32_t version_hex,
		     struct py_opcodes *ops, char *used, size_t usedlen, char *err, size_t errlen);

/* The same on a file's text already in memory (tests, fuzzing); text must end with '\0'. */
int py_opcodes__parse(const char *text, uint32_t version_hex, struct py_opcodes *ops, char *err,
		      size_t errlen);

#endif /* PTG_PYOPCODES_H */
