/* SPDX-License-Identifier: MIT */
/*
 * The state of one opscan run, shared by user/torch/opscan.c (the ELF file:
 * its symbols, PLT and GOT), user/torch/opscan_insns.c (the instructions of
 * each op: its name and its entry and exit sites) and, below both,
 * user/torch/opscan_image.c (the file's image).
 */
#ifndef PTG_OPSCAN_INT_H
#define PTG_OPSCAN_INT_H

#include <capstone/capstone.h>
#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/u64map.h"
#include "torch/opscan_types.h"

#define OPS_PREFIX	"_ZN2at4_ops"
#define FSOT_SYM	"_ZN3c1010Dispatcher17findSchemaOrThrowEPKcS2_"
#define CALLEE_SCAN_MAX 2048 /* bytes of a callee searched for the findSchemaOrThrow call */
#define MAX_CALLEES	128  /* direct calls of one op followed for its name */
#define NAME_MAX_LEN	256
#define NO_NAME		UINT64_MAX

struct range {
	uint64_t lo, hi;
};

/* What the site finder needs of a decoded instruction. */
struct scan_insn {
	uint64_t addr;
	uint64_t target;     /* direct jump or call target */
	uint64_t rip_target; /* address a rip-relative memory operand names */
	int64_t imm;	     /* second operand, immediate */
	int64_t disp;	     /* memory operand displacement */
	uint16_t id;	     /* X86_INS_* */
	uint16_t dst;	     /* first operand register, X86_REG_* */
	uint16_t mem_base, mem_index;
	uint8_t size;
	bool canary;   /* reads fs:0x28, the stack protector's canary */
	bool emulated; /* the kernel emulates it when probed (probesite_emulated()) */
	bool indirect; /* jmp/call through a register or memory */
};

struct opscan_run {
	int fd;
	uint64_t size; /* of the file */
	Elf *elf;
	GElf_Phdr *load;
	size_t nload;
	struct range plt[3]; /* .plt, .plt.sec, .plt.got */
	int nplt;
	struct u64map funcs;	   /* address of every defined function -> 1 */
	uint64_t fsot_addr;	   /* findSchemaOrThrow when defined in this object */
	struct u64map fsot_slots;  /* GOT slots relocated to findSchemaOrThrow -> 1 */
	struct u64map stubs;	   /* PLT stub -> 1 calls findSchemaOrThrow, 2 does not */
	struct u64map callee_name; /* callee -> pool offset + 1, or NO_NAME */
	csh cs;
	cs_insn *insn;
	struct scan_insn *insns; /* the function being scanned */
	size_t insns_cap;
	uint8_t *buf;
	size_t buf_cap;
	struct opscan *out;
	size_t *name_off; /* per op: offset of its name in out->pool */
	size_t ops_cap, sites_cap;
};

/* user/torch/opscan_image.c: the file's image */
int scan_vaddr_to_offset(const struct opscan_run *s, uint64_t vaddr, uint64_t *off, uint64_t *room);
/* Up to len bytes at vaddr, as far as its segment goes: symbol sizes are not trusted. */
const uint8_t *scan_code_at(struct opscan_run *s, uint64_t vaddr, size_t len, size_t *got);
bool scan_in_plt(const struct opscan_run *s, uint64_t addr);
/* target is c10::Dispatcher::findSchemaOrThrow, directly or through its PLT stub. */
bool scan_is_fsot(struct opscan_run *s, uint64_t target);
/* Appends the NUL-terminated string at vaddr to the pool; returns its offset + 1, or 0. */
size_t scan_pool_add_str(struct opscan_run *s, uint64_t vaddr);

/* user/torch/opscan_insns.c: one at::_ops::<op>::call (symbol sym) into s->out */
int scan_add_op(struct opscan_run *s, const char *sym, const GElf_Sym *es);

#endif /* PTG_OPSCAN_INT_H */
