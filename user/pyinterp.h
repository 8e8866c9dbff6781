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

#include <linux/types.h>
#include "ptrace_gpu/pyoffsets.h"

#define PY_MAX_HANDLERS 4

/*
 * Where an object's instance attributes are, and how a dict stores its
 * entries: what reading nn.Module._modules out of the target takes.
 */
struct py_dict_layout {
	uint32_t type_flags;	     /* PyTypeObject.tp_flags */
	uint32_t type_dictoffset;    /* PyTypeObject.tp_dictoffset */
	uint32_t heaptype_cached_keys; /* PyHeapTypeObject.ht_cached_keys: shared keys of instances */
	uint64_t flag_managed_dict;  /* Py_TPFLAGS_MANAGED_DICT, 0 before 3.11 */
	int32_t managed_dict;	     /* offset of the dict pointer from the object (negative) */
	int32_t managed_values;	     /* offset of the values pointer (split keys, no dict yet) */
	uint32_t dict_keys, dict_values; /* PyDictObject.ma_keys, ma_values */
	uint32_t keys_log2_index_bytes, keys_kind, keys_nentries, keys_indices;
	uint32_t entry_size, entry_key, entry_value;		   /* PyDictKeyEntry */
	uint32_t uentry_size, uentry_key, uentry_value;		   /* PyDictUnicodeEntry */
	uint8_t kind_general; /* dk_kind of keys with PyDictKeyEntry entries */
};

/* What ptrace-gpu knows of one CPython minor version: data, not code paths. */
struct py_version_info {
	const char *name; /* "3.11" */
	uint32_t hex_min; /* first PY_VERSION_HEX covered */
	uint32_t hex_max; /* last PY_VERSION_HEX covered */
	struct ptg_py_offsets off;
	/* layouts user space reads through /proc/PID/mem */
	uint32_t code_name; /* the other code fields are in off */
	uint32_t object_type, type_name;
	uint32_t runtime_interp_head, interp_threads_head, tstate_next, tstate_native_tid;
	struct py_dict_layout dict;
	/* opcodes whose handlers are probed; lists end at 0 */
	uint8_t op_resume[PY_MAX_HANDLERS];
	uint8_t op_return[PY_MAX_HANDLERS];
	uint8_t op_yield[PY_MAX_HANDLERS];
};

struct py_interp {
	pid_t pid;
	char path[PATH_MAX];	    /* the interpreter's object as the target maps it */
	char attach_path[PATH_MAX]; /* the same file, openable from here */
	uint64_t bias;		    /* runtime address = link-time address + bias */
	uint32_t version_hex;
	char version[24];
	const struct py_version_info *info;
	uint64_t runtime_addr;	/* runtime address of _PyRuntime */
	uint64_t eval_off;	/* file offsets, for uprobes */
	uint64_t traceback_off;
	uint64_t resume_offs[PY_MAX_HANDLERS];
	uint64_t return_offs[PY_MAX_HANDLERS];
	uint64_t yield_offs[PY_MAX_HANDLERS];
	int nresume, nreturn, nyield;
};

/*
 * Fills py for process pid. Returns 0, or a negative errno with a one-line
 * reason in err: -ESRCH no such process, -ENOEXEC not a Python process,
 * -EPROTONOSUPPORT unsupported version, other errors reading its files.
 */
int py_interp__find(pid_t pid, struct py_interp *py, char *err, size_t errlen);
/* Same, for the interpreter object at path (no process: bias 0). */
int py_interp__from_file(const char *path, struct py_interp *py, char *err, size_t errlen);
/* "3.11" */
const char *py_supported_versions(void);
const struct py_version_info *py_version_lookup(uint32_t version_hex);

#endif /* PTG_PYINTERP_H */
