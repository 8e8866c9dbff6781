// SPDX-License-Identifier: MIT
/*
 * Finding the interpreter in each real build on this machine (the handlers
 * of RESUME, RETURN and YIELD, wherever the compiler put them), and the
 * refusals on real binaries patched one way at a time: a version newer than
 * any known, one older than 3.11, a free-threaded build, a layout that
 * differs from the row. The patched copies are of pyenv's libpython3.13.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "proc/elf_file.h"
#include "pyinterp/pydebugoffsets.h"
#include "pyinterp/pyinterp.h"
#include "test.h"

#define LIB313 "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0"

static void check_found(const char *path, const char *version)
{
	struct py_interp py;
	char err[512] = "";
	int ret;

	if (access(path, R_OK)) {
		printf("skip %s: not on this machine\n", path);
		return;
	}
	ret = py_interp__from_file(path, &py, err, sizeof(err));
	if (!ASSERT_EQ(ret, 0, path)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	ASSERT_TRUE(!strncmp(py.version, version, strlen(version)), path);
	ASSERT_TRUE(py.nresume >= 1 && py.nreturn >= 1 && py.nyield >= 1, "handlers found");
	ASSERT_TRUE(py.eval_off && py.traceback_off, "eval loop and PyTraceBack_Here");
	printf("%s: Python %s, %d RESUME, %d return and %d yield probe sites%s\n", path, py.version,
	       py.nresume, py.nreturn, py.nyield, py.handlers_hi ? ", handlers in .cold" : "");
}

/*
 * Debian's multiarch libpython (<prefix>/lib/x86_64-linux-gnu/): analyzed from
 * the file alone, as for a probe ahead, its standard library is
 * <prefix>/lib/python3.X, one level above its own folder's parent.
 */
static void check_multiarch(const char *root, const char *version)
{
	char path[512], want[512], err[512] = "";
	struct py_interp py;
	int ret;

	snprintf(path, sizeof(path), "%s/usr/lib/x86_64-linux-gnu/libpython%s.so.1.0", root,
		 version);
	if (access(path, R_OK)) {
		printf("skip %s: not on this machine\n", path);
		return;
	}
	ret = py_interp__from_target_file(getpid(), path, path, &py, err, sizeof(err));
	if (!ASSERT_EQ(ret, 0, path)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	snprintf(want, sizeof(want), "%s/usr/lib/python%s/", root, version);
	ASSERT_TRUE(!strncmp(py.version, version, strlen(version)), "its version");
	ASSERT_TRUE(!strncmp(py.stdlib, want, strlen(want)), "its standard library");
	ASSERT_TRUE(!py.bias && py.runtime_addr, "no load address: _PyRuntime at link time");
	ASSERT_TRUE(py.nresume >= 1 && py.nreturn >= 1 && py.eval_off, "handlers found");
	printf("%s: Python %s from the file, opcodes of %s\n", path, py.version, py.stdlib);
}

/* A copy of src in dir with 8 bytes at symbol sym (+ at) replaced by v. */
static int patched_copy(const char *dir, const char *sym, uint64_t at, uint64_t v, char *out,
			size_t len)
{
	struct elf_sym_info si;
	struct elf_file *ef;
	uint64_t off;
	char cmd[1024];
	int fd, err;

	snprintf(out, len, "%s/lib%s/libpython3.13.so.1.0", dir, sym);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/lib%s && cp %s %s", dir, sym, LIB313, out);
	if (system(cmd))
		return -EIO;
	if (elf_file__open(out, &ef))
		return -EIO;
	err = elf_file__find_sym(ef, sym, false, &si) ||
	      elf_file__vaddr_to_offset(ef, si.addr + at, &off);
	elf_file__close(ef);
	if (err)
		return -ENOENT;
	fd = open(out, O_WRONLY);
	if (fd < 0)
		return -errno;
	err = pwrite(fd, &v, sizeof(v), (off_t)off) == sizeof(v) ? 0 : -EIO;
	close(fd);
	return err;
}

static void check_refused(const char *dir, const char *sym, uint64_t at, uint64_t v, int code,
			  const char *says)
{
	struct py_interp py;
	char path[512], err[512] = "";

	if (!ASSERT_EQ(patched_copy(dir, sym, at, v, path, sizeof(path)), 0, "patched copy"))
		return;
	ASSERT_EQ(py_interp__from_file(path, &py, err, sizeof(err)), code, says);
	ASSERT_TRUE(strstr(err, says) != NULL, err);
	printf("%s+%llu = %#llx: %s\n", sym, (unsigned long long)at, (unsigned long long)v, err);
}

int main(void)
{
	const char *chroots = getenv("PTG_CHROOT_DIR") ?: "/var/cache/ptrace-gpu/chroots";
	const struct py_version_info *v313 = py_version_lookup(0x030d00f0);
	char dir[] = "/tmp/ptg-pyinterp-XXXXXX", path[512], cmd[600];

	check_found("/usr/bin/python3.11", "3.11");
	check_found("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", "3.11");
	check_found("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0", "3.12");
	check_found(LIB313, "3.13");
	snprintf(path, sizeof(path), "%s/trixie/usr/bin/python3.13", chroots);
	check_found(path, "3.13");
	snprintf(path, sizeof(path), "%s/forky/usr/bin/python3.14", chroots);
	check_found(path, "3.14");
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.14", chroots);
	check_found(path, "3.14");
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.15", chroots);
	check_found(path, "3.15");
	check_multiarch("", "3.11");
	snprintf(path, sizeof(path), "%s/trixie", chroots);
	check_multiarch(path, "3.13");
	snprintf(path, sizeof(path), "%s/sid", chroots);
	check_multiarch(path, "3.15");

	if (access(LIB313, R_OK) || !mkdtemp(dir)) {
		printf("skip the refusals: no %s\n", LIB313);
		return TEST_DONE();
	}
	check_refused(dir, "Py_Version", 0, 0x031000f0, -EPROTONOSUPPORT, "newer than any version");
	check_refused(dir, "Py_Version", 0, 0x030a0cf0, -EPROTONOSUPPORT,
		      "unsupported Python version");
	check_refused(dir, "_PyRuntime", v313->debug.free_threaded, 1, -EPROTONOSUPPORT,
		      "free-threaded");
	check_refused(dir, "_PyRuntime", v313->debug.frame_previous, 16, -EPROTO,
		      "_PyInterpreterFrame.previous");
	check_refused(dir, "_PyRuntime", 0, 0, -EINVAL, "no _Py_DebugOffsets");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	return TEST_DONE();
}
