// SPDX-License-Identifier: MIT
/*
 * The library file's image as opscan reads it: op names from the symbols of
 * at::_ops::<op>::call, addresses to file offsets through the PT_LOAD
 * segments, code and strings at an address, the PLT and its stub of
 * c10::Dispatcher::findSchemaOrThrow. opscan.c (the ELF file) and
 * opscan_insns.c (the instructions) both read through it.
 */
#include <capstone/capstone.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/types.h>
#include "ptrace_gpu/events.h"
#include "torch/opscan_int.h"

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

int scan_vaddr_to_offset(const struct opscan_run *s, uint64_t vaddr, uint64_t *off, uint64_t *room)
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
static ssize_t read_at(const struct opscan_run *s, uint64_t vaddr, void *buf, size_t len)
{
	uint64_t off, room;
	ssize_t n;

	if (scan_vaddr_to_offset(s, vaddr, &off, &room))
		return -ENOENT;
	if (len > room)
		len = room;
	n = pread(s->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

/* Up to len bytes at vaddr, as far as its segment goes: symbol sizes are not trusted. */
const uint8_t *scan_code_at(struct opscan_run *s, uint64_t vaddr, size_t len, size_t *got)
{
	uint64_t off, room;
	ssize_t n;

	if (scan_vaddr_to_offset(s, vaddr, &off, &room))
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

bool scan_in_plt(const struct opscan_run *s, uint64_t addr)
{
	for (int i = 0; i < s->nplt; i++) {
		if (addr >= s->plt[i].lo && addr < s->plt[i].hi)
			return true;
	}
	return false;
}

/* A PLT stub jumps through its GOT slot: jmp *disp(%rip), after an endbr64 in .plt.sec. */
static bool stub_is_fsot(struct opscan_run *s, uint64_t stub)
{
	uint64_t *known = u64map__get(&s->stubs, stub), addr = stub, slot = 0;
	const uint8_t *code;
	size_t n, got = 0;

	if (known)
		return *known == 1;
	code = scan_code_at(s, stub, 16, &got);
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

bool scan_is_fsot(struct opscan_run *s, uint64_t target)
{
	if (s->fsot_addr && target == s->fsot_addr)
		return true;
	return scan_in_plt(s, target) && stub_is_fsot(s, target);
}

/* Appends the NUL-terminated string at vaddr to the pool; returns its offset + 1, or 0. */
size_t scan_pool_add_str(struct opscan_run *s, uint64_t vaddr)
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
	if (buf__put(&o->pool, str, len + 1))
		return 0;
	return o->pool.len - len; /* offset + 1 of the len + 1 bytes just added */
}
