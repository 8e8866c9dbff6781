/* SPDX-License-Identifier: MIT */
/*
 * Where exactly to put a uprobe on a computed-goto handler. x86 uprobes
 * emulate a few instructions in the kernel (relative jumps, conditional
 * branches, relative calls, push, nop) and single-step every other one out
 * of line, one more trap: about 12 us a hit instead of under 1 us in this
 * project's VMs. A handler's first instruction is usually a mov; the first
 * branch of its straight-line start is taken on every pass just the same, so
 * the probe goes there when nothing else jumps into that stretch.
 */
#ifndef PTG_PROBESITE_H
#define PTG_PROBESITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct probesite_code {
	const uint8_t *bytes; /* the function's machine code */
	uint64_t addr;	      /* its link-time address */
	size_t size;
	/* more code whose branches may land in a handler (the hot part when handlers are .cold) */
	const uint8_t *more_bytes;
	uint64_t more_addr;
	size_t more_size;
	const uint64_t *entries; /* other addresses control reaches by table (dispatch table) */
	size_t nentries;
};

/*
 * Is the instruction of size bytes at b one that arch/x86/kernel/uprobes.c
 * emulates (relative call, jmp and jcc, push of a register, nop) rather
 * than single-steps?
 */
bool probesite_emulated(const uint8_t *b, size_t size);

/*
 * For a handler starting at start (inside code), the address of the first
 * kernel-emulated instruction of its straight-line start, when no direct
 * branch of the function and no table entry lands after start and up to it;
 * otherwise start itself.
 */
uint64_t probesite_refine(const struct probesite_code *code, uint64_t start);

/* x86-64 general registers, numbered by their slot in the kernel's struct pt_regs. */
enum probesite_reg {
	PROBESITE_R15,
	PROBESITE_R14,
	PROBESITE_R13,
	PROBESITE_R12,
	PROBESITE_RBP,
	PROBESITE_RBX,
	PROBESITE_R11,
	PROBESITE_R10,
	PROBESITE_R9,
	PROBESITE_R8,
	PROBESITE_RAX,
	PROBESITE_RCX,
	PROBESITE_RDX,
	PROBESITE_RSI,
	PROBESITE_RDI,
	PROBESITE_NR_REGS,
};

/*
 * Which register holds the frame at the probe site of an opcode handler
 * starting at start. Every CPython handler begins by storing the next
 * instruction's address into its frame (frame->prev_instr, 3.13+
 * frame->instr_ptr, at disp): the base register of the first such 8-byte
 * store in the handler's straight-line start is the frame, at the site too
 * when no instruction between the store and the site writes it (the store
 * may come before the site or after it). Returns its enum probesite_reg,
 * or -1 when there is no such store or the register changes in between.
 */
int probesite_frame_reg(const struct probesite_code *code, uint64_t start, uint64_t site,
			int32_t disp);

/*
 * Where a return handler's site comes after it made the caller the thread's
 * current frame (tstate->current_frame = caller, 3.13+, at disp): the
 * register it stored, when the store comes before the site and nothing
 * writes the register in between. That register then holds what the thread
 * state says (the caller, maybe a C-stack shim), not the handler's own
 * frame. -1 when there is none.
 */
int probesite_current_reg(const struct probesite_code *code, uint64_t start, uint64_t site,
			  int32_t disp);

#endif /* PTG_PROBESITE_H */
