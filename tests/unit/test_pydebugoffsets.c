// SPDX-License-Identifier: MIT
/*
 * The version rows against each interpreter's own _Py_DebugOffsets (3.13+),
 * read from the interpreters on this machine: pyenv's libpython3.13 and the
 * Debian chroots' executables where tools/make-chroots.sh built them. And the
 * refusals: a free-threaded build, a changed layout, a missing cookie.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "proc/elf_file.h"
#include "pyinterp/pydebugoffsets.h"
#include "test.h"

static int read_runtime(const char *path, uint8_t *raw, size_t len, uint32_t *hex)
{
	struct elf_sym_info rt, ver;
	struct elf_file *ef;
	uint64_t v = 0;
	int err;

	if (elf_file__open(path, &ef))
		return -1;
	err = elf_file__find_sym(ef, "_PyRuntime", false, &rt) ||
	      elf_file__find_sym(ef, "Py_Version", false, &ver) ||
	      elf_file__read(ef, ver.addr, &v, sizeof(v)) || elf_file__read(ef, rt.addr, raw, len);
	elf_file__close(ef);
	*hex = (uint32_t)v;
	return err ? -1 : 0;
}

static void check_real(const char *path)
{
	const struct py_version_info *vi;
	uint8_t raw[1024];
	char err[256] = "";
	uint32_t hex;

	if (access(path, R_OK)) {
		printf("skip %s: not on this machine\n", path);
		return;
	}
	if (!ASSERT_EQ(read_runtime(path, raw, sizeof(raw), &hex), 0, path))
		return;
	vi = py_version_lookup(hex);
	if (!ASSERT_TRUE(vi != NULL, path))
		return;
	ASSERT_TRUE(vi->debug.size > 0, "3.13+ rows know _Py_DebugOffsets");
	ASSERT_EQ(py_debug_offsets__check(vi, hex, raw, sizeof(raw), err, sizeof(err)), 0, path);
	if (err[0])
		fprintf(stderr, "%s: %s\n", path, err);
	printf("%s: Python %s row agrees with _Py_DebugOffsets\n", path, vi->name);
}

/* A synthetic table from the row itself, then changed one way at a time. */
static void check_refusals(void)
{
	const struct py_version_info *vi = py_version_lookup(0x030d05f0);
	uint8_t raw[1024] = {0};
	uint64_t v;
	char err[256];

	memcpy(raw, PY_DEBUG_COOKIE, 8);
	v = 0x030d05f0;
	memcpy(raw + 8, &v, 8);
#define PUT(idx, val) (v = (val), memcpy(raw + vi->debug.idx, &v, 8))
	PUT(tstate_native_tid, vi->off.tstate_native_tid);
	PUT(frame_code, vi->off.frame_code);
	PUT(code_qualname, vi->off.code_qualname);
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, sizeof(raw), err, sizeof(err)),
		  -EPROTO, "fields the synthetic table leaves 0 differ");
	/* fill every field the row has: agrees */
	PUT(interp_head, vi->off.runtime_interp_head);
	PUT(interp_next, vi->off.interp_next);
	PUT(threads_head, vi->off.interp_threads_head);
	PUT(tstate_next, vi->off.tstate_next);
	PUT(tstate_current_frame, vi->off.cframe_current_frame);
	PUT(frame_previous, vi->off.frame_previous);
	PUT(frame_instr, vi->off.frame_prev_instr);
	PUT(frame_localsplus, vi->off.frame_localsplus);
	PUT(frame_owner, vi->off.frame_owner);
	PUT(code_filename, vi->off.code_filename);
	PUT(code_name, vi->code_name);
	PUT(code_linetable, vi->code_linetable);
	PUT(code_firstlineno, vi->off.code_firstlineno);
	PUT(code_adaptive, vi->code_adaptive);
	PUT(object_type, vi->object_type);
	PUT(type_name, vi->type_name);
	PUT(bytes_size, vi->bytes_size);
	PUT(bytes_data, vi->bytes_data);
	PUT(unicode_state, vi->off.unicode_state);
	PUT(unicode_length, vi->off.unicode_length);
	PUT(unicode_ascii_size, vi->off.unicode_ascii_data);
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, sizeof(raw), err, sizeof(err)), 0,
		  "complete synthetic table agrees");
	PUT(frame_previous, vi->off.frame_previous + 8);
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, sizeof(raw), err, sizeof(err)),
		  -EPROTO, "a moved field is refused");
	ASSERT_TRUE(strstr(err, "_PyInterpreterFrame.previous") != NULL, err);
	PUT(frame_previous, vi->off.frame_previous);
	PUT(free_threaded, 1);
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, sizeof(raw), err, sizeof(err)),
		  -EPROTONOSUPPORT, "free-threaded build refused");
	ASSERT_TRUE(strstr(err, "free-threaded") != NULL, err);
	PUT(free_threaded, 0);
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d06f0, raw, sizeof(raw), err, sizeof(err)),
		  -EINVAL, "table of another version refused");
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, 16, err, sizeof(err)), -EINVAL,
		  "short read refused");
	raw[0] = 'y';
	ASSERT_EQ(py_debug_offsets__check(vi, 0x030d05f0, raw, sizeof(raw), err, sizeof(err)),
		  -EINVAL, "no cookie refused");
	ASSERT_EQ(py_debug_offsets__check(py_version_lookup(0x030b07f0), 0x030b07f0, raw, 0, err,
					  sizeof(err)),
		  0, "3.11 has no table to check");
#undef PUT
}

int main(void)
{
	const char *chroots = getenv("PTG_CHROOT_DIR") ?: "/var/cache/ptrace-gpu/chroots";
	char path[512];

	check_real("/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0");
	snprintf(path, sizeof(path), "%s/trixie/usr/bin/python3.13", chroots);
	check_real(path);
	snprintf(path, sizeof(path), "%s/forky/usr/bin/python3.14", chroots);
	check_real(path);
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.14", chroots);
	check_real(path);
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.15", chroots);
	check_real(path);
	check_refusals();
	return TEST_DONE();
}
