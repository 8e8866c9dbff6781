/* SPDX-License-Identifier: MIT */
/* Reading CPython objects (code objects, str) out of a target's memory. */
#ifndef PTG_PYCODE_H
#define PTG_PYCODE_H

#include <stddef.h>
#include <stdint.h>

#include "ptrace_gpu/fingerprint.h"
#include "pyinterp/pyinterp.h"

struct ptg_code_event;

struct py_code_info {
	char qualname[256];
	char filename[512];
	uint32_t firstlineno;
	uint32_t fingerprint; /* of the object as read, see ptg_code_fingerprint() */
};

/* Decodes a str object at addr into UTF-8. Returns 0 or a negative errno. */
int py_read_str(int memfd, const struct py_version_info *vi, uint64_t addr, char *buf, size_t len);
/* UTF-8 of nchars characters of a compact str's data, width 1, 2 or 4 bytes each. */
void py_decode_chars(const uint8_t *raw, unsigned int width, size_t nchars, char *buf, size_t len);
int py_read_code(int memfd, const struct py_version_info *vi, uint64_t code,
		 struct py_code_info *out);
/*
 * /proc/PID/mem, opened for py_read_code() (the fd, or a negative errno), and
 * closed: in the shape of the stack engine's resolver (python/pystack.h),
 * whose ctx they do not use.
 */
int py_mem_open(void *unused, uint32_t pid);
void py_mem_close(void *unused, int memfd);
/*
 * What py_read_code() would read, from the names the BPF side sent with a code
 * object's first event: good after the code, or the process, is gone.
 * -ENODATA where they did not fit the event (read the memory then).
 */
int py_code_from_event(const struct ptg_code_event *c, struct py_code_info *out);
/* tp_name of the object's type. */
int py_read_type_name(int memfd, const struct py_version_info *vi, uint64_t obj, char *buf,
		      size_t len);

#endif /* PTG_PYCODE_H */
