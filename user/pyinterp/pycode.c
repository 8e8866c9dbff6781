// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <linux/types.h>

#include "proc/procfs.h"
#include "ptrace_gpu/events.h"
#include "pyinterp/pycode.h"

#define MAX_STR_CHARS 1024

/* PyASCIIObject.state bits: interned:2, kind:3, compact:1, ascii:1 */
#define STATE_KIND(s)	 (((s) >> 2) & 7)
#define STATE_COMPACT(s) (((s) >> 5) & 1)
#define STATE_ASCII(s)	 (((s) >> 6) & 1)

static size_t put_utf8(char *out, size_t room, uint32_t cp)
{
	char tmp[4];
	size_t n;

	/* lone surrogates (allowed in str) and garbage have no UTF-8 form */
	if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		cp = 0xfffd;
	if (cp < 0x80) {
		tmp[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		tmp[0] = (char)(0xc0 | cp >> 6);
		tmp[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		tmp[0] = (char)(0xe0 | cp >> 12);
		tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		tmp[0] = (char)(0xf0 | cp >> 18);
		tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		tmp[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (n >= room)
		return 0;
	memcpy(out, tmp, n);
	return n;
}

int py_read_str(int memfd, const struct py_version_info *vi, uint64_t addr, char *buf, size_t len)
{
	uint8_t raw[MAX_STR_CHARS * 4];
	uint32_t state = 0;
	int64_t length = 0;
	size_t width;
	int err;

	if (!addr || !len)
		return -EINVAL;
	if ((err = proc_mem_read(memfd, addr + vi->off.unicode_length, &length, sizeof(length))) ||
	    (err = proc_mem_read(memfd, addr + vi->off.unicode_state, &state, sizeof(state))))
		return err;
	if (length < 0 || !STATE_COMPACT(state))
		return -EINVAL; /* legacy (non-compact) strings do not name code */
	if (length > MAX_STR_CHARS)
		length = MAX_STR_CHARS;
	width = STATE_ASCII(state) ? 1 : STATE_KIND(state);
	if (width != 1 && width != 2 && width != 4)
		return -EINVAL;
	err = proc_mem_read(
	    memfd,
	    addr + (STATE_ASCII(state) ? vi->off.unicode_ascii_data : vi->off.unicode_compact_data),
	    raw, (size_t)length * width);
	if (err)
		return err;
	py_decode_chars(raw, (unsigned int)width, (size_t)length, buf, len);
	return 0;
}

void py_decode_chars(const uint8_t *raw, unsigned int width, size_t nchars, char *buf, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < nchars; i++) {
		uint32_t cp = width == 1   ? raw[i]
			      : width == 2 ? (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8
					   : (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
						 (uint32_t)raw[4 * i + 2] << 16 |
						 (uint32_t)raw[4 * i + 3] << 24;
		size_t n = put_utf8(buf + o, len - o, cp);

		if (!n)
			break;
		o += n;
	}
	buf[o] = '\0';
}

int py_mem_open(void *unused, uint32_t pid)
{
	char path[64];
	int fd;

	(void)unused;
	snprintf(path, sizeof(path), "/proc/%u/mem", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void py_mem_close(void *unused, int memfd)
{
	(void)unused;
	close(memfd);
}

int py_read_code(int memfd, const struct py_version_info *vi, uint64_t code,
		 struct py_code_info *out)
{
	uint64_t qualname = 0, filename = 0;
	int32_t line = 0;
	int err;

	if ((err = proc_mem_read(memfd, code + vi->off.code_qualname, &qualname, 8)) ||
	    (err = proc_mem_read(memfd, code + vi->off.code_filename, &filename, 8)) ||
	    (err = proc_mem_read(memfd, code + vi->off.code_firstlineno, &line, 4)))
		return err;
	out->fingerprint = ptg_code_fingerprint(qualname, filename, (uint32_t)line);
	if ((err = py_read_str(memfd, vi, qualname, out->qualname, sizeof(out->qualname))) ||
	    (err = py_read_str(memfd, vi, filename, out->filename, sizeof(out->filename))))
		return err;
	out->firstlineno = line > 0 ? (uint32_t)line : 0;
	return 0;
}

int py_read_type_name(int memfd, const struct py_version_info *vi, uint64_t obj, char *buf,
		      size_t len)
{
	uint64_t type = 0, name = 0;
	int err;

	if ((err = proc_mem_read(memfd, obj + vi->object_type, &type, 8)) ||
	    (err = proc_mem_read(memfd, type + vi->type_name, &name, 8)))
		return err;
	for (size_t i = 0; i + 1 < len; i++) {
		if ((err = proc_mem_read(memfd, name + i, &buf[i], 1)))
			return err;
		if (!buf[i])
			return 0;
	}
	buf[len - 1] = '\0';
	return 0;
}

int py_code_from_event(const struct ptg_code_event *c, struct py_code_info *out)
{
	if (!c->name_width || !c->file_width)
		return -ENODATA;
	py_decode_chars(c->name, c->name_width, c->name_chars, out->qualname,
			sizeof(out->qualname));
	py_decode_chars(c->file, c->file_width, c->file_chars, out->filename,
			sizeof(out->filename));
	out->firstlineno = (uint32_t)c->hdr.b;
	out->fingerprint = c->hdr.aux;
	return 0;
}
