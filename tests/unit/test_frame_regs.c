// SPDX-License-Identifier: MIT
/*
 * The register that holds the frame at each opcode-handler probe site
 * (probesite_frame_reg()), on every real build of the matrix: pinned, so
 * that a change to the finder that loses a register where one was found
 * (each one saves the BPF side a thread-state walk per hit) or names
 * another fails here. The BPF side checks each register against the thread
 * state as well (tests/integration/test_frame_regs.py). Then the finder on
 * hand-made handlers: the store before the site, after it, and a register
 * written in between.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/probesite.h"
#include "pyinterp/pyinterp.h"
#include "test.h"

static const char *const names[PROBESITE_NR_REGS] = {
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10",
    "r9",  "r8",  "rax", "rcx", "rdx", "rsi", "rdi",
};

static void append(char *buf, size_t len, const int8_t *regs, int n)
{
	for (int i = 0; i < n; i++) {
		int slot = regs[i] & ~PY_REG_TSTATE;
		const char *r = regs[i] >= 0 && slot < PROBESITE_NR_REGS ? names[slot] : "-";

		/* "(ts)": the thread state's frame (the caller), not the handler's */
		snprintf(buf + strlen(buf), len - strlen(buf), " %s%s", r,
			 regs[i] >= 0 && (regs[i] & PY_REG_TSTATE) ? "(ts)" : "");
	}
}

/*
 * "resume rbp rbp return rbp yield rbp": the register of each site, "-"
 * where none.
 */
static void check_regs(const char *path, const char *expect)
{
	struct py_interp py;
	char err[512] = "", got[256] = "resume";

	if (access(path, R_OK)) {
		printf("skip %s: not on this machine\n", path);
		return;
	}
	if (!ASSERT_EQ(py_interp__from_file(path, &py, err, sizeof(err)), 0, path)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	append(got, sizeof(got), py.resume_regs, py.nresume);
	strcat(got, " return");
	append(got, sizeof(got), py.return_regs, py.nreturn);
	strcat(got, " yield");
	append(got, sizeof(got), py.yield_regs, py.nyield);
	printf("%s (%s): %s\n", path, py.version, got);
	ASSERT_STREQ(got, expect, path);
}

/*
 * 0x1000: mov 0x20(%rbp),%rdi    48 8b 7d 20
 * 0x1004: mov %r14,0x38(%rbp)    4c 89 75 38   the store
 * 0x1008: lea 0x2(%r14),%rax     49 8d 46 02
 * 0x100c: jmp 0x1010             eb 02         the site
 * 0x100e: nop; nop
 * 0x1010: ...
 */
static const uint8_t before[] = {0x48, 0x8b, 0x7d, 0x20, 0x4c, 0x89, 0x75, 0x38,
				 0x49, 0x8d, 0x46, 0x02, 0xeb, 0x02, 0x90, 0x90};
/* the same with 0x1008: mov %rbx,%rbp (48 89 dd): the frame's register is overwritten */
static const uint8_t clobbered[] = {0x48, 0x8b, 0x7d, 0x20, 0x4c, 0x89, 0x75, 0x38,
				    0x48, 0x89, 0xdd, 0x90, 0xeb, 0x02, 0x90, 0x90};
/* the store after the site: 0x1000 mov %r15,0x38(%rbx) (4c 89 7b 38), then jmp */
static const uint8_t after[] = {0x4c, 0x89, 0x7b, 0x38, 0xeb, 0xfe};
/* written between the site and the store: 0x1000 mov %rax,%rbx (48 89 c3), the store */
static const uint8_t late[] = {0x48, 0x89, 0xc3, 0x4c, 0x89, 0x7b, 0x38, 0xeb, 0xfe};
/* a store at another offset (0x40) only: no frame found */
static const uint8_t other[] = {0x4c, 0x89, 0x75, 0x40, 0xeb, 0xfe};

/*
 * A return handler that makes the caller current before the site:
 * 0x1000: mov %rbp,%rsi           48 89 ee
 * 0x1003: mov 0x8(%rbp),%r12      4c 8b 65 08
 * 0x1007: mov %r12,%rbp           4c 89 e5     the frame's register overwritten
 * 0x100a: mov %r12,0x48(%rax)     4c 89 60 48  tstate->current_frame = caller
 * 0x100e: call .                  e8 00 00 00 00  the site
 */
static const uint8_t switched[] = {0x48, 0x89, 0xee, 0x4c, 0x8b, 0x65, 0x08, 0x4c, 0x89, 0xe5,
				   0x4c, 0x89, 0x60, 0x48, 0xe8, 0x00, 0x00, 0x00, 0x00};

static int reg_of(const uint8_t *bytes, size_t size, uint64_t site)
{
	struct probesite_code code = {.bytes = bytes, .addr = 0x1000, .size = size};

	return probesite_frame_reg(&code, 0x1000, site, 0x38);
}

int main(void)
{
	const char *chroots = getenv("PTG_CHROOT_DIR") ?: "/var/cache/ptrace-gpu/chroots";
	char path[512];

	ASSERT_EQ(reg_of(before, sizeof(before), 0x100c), PROBESITE_RBP, "store before the site");
	ASSERT_EQ(reg_of(clobbered, sizeof(clobbered), 0x100c), -1, "register written after it");
	ASSERT_EQ(reg_of(after, sizeof(after), 0x1000), PROBESITE_RBX, "store at the site");
	ASSERT_EQ(reg_of(late, sizeof(late), 0x1000), -1, "written between site and store");
	ASSERT_EQ(reg_of(other, sizeof(other), 0x1000), -1, "no store at the offset");
	{
		struct probesite_code code = {
		    .bytes = switched, .addr = 0x1000, .size = sizeof(switched)};

		ASSERT_EQ(probesite_frame_reg(&code, 0x1000, 0x100e, 0x38), -1,
			  "no frame store: the handler's frame is gone");
		ASSERT_EQ(probesite_current_reg(&code, 0x1000, 0x100e, 0x48), PROBESITE_R12,
			  "the caller made current");
		ASSERT_EQ(probesite_current_reg(&code, 0x1000, 0x1007, 0x48), -1,
			  "the store after the site does not count");
	}

	check_regs("/usr/bin/python3.11", "resume rbx rbx return rbx yield rbx");
	check_regs("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
		   "resume rbp rbp return rbp yield rbp");
	check_regs("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0",
		   "resume rbx rbx return rbx rbx rbx rbx yield rbx rbx");
	/* RETURN_VALUE's site comes after the handler made the caller (r12) current */
	check_regs("/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0",
		   "resume rbp rbp rbp return r12(ts) rbp rbp rbp yield rbp rbp");
	snprintf(path, sizeof(path), "%s/trixie/usr/bin/python3.13", chroots);
	check_regs(path, "resume rbx rbx rbx return r12(ts) rbx rbx rbx yield rbx rbx");
	snprintf(path, sizeof(path), "%s/forky/usr/bin/python3.14", chroots);
	check_regs(path, "resume rbx rbx rbx return rbx rbx yield rbx rbx");
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.14", chroots);
	check_regs(path, "resume rbx rbx rbx return rbx rbx yield rbx rbx");
	snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.15", chroots);
	check_regs(path, "resume rbx rbx rbx rbx return rbx rbx yield - rbx");
	return TEST_DONE();
}
