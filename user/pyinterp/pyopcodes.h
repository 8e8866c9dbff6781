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

#define PY_MAX_HANDLERS 6 /* forms of one instruction, at most */

/* Opcode numbers of one interpreter, read from its standard library; lists end at 0. */
struct py_opcodes {
	uint8_t resume[PY_MAX_HANDLERS]; /* RESUME, its specializations, INSTRUMENTED_RESUME */
	uint8_t ret[PY_MAX_HANDLERS];	 /* RETURN_VALUE, RETURN_CONST and instrumented forms */
	uint8_t yield[PY_MAX_HANDLERS];	 /* YIELD_VALUE, INSTRUMENTED_YIELD_VALUE */
};

/*
 * Reads the opcode numbers of the CPython at prefix (its install prefix as
 * the target sees it: "/usr", "/root/.pyenv/versions/3.12.1") from its
 * standard library, resolving paths inside root ("/proc/PID/root" for a
 * process, "/" for the host). version_hex is PY_VERSION_HEX (major.minor pick
 * lib/pythonX.Y, or lib64/pythonX.Y). On success fills ops and writes the
 * path of the file read (as the target sees it) into used. Returns 0 or
 * -errno with a one-line reason in err.
 */
int py_opcodes__read(const char *root, const char *prefix, uint32_t version_hex,
		     struct py_opcodes *ops, char *used, size_t usedlen, char *err, size_t errlen);

/* The same on a file's text already in memory; text must end with '\0'. */
int py_opcodes__parse(const char *text, uint32_t version_hex, struct py_opcodes *ops, char *err,
		      size_t errlen);

/* Every opcode name and number of one such file: what the lists are picked from. */
struct py_opmap;

/*
 * Parses text (a '\0'-terminated _opcode_metadata.py, or opcode.py before
 * 3.13) into *map. Returns 0 or -errno with a one-line reason in err.
 */
int py_opmap__parse(const char *text, uint32_t version_hex, struct py_opmap **map, char *err,
		    size_t errlen);
/* The number of the opcode called name, or -ENOENT. */
int py_opmap__get(const struct py_opmap *map, const char *name);
void py_opmap__free(struct py_opmap *map);

#endif /* PTG_PYOPCODES_H */
