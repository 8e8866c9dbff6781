// SPDX-License-Identifier: MIT
/* Moving a handler's probe onto its first kernel-emulated instruction, or not. */
#include "proc/probesite.h"
#include "test.h"

/*
 * 0x1000: mov 0x20(%rbp),%rdi        48 8b 7d 20
 * 0x1004: lea 0x2(%r14),%rax         49 8d 46 02
 * 0x1008: mov %r14,0x38(%rbp)        4c 89 75 38
 * 0x100c: jmp 0x1010                 eb 02
 * 0x100e: nop; nop                   90 90 (never reached: a jump lands at 0x1010)
 * 0x1010: mov %rax,%rbx              48 89 c3
 * 0x1013: jmp *%rax                  ff e0
 */
static const uint8_t handler[] = {
    0x48, 0x8b, 0x7d, 0x20, 0x49, 0x8d, 0x46, 0x02, 0x4c, 0x89, 0x75,
    0x38, 0xeb, 0x02, 0x90, 0x90, 0x48, 0x89, 0xc3, 0xff, 0xe0,
};

/* The same, with a conditional branch elsewhere that lands inside the prefix. */
static const uint8_t into_prefix[] = {
    0x48, 0x8b, 0x7d, 0x20, 0x49, 0x8d, 0x46, 0x02, 0x4c, 0x89, 0x75, 0x38,
    0xeb, 0x02, 0x90, 0x90, 0x48, 0x89, 0xc3, 0xff, 0xe0, 0x74, 0xed, /* 0x1015: je 0x1004 */
};

/* An indirect jump before any emulated instruction: nothing to move to. */
static const uint8_t indirect_first[] = {0x48, 0x89, 0xc3, 0xff, 0xe0, 0xeb, 0xfe};

int main(void)
{
	struct probesite_code c = {.bytes = handler, .addr = 0x1000, .size = sizeof(handler)};
	uint64_t entry = 0x1008;

	ASSERT_EQ(probesite_refine(&c, 0x1000), 0x100c, "moved to the jmp");
	ASSERT_EQ(probesite_refine(&c, 0x1010), 0x1010, "indirect jmp: stays");
	ASSERT_EQ(probesite_refine(&c, 0x2000), 0x2000, "outside the code: stays");

	c.entries = &entry;
	c.nentries = 1;
	ASSERT_EQ(probesite_refine(&c, 0x1000), 0x1000, "a table entry inside the prefix");

	c = (struct probesite_code){
	    .bytes = into_prefix, .addr = 0x1000, .size = sizeof(into_prefix)};
	ASSERT_EQ(probesite_refine(&c, 0x1000), 0x1000, "a branch lands inside the prefix");

	c = (struct probesite_code){
	    .bytes = indirect_first, .addr = 0x1000, .size = sizeof(indirect_first)};
	ASSERT_EQ(probesite_refine(&c, 0x1000), 0x1000, "control leaves before any emulated insn");
	return TEST_DONE();
}
