// SPDX-License-Identifier: MIT
/*
 * Dispatcher entry points of a PyTorch library, by reading its .dynsym and
 * disassembling each at::_ops::<op>::call with capstone.
 *
 * Names: the generated call() does `static auto op = create_<op>_typed_handle()`,
 * and that function (or call() itself, where it was inlined) passes the op's
 * schema name and overload name to c10::Dispatcher::findSchemaOrThrow() in
 * rdx and rcx, loaded with rip-relative leas from .rodata. Only the schema
 * name is kept: torch.profiler shows "aten::add" for add.Tensor and
 * add.Scalar alike. The constexpr name members are not exported (1.13).
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
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/types.h>
#include "clock.h"
#include "ptrace_gpu/events.h"
#include "opscan.h"
#include "u64map.h"

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
struct insn {
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
	bool indirect; /* jmp/call through a register or memory */
};

struct scan {
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
	struct insn *insns; /* the function being scanned */
	size_t insns_cap;
	uint8_t *buf;
	size_t buf_cap;
	struct opscan *out;
	size_t *name_off; /* per op: offset of its name in out->pool */
	size_t ops_cap, sites_cap;
};

int opscan_name_from_symbol(const char *sym, char *buf, size_t len)
{
	const char *p = sym + strlen(OPS_PREFIX);
	char *end;
	long n;

	if (strncmp(sym, OPS_PREFIX, strlen(OPS_PREFIX)))
		return -EINVAL;
	n = strtol(p, &end, 10);
	if (end == p || n <= 0 || (size_t)n > strlen(end) || strncmp(end + n, "4callE", 6))
		return -EINVAL;
	snprintf(buf, len, "aten::%.*s", (int)n, end);
	return 0;
}

