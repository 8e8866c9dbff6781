// SPDX-License-Identifier: MIT
/*
 * The instructions of one dispatcher entry point, decoded with capstone:
 * the op's name (see user/torch/opscan.c) and its entry and exit sites.
 *
 * Exits: uprobes go on instruction boundaries only, so each function is
 * decoded from its first byte to its st_size, where GCC leaves no data.
 * Out-of-range jumps are either tail calls (the stack is as at entry: the
 * target is a function, or the jump follows an epilogue pop/leave/add rsp)
 * or jumps into the function's .cold part, which holds exception landing
 * pads that end in _Unwind_Resume and is not probed.
 */
#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>
#include "proc/probesite.h"
#include "ptrace_gpu/events.h"
#include "torch/opscan_int.h"

static uint64_t rip_target(const cs_insn *in, const cs_x86_op *op)
{
	return in->address + in->size + (uint64_t)op->mem.disp;
}

/*
 * Follows the code at [addr, addr + len) for a call of findSchemaOrThrow,
 * remembering the last rip-relative lea into rdx (the schema name). Stops at
 * the first ret when stop_at_ret. Returns the name's pool offset + 1, or 0.
 */
static size_t find_schema_name(struct opscan_run *s, uint64_t addr, size_t len, bool stop_at_ret)
{
	uint64_t rdx = 0;
	const uint8_t *code;
	size_t n, got = 0;

	code = scan_code_at(s, addr, len, &got);
	n = got;
	while (code && cs_disasm_iter(s->cs, &code, &n, &addr, s->insn)) {
		const cs_x86 *x = &s->insn->detail->x86;

		if (s->insn->id == X86_INS_RET && stop_at_ret)
			break;
		if (s->insn->id == X86_INS_LEA && x->op_count == 2 &&
		    x->operands[0].type == X86_OP_REG && x->operands[1].type == X86_OP_MEM &&
		    x->operands[1].mem.base == X86_REG_RIP) {
			if (x->operands[0].reg == X86_REG_RDX)
				rdx = rip_target(s->insn, &x->operands[1]);
		} else if (s->insn->id == X86_INS_CALL) {
			if (x->operands[0].type == X86_OP_IMM &&
			    scan_is_fsot(s, (uint64_t)x->operands[0].imm))
				return rdx ? scan_pool_add_str(s, rdx) : 0;
			rdx = 0; /* a call clobbers rdx */
		}
	}
	return 0;
}

