// SPDX-License-Identifier: MIT
#include <capstone/capstone.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proc/probesite.h"

#define MAX_PREFIX 16 /* instructions looked at after a handler's start */

bool probesite_emulated(const uint8_t *b, size_t size)
{
	uint8_t op = size ? b[0] : 0;

	if (op == 0x41 && size == 2) /* push r8-r15 */
		op = b[1];
	return op == 0xe8 || op == 0xe9 || op == 0xeb || (op >= 0x70 && op <= 0x7f) ||
	       (op == 0x0f && size == 6 && b[1] >= 0x80 && b[1] <= 0x8f) ||
	       (op >= 0x50 && op <= 0x57) || (op == 0x90 && size == 1);
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
		if (probesite_emulated(in->bytes, in->size)) {
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

/* Capstone's names of each general register, by the x86 pt_regs slot it is saved in. */
static const struct {
	int slot;
	unsigned int ids[4]; /* its 64-, 32-, 16- and 8-bit names */
} gprs[] = {
    {PROBESITE_R15, {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B}},
    {PROBESITE_R14, {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B}},
    {PROBESITE_R13, {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B}},
    {PROBESITE_R12, {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B}},
    {PROBESITE_RBP, {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL}},
    {PROBESITE_RBX, {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL}},
    {PROBESITE_R11, {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B}},
    {PROBESITE_R10, {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B}},
    {PROBESITE_R9, {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B}},
    {PROBESITE_R8, {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B}},
    {PROBESITE_RAX, {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL}},
    {PROBESITE_RCX, {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL}},
    {PROBESITE_RDX, {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL}},
    {PROBESITE_RSI, {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL}},
    {PROBESITE_RDI, {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL}},
};

/* The pt_regs slot of a capstone register (any width), or -1 (rsp, rip, flags...). */
static int gpr_slot(unsigned int reg)
{
	for (size_t i = 0; i < sizeof(gprs) / sizeof(gprs[0]); i++) {
		for (int w = 0; w < 4; w++) {
			if (gprs[i].ids[w] == reg)
				return gprs[i].slot;
		}
	}
	/* the high bytes: a write to ah changes rax as well */
	switch (reg) {
	case X86_REG_AH:
		return PROBESITE_RAX;
	case X86_REG_BH:
		return PROBESITE_RBX;
	case X86_REG_CH:
		return PROBESITE_RCX;
	case X86_REG_DH:
		return PROBESITE_RDX;
	}
	return -1;
}

/*
 * The general registers an instruction writes, as a mask of slots; every
 * one when capstone cannot tell (so that nothing is trusted across it).
 */
static uint32_t written(csh cs, const cs_insn *in)
{
	cs_regs rd, wr;
	uint8_t nrd, nwr;
	uint32_t mask = 0;

	if (cs_regs_access(cs, in, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return ~0u;
	for (int i = 0; i < nwr; i++) {
		int s = gpr_slot(wr[i]);

		if (s >= 0)
			mask |= 1u << s;
	}
	return mask;
}

/*
 * Is in `mov %src, disp(%base)` (8 bytes), both general registers? The slot
 * of base (or of src) then.
 */
static int store_at(const cs_insn *in, int32_t disp, bool want_src)
{
	const cs_x86 *x = &in->detail->x86;
	const cs_x86_op *dst = &x->operands[0], *src = &x->operands[1];

	if (in->id != X86_INS_MOV || x->op_count != 2 || dst->type != X86_OP_MEM ||
	    dst->size != 8 || src->type != X86_OP_REG || dst->mem.index != X86_REG_INVALID ||
	    dst->mem.segment != X86_REG_INVALID || dst->mem.disp != disp)
		return -1;
	if (want_src)
		return gpr_slot(dst->mem.base) < 0 ? -1 : gpr_slot(src->reg);
	return gpr_slot(dst->mem.base);
}

/*
 * The register of the first such store in the handler's straight-line
 * start, when it holds the same at the site: no write to it between the
 * store and the site (either may come first; with before_only, the store
 * must come first).
 */
static int find_store(const struct probesite_code *code, uint64_t start, uint64_t site,
		      int32_t disp, bool want_src, bool before_only)
{
	uint64_t addr = start;
	const uint8_t *p;
	cs_insn *in = NULL;
	uint32_t since_site = 0;
	bool passed = false;
	int reg = -1, found = -1;
	size_t left;
	csh cs;

	if (start < code->addr || start >= code->addr + code->size || site < start ||
	    cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -1;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	p = code->bytes + (start - code->addr);
	left = code->size - (start - code->addr);
	in = cs_malloc(cs);
	for (int n = 0; in && n < 2 * MAX_PREFIX && cs_disasm_iter(cs, &p, &left, &addr, in); n++) {
		uint32_t w;
		int r;

		if (in->address == site)
			passed = true;
		/* stored before the site and kept up to it: the register holds the frame there */
		if (passed && reg >= 0) {
			found = reg;
			break;
		}
		if (reg < 0 && (r = store_at(in, disp, want_src)) >= 0) {
			if (passed && before_only)
				break;
			if (passed) {
				/* stored after the site: kept from the site up to the store */
				found = since_site & (1u << r) ? -1 : r;
				break;
			}
			reg = r;
		}
		w = written(cs, in);
		if (passed)
			since_site |= w;
		else if (reg >= 0 && (w & (1u << reg)))
			break; /* changed before the site: the frame is elsewhere there */
		/* straight-line code only: past a branch the register may hold anything */
		if (transfers_control(in) || (!passed && in->address > site))
			break;
	}
	cs_free(in, 1);
	cs_close(&cs);
	return found;
}

int probesite_frame_reg(const struct probesite_code *code, uint64_t start, uint64_t site,
			int32_t disp)
{
	return find_store(code, start, site, disp, false, false);
}

int probesite_current_reg(const struct probesite_code *code, uint64_t start, uint64_t site,
			  int32_t disp)
{
	return find_store(code, start, site, disp, true, true);
}
