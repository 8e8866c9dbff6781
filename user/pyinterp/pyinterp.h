/* SPDX-License-Identifier: MIT */
/*
 * Finding the CPython interpreter in a process: which object holds it (a
 * static executable or libpython), its exact version, where _PyRuntime is,
 * and the file offsets of the code the frame probes attach to.
 */
#ifndef PTG_PYINTERP_H
#define PTG_PYINTERP_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "pyinterp/pyopcodes.h"
#include "pyinterp/pyversions.h"

#define PY_REG_TSTATE 0x40 /* see py_interp.resume_regs */

struct py_interp {
	pid_t pid;
	char path[PATH_MAX];	    /* the interpreter's object as the target maps it */
	char attach_path[PATH_MAX]; /* the same file, openable from here */
	uint64_t bias;		    /* runtime address = link-time address + bias */
	uint32_t version_hex;
	char version[24];
	const struct py_version_info *info;
	struct py_opcodes ops;
	char stdlib[PATH_MAX]; /* where its opcode numbers were read, as the target sees it */
	char warning[256];     /* what will be missed in this process, or "" */
	uint64_t runtime_addr; /* runtime address of _PyRuntime */
	/*
	 * Link-time range of the opcode handlers when the compiler moved them out
	 * of _PyEval_EvalFrameDefault (its .cold part, which stripped builds do
	 * not name); 0, 0 when they are inside it.
	 */
	uint64_t handlers_lo, handlers_hi;
	uint64_t eval_off; /* file offsets, for uprobes */
	uint64_t traceback_off;
	/*
	 * code_dealloc (PyCode_Type's tp_dealloc), where a code object is
	 * freed: lets the probes trust what they cached of one. 0: not found.
	 */
	uint64_t code_free_off;
	uint64_t resume_offs[PY_MAX_HANDLERS];
	uint64_t return_offs[PY_MAX_HANDLERS];
	uint64_t yield_offs[PY_MAX_HANDLERS];
	/*
	 * at each site, the register that holds the frame (enum probesite_reg),
	 * with PY_REG_TSTATE where it is the thread state's current frame
	 * rather than the handler's own (after a return made the caller
	 * current); -1 when none does
	 */
	int8_t resume_regs[PY_MAX_HANDLERS];
	int8_t return_regs[PY_MAX_HANDLERS];
	int8_t yield_regs[PY_MAX_HANDLERS];
	int nresume, nreturn, nyield;
};

/*
 * Fills py for process pid. Returns 0, or a negative errno with a one-line
 * reason in err: -ESRCH no such process, -ENOEXEC not a Python process,
 * -EPROTONOSUPPORT unsupported version, other errors reading its files.
 */
int py_interp__find(pid_t pid, struct py_interp *py, char *err, size_t errlen);
/* Same as py_interp__find, for the interpreter object at path (no process: bias 0). */
int py_interp__from_file(const char *path, struct py_interp *py, char *err, size_t errlen);
/*
 * The same for a file the process pid has not mapped (yet): path as the
 * target names it, open_path where it is read from here. No load address
 * (bias 0, runtime_addr link-time); the standard library is read in the
 * target's root. For probes put on the file before the loader maps it.
 */
int py_interp__from_target_file(pid_t pid, const char *path, const char *open_path,
				struct py_interp *py, char *err, size_t errlen);
#endif /* PTG_PYINTERP_H */
