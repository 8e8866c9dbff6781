// SPDX-License-Identifier: MIT
#include <capstone/capstone.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proc/probesite.h"

#define MAX_PREFIX 16 /* instructions looked at after a handler's start */

/* Instructions arch/x86/kernel/uprobes.c emulates instead of single-stepping. */
static bool emulated(const cs_insn *in)
{
	const uint8_t *b = in->bytes;
	uint8_t op = b[0];

	if (op == 0x41 && in->size == 2) /* push r8-r15 */
		op = b[1];
	return op == 0xe8 || op == 0xe9 || op == 0xeb || (op >= 0x70 && op <= 0x7f) ||
	       (op == 0x0f && in->size == 6 && b[1] >= 0x80 && b[1] <= 0x8f) ||
	       (op >= 0x50 && op <= 0x57) || (op == 0x90 && in->size == 1);
}

static bool transfers_control(const cs_insn *in)
{
	const char *m = in->mnemonic;

	return m[0] == 'j' || !strncmp(m, "call", 4) || !strncmp(m, "ret", 3) ||
	       !strncmp(m, "int", 3) || !strcmp(m, "ud2") || !strcmp(m, "hlt") ||
	       !strncmp(m, "loop", 4) || !strcmp(m, "syscall");
}

/* Does a direct branch in [bytes, bytes + size) land in (lo, hi]? */
static bool branch_lands_in(csh cs, const uint8_t *bytes, uint64_t addr, size_t size, uint64_t lo,
			    uint64_t hi)
{
	const uint8_t *p = bytes;
	size_t left = size;
	cs_insn *in = cs_malloc(cs);
	bool found = false;

	while (!found && in && cs_disasm_iter(cs, &p, &left, &addr, in)) {
		char *end;
		uint64_t target;

		if (!transfers_control(in) || in->op_str[0] != '0')
			continue;
		target = strtoull(in->op_str, &end, 16);
		found = *end == '\0' && target > lo && target <= hi;
	}
	/*
	 * Bytes capstone cannot decode hide branches: refuse to move the probe.
	 * Fewer than an instruction's 15 are the region's end cutting one.
	 */
	if (left >= 15)
		found = true;
	cs_free(in, 1);
	return found;
}

/* Does a direct branch of the code, or a table entry, land in (lo, hi]? */
static bool lands_in(csh cs, const struct probesite_code *code, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < code->nentries; i++) {
		if (code->entries[i] > lo && code->entries[i] <= hi)
			return true;
	}
	return branch_lands_in(cs, code->bytes, code->addr, code->size, lo, hi) ||
	       (code->more_bytes &&
		branch_lands_in(cs, code->more_bytes, code->more_addr, code->more_size, lo, hi));
}

uint64_t probesite_refine(const struct probesite_code *code, uint64_t start)
{
	uint64_t site = start, addr = start;
	const uint8_t *p;
	cs_insn *in = NULL;
	size_t left;
	csh cs;

	if (start < code->addr || start >= code->addr + code->size ||
	    cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return start;
	p = code->bytes + (start - code->addr);
	left = code->size - (start - code->addr);
	in = cs_malloc(cs);
	for (int n = 0; in && n < MAX_PREFIX && cs_disasm_iter(cs, &p, &left, &addr, in); n++) {
		if (emulated(in)) {
			site = in->address;
			break;
		}
		if (transfers_control(in))
			break;
	}
	if (site != start && lands_in(cs, code, start, site))
		site = start;
	cs_free(in, 1);
	cs_close(&cs);
	return site;
}