static int add_site(struct opscan_run *s, uint64_t vaddr, uint32_t op, uint32_t site, bool fp,
		    int16_t delta)
{
	struct opscan *o = s->out;
	uint64_t off, room;

	if (scan_vaddr_to_offset(s, vaddr, &off, &room))
		return -ENOENT;
	if (o->nsites == s->sites_cap) {
		size_t cap = s->sites_cap ? s->sites_cap * 2 : 8192;
		struct opscan_site *n = realloc(o->sites, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		o->sites = n;
		s->sites_cap = cap;
	}
	o->sites[o->nsites++] = (struct opscan_site){
	    .offset = off,
	    .op = op,
	    .site = site,
	    .fp = fp,
	    .delta = delta,
	};
	return 0;
}

static bool is_cond_jump(unsigned int id)
{
	return id >= X86_INS_JAE && id <= X86_INS_JS && id != X86_INS_JMP;
}

/* Decodes [addr, addr + size) into s->insns. */
static int decode(struct opscan_run *s, uint64_t addr, uint32_t size, size_t *n)
{
	uint64_t pc = addr;
	const uint8_t *code;
	size_t left, got = 0;

	code = scan_code_at(s, addr, size, &got);
	if (!code || got != size)
		return -EIO;
	left = got;
	*n = 0;
	while (cs_disasm_iter(s->cs, &code, &left, &pc, s->insn)) {
		const cs_x86 *x = &s->insn->detail->x86;
		struct scan_insn *in;

		if (*n == s->insns_cap) {
			size_t cap = s->insns_cap ? s->insns_cap * 2 : 1024;
			struct scan_insn *p = realloc(s->insns, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			s->insns = p;
			s->insns_cap = cap;
		}
		in = &s->insns[(*n)++];
		memset(in, 0, sizeof(*in));
		in->addr = s->insn->address;
		in->size = s->insn->size;
		in->id = s->insn->id;
		in->emulated = probesite_emulated(s->insn->bytes, s->insn->size);
		for (int i = 0; i < x->op_count && i < 2; i++) {
			const cs_x86_op *op = &x->operands[i];

			if (op->type == X86_OP_REG && i == 0)
				in->dst = op->reg;
			if (op->type == X86_OP_IMM && i == 0)
				in->target = (uint64_t)op->imm;
			if (op->type == X86_OP_IMM && i == 1)
				in->imm = op->imm;
			if (op->type == X86_OP_MEM) {
				in->mem_base = op->mem.base;
				in->mem_index = op->mem.index;
				in->disp = op->mem.disp;
				in->rip_target = op->mem.base == X86_REG_RIP
						     ? in->addr + in->size + (uint64_t)op->mem.disp
						     : 0;
				in->canary = op->mem.segment == X86_REG_FS && op->mem.disp == 0x28;
			}
			if (i == 0 && op->type != X86_OP_IMM &&
			    (in->id == X86_INS_JMP || in->id == X86_INS_CALL))
				in->indirect = true;
		}
	}
	/* capstone stops at bytes it cannot decode: sites past them would be guesses */
	return left ? -EILSEQ : 0;
}

static bool is_branch(const struct scan_insn *in)
{
	return in->id == X86_INS_JMP || in->id == X86_INS_CALL || in->id == X86_INS_RET ||
	       is_cond_jump(in->id);
}

static bool is_epilogue(const struct scan_insn *in)
{
	return in->id == X86_INS_POP || in->id == X86_INS_LEAVE ||
	       (in->id == X86_INS_ADD && in->dst == X86_REG_RSP);
}

/*
 * Where the stack pointer of the op's entry is at insns[j], from the way
 * insns[j + 1 .. k - 1] unwind the frame before the ret at k (where the
 * stack pointer is the entry's again). Returns false on anything else than
 * moves, pops, leave, lea rsp,[rbp + d] and add/sub rsp,imm.
 */
static bool unwind_to_ret(const struct scan_insn *in, size_t j, size_t k, bool *fp, int16_t *delta)
{
	bool from_rbp = false, rbp_moved = false;
	int64_t d = 0;

	for (size_t i = j + 1; i < k; i++) {
		const struct scan_insn *x = &in[i];

		if (x->id == X86_INS_LEA && x->dst == X86_REG_RSP && x->mem_base == X86_REG_RBP &&
		    !x->mem_index && !rbp_moved) {
			from_rbp = true;
			d = x->disp;
		} else if ((x->id == X86_INS_ADD || x->id == X86_INS_SUB) &&
			   x->dst == X86_REG_RSP && !x->mem_base) {
			d += x->id == X86_INS_ADD ? x->imm : -x->imm;
		} else if (x->id == X86_INS_POP) {
			d += 8;
			rbp_moved |= x->dst == X86_REG_RBP;
		} else if (x->id == X86_INS_LEAVE && !rbp_moved) {
			from_rbp = true;
			d = 8;
			rbp_moved = true;
		} else if (x->id == X86_INS_MOV || x->id == X86_INS_NOP) {
			if (x->dst == X86_REG_RSP || x->dst == X86_REG_RBP)
				return false;
		} else {
			return false;
		}
	}
	if (d < INT16_MIN || d > INT16_MAX)
		return false;
	*fp = from_rbp;
	*delta = (int16_t)d;
	return true;
}

/*
 * An emulated instruction before the ret at k on the only way to it: the
 * stack protector's `jne __stack_chk_fail` right after `sub/xor reg,
 * fs:0x28`. x86 runs a probed ret out of line with one more trap (12.5 us a
 * hit in a VM here, bench/uprobe_cost.c), a jne it emulates (0.7 us).
 */
static bool check_before_ret(const struct scan_insn *in, size_t k, const struct u64map *targets,
			     size_t *j_out, bool *fp, int16_t *delta)
{
	for (size_t j = k; j-- > 1 && k - j <= 16;) {
		if (u64map__get(targets, in[j + 1].addr))
			return false; /* a way into the epilogue past the check */
		if (in[j].id == X86_INS_JNE && in[j - 1].canary) {
			*j_out = j;
			return unwind_to_ret(in, j, k, fp, delta);
		}
		if (is_branch(&in[j]))
			return false;
	}
	return false;
}

struct body {
	uint64_t callees[MAX_CALLEES];
	int ncallees;
	size_t name; /* pool offset + 1 when call() itself calls findSchemaOrThrow */
	int exits;
};

static int exit_site(struct opscan_run *s, uint32_t op, size_t k, const struct u64map *targets,
		     struct body *b)
{
	const struct scan_insn *in = s->insns;
	int16_t delta = 0;
	bool fp = false;
	size_t j;

	b->exits++;
	s->out->st.rets++;
	if (check_before_ret(in, k, targets, &j, &fp, &delta)) {
		s->out->st.checks++;
		return add_site(s, in[j].addr, op, PTG_OP_SITE_CHECK, fp, delta);
	}
	s->out->st.stepped++; /* x86 does not emulate ret */
	return add_site(s, in[k].addr, op, PTG_OP_SITE_RET, false, 0);
}

/* Classifies insns[k] of op's body [lo, hi): exits, callees, an inlined name. */
static int body_insn(struct opscan_run *s, uint32_t op, size_t k, uint64_t lo, uint64_t hi,
		     const struct u64map *targets, struct body *b, uint64_t *rdx)
{
	const struct scan_insn *in = &s->insns[k];
	bool after_epilogue = k && is_epilogue(&s->insns[k - 1]);

	if (in->id == X86_INS_RET)
		return exit_site(s, op, k, targets, b);
	if (in->id == X86_INS_LEA && in->dst == X86_REG_RDX && in->rip_target)
		*rdx = in->rip_target;
	if (in->id == X86_INS_CALL && in->target) {
		/* call() with the typed-handle creation inlined */
		if (!b->name && *rdx && scan_is_fsot(s, in->target))
			b->name = scan_pool_add_str(s, *rdx);
		else if (b->ncallees < MAX_CALLEES && !scan_in_plt(s, in->target))
			b->callees[b->ncallees++] = in->target;
		*rdx = 0;
		return 0;
	}
	if (in->id != X86_INS_JMP && !is_cond_jump(in->id))
		return 0;
	/* jmp *reg / *mem right after an epilogue: a tail call through a pointer */
	if ((in->indirect && in->id == X86_INS_JMP && after_epilogue) ||
	    (in->id == X86_INS_JMP && in->target && (in->target < lo || in->target >= hi) &&
	     (after_epilogue || u64map__get(&s->funcs, in->target) ||
	      scan_in_plt(s, in->target)))) {
		b->exits++;
		s->out->st.tails++;
		s->out->st.stepped += !in->emulated;
		/* the stack is as at entry */
		return add_site(s, in->addr, op, PTG_OP_SITE_TAIL, false, 0);
	}
	if (is_cond_jump(in->id) && in->target && (in->target < lo || in->target >= hi) &&
	    (u64map__get(&s->funcs, in->target) || scan_in_plt(s, in->target)))
		s->out->st.cond_tails++;
	return 0;
}

/* Decodes and classifies op's body; *decoded: how many instructions s->insns holds of it. */
static int scan_body(struct opscan_run *s, uint32_t op, uint64_t addr, uint32_t size,
		     struct body *b, size_t *decoded)
{
	struct u64map targets = {};
	uint64_t rdx = 0;
	size_t n;
	int err;

	err = decode(s, addr, size, &n);
	*decoded = err ? 0 : n;
	for (size_t k = 0; !err && k < n; k++) {
		const struct scan_insn *in = &s->insns[k];

		if (is_branch(in) && in->id != X86_INS_CALL && in->target >= addr &&
		    in->target < addr + size)
			err = u64map__put(&targets, in->target, 1);
	}
	for (size_t k = 0; !err && k < n; k++)
		err = body_insn(s, op, k, addr, addr + size, &targets, b, &rdx);
	u64map__free(&targets);
	return err;
}

static size_t callee_name(struct opscan_run *s, uint64_t callee)
{
	uint64_t *known = u64map__get(&s->callee_name, callee);
	size_t name;

	if (known)
		return *known == NO_NAME ? 0 : (size_t)*known;
	name = find_schema_name(s, callee, CALLEE_SCAN_MAX, true);
	u64map__put(&s->callee_name, callee, name ? name : NO_NAME);
	return name;
}

static int name_fallback(struct opscan_run *s, const char *sym, size_t *name)
{
	struct opscan *o = s->out;
	char buf[NAME_MAX_LEN];
	size_t len;

	if (opscan_name_from_symbol(sym, buf, sizeof(buf)))
		return -EINVAL;
	len = strlen(buf);
	if (buf__put(&o->pool, buf, len + 1))
		return -ENOMEM;
	*name = o->pool.len - len; /* offset + 1 of the len + 1 bytes just added */
	o->st.unnamed++;
	return 0;
}

/*
 * Where an op's entry probe goes: its first instruction, or the one after
 * an endbr64 (CET builds: PyTorch 2.14 in Debian). The kernel single-steps
 * endbr64, a second trap of ~14 us per call; the next instruction runs on
 * every call too, with the entry's stack pointer and arguments.
 */
static uint64_t entry_site(struct opscan_run *s, uint64_t addr)
{
	static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
	size_t got = 0;
	const uint8_t *p = scan_code_at(s, addr, sizeof(endbr64), &got);

	return p && got == sizeof(endbr64) && !memcmp(p, endbr64, sizeof(endbr64)) ? addr + 4
										   : addr;
}

int scan_add_op(struct opscan_run *s, const char *sym, const GElf_Sym *es)
{
	struct opscan *o = s->out;
	uint32_t op = (uint32_t)o->nops;
	struct body b = {};
	uint64_t entry;
	size_t ninsns = 0;
	int err;

	if (o->nops == s->ops_cap) {
		size_t cap = s->ops_cap ? s->ops_cap * 2 : 4096;
		struct opscan_op *n = realloc(o->ops, cap * sizeof(*n));
		size_t *no = realloc(s->name_off, cap * sizeof(*no));

		if (n)
			o->ops = n;
		if (no)
			s->name_off = no;
		if (!n || !no)
			return -ENOMEM;
		s->ops_cap = cap;
	}
	entry = entry_site(s, es->st_value);
	err = add_site(s, entry, op, PTG_OP_SITE_ENTRY, false, 0);
	err = err ?: scan_body(s, op, es->st_value, (uint32_t)es->st_size, &b, &ninsns);
	if (err)
		return err;
	/* the body's instructions are still decoded: the entry is the first or second */
	for (size_t k = 0; k < 2 && k < ninsns; k++)
		if (s->insns[k].addr == entry && !s->insns[k].emulated)
			o->st.stepped++;
	for (int i = 0; !b.name && i < b.ncallees; i++)
		b.name = callee_name(s, b.callees[i]);
	if (!b.name && (err = name_fallback(s, sym, &b.name)))
		return err;
	if (!b.exits)
		o->st.no_exit++;
	o->ops[op] = (struct opscan_op){.addr = es->st_value, .size = (uint32_t)es->st_size};
	s->name_off[op] = b.name - 1;
	o->nops++;
	o->st.ops++;
	return 0;
}
