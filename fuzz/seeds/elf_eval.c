// SPDX-License-Identifier: MIT
/*
 * Seed of fuzz/corpus/elf/: an eval loop's shape, for elf_file's symbol
 * lookup and dispatch-table search. A computed goto through a table of 256
 * code addresses, named opcode_targets as CPython's is: raw pointers when
 * linked -no-pie, R_X86_64_RELATIVE relocations when linked -pie. And the
 * two symbols pyinterp starts from: Py_Version, and _PyRuntime, whose
 * _Py_DebugOffsets begin with a cookie and the version from 3.13 on.
 */
#ifndef PY_VERSION_HEX
#define PY_VERSION_HEX 0x030b07f0
#endif
/* not a fixed point of clang-format 14: left as written */
/* clang-format off */
#define C16(p) C(p##0) C(p##1) C(p##2) C(p##3) C(p##4) C(p##5) C(p##6) C(p##7) \
	       C(p##8) C(p##9) C(p##a) C(p##b) C(p##c) C(p##d) C(p##e) C(p##f)
#define C256 C16(x0) C16(x1) C16(x2) C16(x3) C16(x4) C16(x5) C16(x6) C16(x7) \
	     C16(x8) C16(x9) C16(xa) C16(xb) C16(xc) C16(xd) C16(xe) C16(xf)
/* clang-format on */

const unsigned long Py_Version = PY_VERSION_HEX;

struct {
	char cookie[8];
	unsigned long version;
	unsigned long rest[126];
} _PyRuntime = {"xdebugpy", PY_VERSION_HEX};

int eval(const unsigned char *code)
{
#define C(n) &&n,
	static const void *const opcode_targets[256] = {C256};
#undef C
	int acc = 0;

	goto *opcode_targets[*code++];
#define C(n)                                                                                       \
	n:                                                                                         \
	acc += __COUNTER__;                                                                        \
	if (!*code)                                                                                \
		return acc;                                                                        \
	goto *opcode_targets[*code++];
	C256
#undef C
}

int main(void)
{
	static const unsigned char prog[] = {1, 2, 3, 0};

	return eval(prog);
}

void _start(void)
{
	__asm__ volatile("mov %0, %%edi; mov $60, %%eax; syscall" : : "r"(main()) : "rdi", "rax");
	__builtin_unreachable();
}
