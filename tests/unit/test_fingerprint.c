// SPDX-License-Identifier: MIT
/*
 * The code-object fingerprint rule (include/ptrace_gpu/fingerprint.h), now
 * one function for record's BPF side, the sampler's BPF side and user space:
 * - fixed inputs give fixed values, whichever side computes them (they
 *   live only while a recording or a sampling runs: no trace stores one);
 * - py_read_code(), on a memory image holding a code object laid out by each
 *   version's row, fingerprints the fields the BPF programs read (the same
 *   offsets of the same row), with the pointers as stored and a negative
 *   co_firstlineno as its 32 bits.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ptrace_gpu/fingerprint.h"
#include "pyinterp/pycode.h"
#include "pyinterp/pyinterp.h"
#include "test.h"

/* The rule's values for these inputs (computed apart from it). */
static const struct {
	uint64_t qualname, filename;
	uint32_t line, expect;
} vectors[] = {
    {0x0ull, 0x0ull, 0x0u, 0x00000000u},
    {0x7f3a12345670ull, 0x7f3a12345ab0ull, 0x1u, 0x8c8b6d99u},
    /* the line counts: the same names one line further down differ */
    {0x7f3a12345670ull, 0x7f3a12345ab0ull, 0x2u, 0x2459cfc0u},
    {0x7f3a12345ab0ull, 0x7f3a12345670ull, 0x1u, 0xb481b110u},
    {0x55d0c0de1000ull, 0x55d0c0de2000ull, 0xffffffffu, 0xf8a28bd4u},
    {0xffffffffffffffffull, 0xffffffffffffffffull, 0x7fffffffu, 0x82ceb956u},
    {0x10000ull, 0x0ull, 0x0u, 0x7f4a7c15u},
    {0x0ull, 0x10000ull, 0x10000u, 0xb9e392b6u},
};

static void check_vectors(void)
{
	char name[64];

	for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
		snprintf(name, sizeof(name), "vector %zu", i);
		ASSERT_EQ(
		    ptg_code_fingerprint(vectors[i].qualname, vectors[i].filename, vectors[i].line),
		    vectors[i].expect, name);
	}
}

static int put(int fd, uint64_t addr, const void *v, size_t n)
{
	return pwrite(fd, v, n, (off_t)addr) == (ssize_t)n ? 0 : -errno;
}

/* A compact ASCII str at addr, as vi lays it out. */
static int put_str(int fd, const struct py_version_info *vi, uint64_t addr, const char *s)
{
	int64_t length = (int64_t)strlen(s);
	uint32_t state = 1u << 6 | 1u << 5 | 1u << 2; /* ascii, compact, kind 1 */
	int err;

	if ((err = put(fd, addr + vi->off.unicode_length, &length, sizeof(length))) ||
	    (err = put(fd, addr + vi->off.unicode_state, &state, sizeof(state))))
		return err;
	return put(fd, addr + vi->off.unicode_ascii_data, s, strlen(s));
}

/*
 * A code object at code whose names are at the addresses of vector v: the
 * image is a sparse memfd read at file offset = address, as /proc/PID/mem.
 */
static void check_read(const struct py_version_info *vi, size_t v, int32_t line, uint32_t expect)
{
	const uint64_t code = 0x7f3a12300000ull;
	uint64_t q = vectors[v].qualname, f = vectors[v].filename;
	struct py_code_info ci;
	char name[96];
	int fd = memfd_create("ptg-test-code", MFD_CLOEXEC);

	snprintf(name, sizeof(name), "%s line %d", vi->name, line);
	if (!ASSERT_TRUE(fd >= 0, "memfd_create"))
		return;
	if (!ASSERT_EQ(put(fd, code + vi->off.code_qualname, &q, 8) ||
			   put(fd, code + vi->off.code_filename, &f, 8) ||
			   put(fd, code + vi->off.code_firstlineno, &line, 4) ||
			   put_str(fd, vi, q, "Model.forward") ||
			   put_str(fd, vi, f, "/srv/app/model.py"),
		       0, "image written")) {
		close(fd);
		return;
	}
	if (ASSERT_EQ(py_read_code(fd, vi, code, &ci), 0, name)) {
		ASSERT_EQ(ci.fingerprint, expect, name);
		ASSERT_EQ(ci.fingerprint, ptg_code_fingerprint(q, f, (uint32_t)line), name);
		ASSERT_TRUE(!strcmp(ci.qualname, "Model.forward"), name);
		ASSERT_TRUE(!strcmp(ci.filename, "/srv/app/model.py"), name);
	}
	close(fd);
}

int main(void)
{
	const struct py_version_info *vi, *newest = py_version_newest();

	check_vectors();
	/* every row, from 3.11 to the newest */
	for (uint32_t minor = 11;; minor++) {
		vi = py_version_lookup(0x03000000u | minor << 16 | 0xf0);
		if (!ASSERT_TRUE(vi != NULL, "a row for each minor version up to the newest"))
			break;
		check_read(vi, 1, 1, 0x8c8b6d99u);
		check_read(vi, 4, -1, 0xf8a28bd4u);
		if (vi == newest)
			break;
	}
	return TEST_DONE();
}