static int vaddr_to_offset(const struct scan *s, uint64_t vaddr, uint64_t *off, uint64_t *room)
{
	for (size_t i = 0; i < s->nload; i++) {
		const GElf_Phdr *p = &s->load[i];

		if (vaddr >= p->p_vaddr && vaddr < p->p_vaddr + p->p_filesz) {
			*off = vaddr - p->p_vaddr + p->p_offset;
			*room = p->p_vaddr + p->p_filesz - vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* Reads up to len bytes of the file's image at vaddr; returns how many, or -errno. */
static ssize_t read_at(const struct scan *s, uint64_t vaddr, void *buf, size_t len)
{
	uint64_t off, room;
	ssize_t n;

	if (vaddr_to_offset(s, vaddr, &off, &room))
		return -ENOENT;
	if (len > room)
		len = room;
	n = pread(s->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

/* Up to len bytes at vaddr, as far as its segment goes: symbol sizes are not trusted. */
static const uint8_t *code_at(struct scan *s, uint64_t vaddr, size_t len, size_t *got)
{
	uint64_t off, room;
	ssize_t n;

	if (vaddr_to_offset(s, vaddr, &off, &room))
		return NULL;
	if (len > room)
		len = room;
	if (len > s->buf_cap) {
		uint8_t *b = realloc(s->buf, len);

		if (!b)
			return NULL;
		s->buf = b;
		s->buf_cap = len;
	}
	n = read_at(s, vaddr, s->buf, len);
	if (n <= 0)
		return NULL;
	*got = (size_t)n;
	return s->buf;
}

static bool in_plt(const struct scan *s, uint64_t addr)
{
	for (int i = 0; i < s->nplt; i++) {
		if (addr >= s->plt[i].lo && addr < s->plt[i].hi)
			return true;
	}
	return false;
}

/* A PLT stub jumps through its GOT slot: jmp *disp(%rip), after an endbr64 in .plt.sec. */
static bool stub_is_fsot(struct scan *s, uint64_t stub)
{
	uint64_t *known = u64map__get(&s->stubs, stub), addr = stub, slot = 0;
	const uint8_t *code;
	size_t n, got = 0;

	if (known)
		return *known == 1;
	code = code_at(s, stub, 16, &got);
	n = got;
	while (code && cs_disasm_iter(s->cs, &code, &n, &addr, s->insn)) {
		const cs_x86_op *op = &s->insn->detail->x86.operands[0];

		if (s->insn->id != X86_INS_JMP)
			continue;
		if (op->type == X86_OP_MEM && op->mem.base == X86_REG_RIP)
			slot = s->insn->address + s->insn->size + (uint64_t)op->mem.disp;
		break;
	}
	u64map__put(&s->stubs, stub, slot && u64map__get(&s->fsot_slots, slot) ? 1 : 2);
	return slot && u64map__get(&s->fsot_slots, slot);
}

static bool is_fsot(struct scan *s, uint64_t target)
{
	if (s->fsot_addr && target == s->fsot_addr)
		return true;
	return in_plt(s, target) && stub_is_fsot(s, target);
}

/* Appends the NUL-terminated string at vaddr to the pool; returns its offset + 1, or 0. */
static size_t pool_add_str(struct scan *s, uint64_t vaddr)
{
	struct opscan *o = s->out;
	char str[NAME_MAX_LEN];
	ssize_t n = read_at(s, vaddr, str, sizeof(str));
	size_t len;

	if (n <= 0)
		return 0;
	len = strnlen(str, (size_t)n);
	/* an op's schema name: "aten::addmm", "quantized::linear", "_caffe2::..." */
	if (len == (size_t)n || !len || !memmem(str, len, "::", 2))
		return 0;
	if (o->pool_len + len + 1 > o->pool_cap) {
		size_t cap = o->pool_cap ? o->pool_cap * 2 : 64 * 1024;
		char *p;

		while (cap < o->pool_len + len + 1)
			cap *= 2;
		p = realloc(o->pool, cap);
		if (!p)
			return 0;
		o->pool = p;
		o->pool_cap = cap;
	}
	memcpy(o->pool + o->pool_len, str, len + 1);
	o->pool_len += len + 1;
	return o->pool_len - len - 1 + 1;
}

static uint64_t rip_target(const cs_insn *in, const cs_x86_op *op)
{
	return in->address + in->size + (uint64_t)op->mem.disp;
}

/*
 * Follows the code at [addr, addr + len) for a call of findSchemaOrThrow,
 * remembering the last rip-relative lea into rdx (the schema name). Stops at
 * the first ret when stop_at_ret. Returns the name's pool offset + 1, or 0.
 */
static size_t find_schema_name(struct scan *s, uint64_t addr, size_t len, bool stop_at_ret)
{
	uint64_t rdx = 0;
	const uint8_t *code;
	size_t n, got = 0;

	code = code_at(s, addr, len, &got);
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
			    is_fsot(s, (uint64_t)x->operands[0].imm))
				return rdx ? pool_add_str(s, rdx) : 0;
			rdx = 0; /* a call clobbers rdx */
		}
	}
	return 0;
}

static int add_site(struct scan *s, uint64_t vaddr, uint32_t op, uint32_t site, bool fp,
		    int16_t delta)
{
	struct opscan *o = s->out;
	uint64_t off, room;

	if (vaddr_to_offset(s, vaddr, &off, &room))
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
static int decode(struct scan *s, uint64_t addr, uint32_t size, size_t *n)
{
	uint64_t pc = addr;
	const uint8_t *code;
	size_t left, got = 0;

	code = code_at(s, addr, size, &got);
	if (!code || got != size)
		return -EIO;
	left = got;
	*n = 0;
	while (cs_disasm_iter(s->cs, &code, &left, &pc, s->insn)) {
		const cs_x86 *x = &s->insn->detail->x86;
		struct insn *in;

		if (*n == s->insns_cap) {
			size_t cap = s->insns_cap ? s->insns_cap * 2 : 1024;
			struct insn *p = realloc(s->insns, cap * sizeof(*p));

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

static bool is_branch(const struct insn *in)
{
	return in->id == X86_INS_JMP || in->id == X86_INS_CALL || in->id == X86_INS_RET ||
	       is_cond_jump(in->id);
}

static bool is_epilogue(const struct insn *in)
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
static bool unwind_to_ret(const struct insn *in, size_t j, size_t k, bool *fp, int16_t *delta)
{
	bool from_rbp = false, rbp_moved = false;
	int64_t d = 0;

	for (size_t i = j + 1; i < k; i++) {
		const struct insn *x = &in[i];

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
static bool check_before_ret(const struct insn *in, size_t k, const struct u64map *targets,
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

static int exit_site(struct scan *s, uint32_t op, size_t k, const struct u64map *targets,
		     struct body *b)
{
	const struct insn *in = s->insns;
	int16_t delta = 0;
	bool fp = false;
	size_t j;

	b->exits++;
	s->out->st.rets++;
	if (check_before_ret(in, k, targets, &j, &fp, &delta)) {
		s->out->st.checks++;
		return add_site(s, in[j].addr, op, PTG_OP_SITE_CHECK, fp, delta);
	}
	return add_site(s, in[k].addr, op, PTG_OP_SITE_RET, false, 0);
}

/* Classifies insns[k] of op's body [lo, hi): exits, callees, an inlined name. */
static int body_insn(struct scan *s, uint32_t op, size_t k, uint64_t lo, uint64_t hi,
		     const struct u64map *targets, struct body *b, uint64_t *rdx)
{
	const struct insn *in = &s->insns[k];
	bool after_epilogue = k && is_epilogue(&s->insns[k - 1]);

	if (in->id == X86_INS_RET)
		return exit_site(s, op, k, targets, b);
	if (in->id == X86_INS_LEA && in->dst == X86_REG_RDX && in->rip_target)
		*rdx = in->rip_target;
	if (in->id == X86_INS_CALL && in->target) {
		/* call() with the typed-handle creation inlined */
		if (!b->name && *rdx && is_fsot(s, in->target))
			b->name = pool_add_str(s, *rdx);
		else if (b->ncallees < MAX_CALLEES && !in_plt(s, in->target))
			b->callees[b->ncallees++] = in->target;
		*rdx = 0;
		return 0;
	}
	if (in->id != X86_INS_JMP && !is_cond_jump(in->id))
		return 0;
	/* jmp *reg / *mem right after an epilogue: a tail call through a pointer */
	if ((in->indirect && in->id == X86_INS_JMP && after_epilogue) ||
	    (in->id == X86_INS_JMP && in->target && (in->target < lo || in->target >= hi) &&
	     (after_epilogue || u64map__get(&s->funcs, in->target) || in_plt(s, in->target)))) {
		b->exits++;
		s->out->st.tails++;
		/* jmp is emulated; the stack is as at entry */
		return add_site(s, in->addr, op, PTG_OP_SITE_TAIL, false, 0);
	}
	if (is_cond_jump(in->id) && in->target && (in->target < lo || in->target >= hi) &&
	    (u64map__get(&s->funcs, in->target) || in_plt(s, in->target)))
		s->out->st.cond_tails++;
	return 0;
}

static int scan_body(struct scan *s, uint32_t op, uint64_t addr, uint32_t size, struct body *b)
{
	struct u64map targets = {};
	uint64_t rdx = 0;
	size_t n;
	int err;

	err = decode(s, addr, size, &n);
	for (size_t k = 0; !err && k < n; k++) {
		const struct insn *in = &s->insns[k];

		if (is_branch(in) && in->id != X86_INS_CALL && in->target >= addr &&
		    in->target < addr + size)
			err = u64map__put(&targets, in->target, 1);
	}
	for (size_t k = 0; !err && k < n; k++)
		err = body_insn(s, op, k, addr, addr + size, &targets, b, &rdx);
	u64map__free(&targets);
	return err;
}

static size_t callee_name(struct scan *s, uint64_t callee)
{
	uint64_t *known = u64map__get(&s->callee_name, callee);
	size_t name;

	if (known)
		return *known == NO_NAME ? 0 : (size_t)*known;
	name = find_schema_name(s, callee, CALLEE_SCAN_MAX, true);
	u64map__put(&s->callee_name, callee, name ? name : NO_NAME);
	return name;
}

static int name_fallback(struct scan *s, const char *sym, size_t *name)
{
	struct opscan *o = s->out;
	char buf[NAME_MAX_LEN];
	size_t len;

	if (opscan_name_from_symbol(sym, buf, sizeof(buf)))
		return -EINVAL;
	len = strlen(buf);
	if (o->pool_len + len + 1 > o->pool_cap) {
		size_t cap = o->pool_cap ? o->pool_cap * 2 : 64 * 1024;
		char *p = realloc(o->pool, cap);

		if (!p)
			return -ENOMEM;
		o->pool = p;
		o->pool_cap = cap;
	}
	memcpy(o->pool + o->pool_len, buf, len + 1);
	*name = o->pool_len + 1;
	o->pool_len += len + 1;
	o->st.unnamed++;
	return 0;
}

/*
 * Where an op's entry probe goes: its first instruction, or the one after
 * an endbr64 (CET builds: PyTorch 2.14 in Debian). The kernel single-steps
 * endbr64, a second trap of ~14 us per call; the next instruction runs on
 * every call too, with the entry's stack pointer and arguments.
 */
static uint64_t entry_site(struct scan *s, uint64_t addr)
{
	static const uint8_t endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
	size_t got = 0;
	const uint8_t *p = code_at(s, addr, sizeof(endbr64), &got);

	return p && got == sizeof(endbr64) && !memcmp(p, endbr64, sizeof(endbr64)) ? addr + 4
										   : addr;
}

static int add_op(struct scan *s, const char *sym, const GElf_Sym *es)
{
	struct opscan *o = s->out;
	uint32_t op = (uint32_t)o->nops;
	struct body b = {};
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
	err = add_site(s, entry_site(s, es->st_value), op, PTG_OP_SITE_ENTRY, false, 0);
	err = err ?: scan_body(s, op, es->st_value, (uint32_t)es->st_size, &b);
	if (err)
		return err;
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

static bool is_op_call(const char *name)
{
	char buf[NAME_MAX_LEN];

	return !strncmp(name, OPS_PREFIX, strlen(OPS_PREFIX)) &&
	       !opscan_name_from_symbol(name, buf, sizeof(buf));
}

static Elf_Scn *section_by_type(Elf *elf, Elf64_Word type, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, sh) && sh->sh_type == type)
			return scn;
	}
	return NULL;
}

/* PLT ranges, and the GOT slots of findSchemaOrThrow from every RELA section. */
static int scan_sections(struct scan *s, size_t fsot_index)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(s->elf, &shstrndx))
		return -ENOEXEC;
	while ((scn = elf_nextscn(s->elf, scn))) {
		const char *name;
		Elf_Data *d;
		GElf_Rela r;

		if (!gelf_getshdr(scn, &sh))
			return -ENOEXEC;
		name = elf_strptr(s->elf, shstrndx, sh.sh_name);
		if (name && s->nplt < 3 &&
		    (!strcmp(name, ".plt") || !strcmp(name, ".plt.sec") ||
		     !strcmp(name, ".plt.got")))
			s->plt[s->nplt++] = (struct range){sh.sh_addr, sh.sh_addr + sh.sh_size};
		if (sh.sh_type != SHT_RELA || !fsot_index || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sizeof(Elf64_Rela); i++) {
			if (gelf_getrela(d, (int)i, &r) && GELF_R_SYM(r.r_info) == fsot_index &&
			    u64map__put(&s->fsot_slots, r.r_offset, 1))
				return -ENOMEM;
		}
	}
	return 0;
}

/* One pass over .dynsym: function addresses, and where findSchemaOrThrow is. */
static int scan_dynsym(struct scan *s, Elf_Data *d, const GElf_Shdr *sh, size_t *fsot_index)
{
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Sym es;

	for (size_t i = 1; i < n; i++) {
		const char *name;

		if (!gelf_getsym(d, (int)i, &es))
			return -ENOEXEC;
		name = elf_strptr(s->elf, sh->sh_link, es.st_name);
		if (name && !strcmp(name, FSOT_SYM)) {
			*fsot_index = i;
			if (es.st_shndx != SHN_UNDEF)
				s->fsot_addr = es.st_value;
		}
		if (GELF_ST_TYPE(es.st_info) == STT_FUNC && es.st_shndx != SHN_UNDEF &&
		    u64map__put(&s->funcs, es.st_value, 1))
			return -ENOMEM;
	}
	return 0;
}

static int scan_ops(struct scan *s, Elf_Data *d, const GElf_Shdr *sh)
{
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	GElf_Sym es;
	int err;

	for (size_t i = 1; i < n; i++) {
		size_t mark = s->out->nsites;
		const char *name;

		if (!gelf_getsym(d, (int)i, &es) || GELF_ST_TYPE(es.st_info) != STT_FUNC ||
		    es.st_shndx == SHN_UNDEF || !es.st_size)
			continue;
		name = elf_strptr(s->elf, sh->sh_link, es.st_name);
		if (!name || !is_op_call(name))
			continue;
		err = add_op(s, name, &es);
		if (err == -EILSEQ || err == -EIO) {
			/* no probe on an op whose code cannot be decoded whole */
			fprintf(stderr, "opscan: skipping %s: cannot decode it\n", name);
			s->out->nsites = mark;
			continue;
		}
		if (err)
			return err;
	}
	return 0;
}

static int load_phdrs(struct scan *s)
{
	struct stat st;
	size_t n;
	GElf_Phdr p;

	if (elf_getphdrnum(s->elf, &n))
		return -ENOEXEC;
	if (fstat(s->fd, &st))
		return -errno;
	s->load = calloc(n ? n : 1, sizeof(*s->load));
	if (!s->load)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		/* a segment past the end of the file is damage: code_at() sizes by them */
		if (gelf_getphdr(s->elf, (int)i, &p) && p.p_type == PT_LOAD &&
		    p.p_offset <= s->size && p.p_filesz <= s->size - p.p_offset)
			s->load[s->nload++] = p;
	}
	return 0;
}

static int scan_open(struct scan *s, const char *path)
{
	struct stat st;

	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0 || fstat(s->fd, &st))
		return -errno;
	s->size = (uint64_t)st.st_size;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	s->elf = elf_begin(s->fd, ELF_C_READ_MMAP, NULL);
	if (!s->elf || elf_kind(s->elf) != ELF_K_ELF)
		return -ENOEXEC;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &s->cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(s->cs, CS_OPT_DETAIL, CS_OPT_ON);
	s->insn = cs_malloc(s->cs);
	return s->insn ? load_phdrs(s) : -ENOMEM;
}

static void scan_close(struct scan *s)
{
	if (s->insn)
		cs_free(s->insn, 1);
	if (s->cs)
		cs_close(&s->cs);
	if (s->elf)
		elf_end(s->elf);
	if (s->fd >= 0)
		close(s->fd);
	free(s->load);
	free(s->buf);
	free(s->insns);
	free(s->name_off);
	u64map__free(&s->funcs);
	u64map__free(&s->fsot_slots);
	u64map__free(&s->stubs);
	u64map__free(&s->callee_name);
}

static int scan_file(struct scan *s, const char *path)
{
	size_t fsot_index = 0;
	Elf_Scn *scn;
	Elf_Data *d;
	GElf_Shdr sh;
	int err;

	err = scan_open(s, path);
	if (err)
		return err;
	scn = section_by_type(s->elf, SHT_DYNSYM, &sh);
	if (!scn || !(d = elf_getdata(scn, NULL)))
		return 0; /* nothing exported, no ops */
	err = scan_dynsym(s, d, &sh, &fsot_index);
	err = err ?: scan_sections(s, fsot_index);
	return err ?: scan_ops(s, d, &sh);
}

int opscan__run(const char *path, struct opscan **out)
{
	struct scan s = {.fd = -1};
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int err;

	s.out = calloc(1, sizeof(*s.out));
	if (!s.out)
		return -ENOMEM;
	err = scan_file(&s, path);
	if (err) {
		fprintf(stderr, "opscan: cannot read the ops of %s: %s\n", path, strerror(-err));
		scan_close(&s);
		opscan__free(s.out);
		return err;
	}
	for (size_t i = 0; i < s.out->nops; i++)
		s.out->ops[i].name = s.out->pool + s.name_off[i];
	s.out->st.elapsed_ns = now_ns(CLOCK_MONOTONIC) - t0;
	scan_close(&s);
	*out = s.out;
	return 0;
}

void opscan__free(struct opscan *s)
{
	if (!s)
		return;
	free(s->ops);
	free(s->sites);
	free(s->pool);
	free(s);
}
