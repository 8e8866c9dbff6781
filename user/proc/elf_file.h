/* SPDX-License-Identifier: MIT */
/* Reading symbols, data and address mappings of an ELF object (libelf). */
#ifndef PTG_ELF_FILE_H
#define PTG_ELF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_file;

struct elf_sym_info {
	uint64_t addr; /* st_value: link-time virtual address */
	uint64_t size;
};

int elf_file__open(const char *path, struct elf_file **out);
void elf_file__close(struct elf_file *ef);
/* ET_DYN (PIE or shared library) rather than ET_EXEC. */
bool elf_file__is_dyn(const struct elf_file *ef);
/*
 * Looks a symbol up by exact name in .dynsym, then .symtab; with prefix set,
 * the first symbol whose name starts with `name` (for local statics that the
 * compiler renamed, e.g. "opcode_targets.3"). Returns 0 or -ENOENT.
 */
int elf_file__find_sym(const struct elf_file *ef, const char *name, bool prefix,
		       struct elf_sym_info *out);
/* Converts a link-time virtual address to a file offset (uprobe attach offset). */
int elf_file__vaddr_to_offset(const struct elf_file *ef, uint64_t vaddr, uint64_t *off);
/* Reads len bytes of initialized data at link-time address vaddr. */
int elf_file__read(const struct elf_file *ef, uint64_t vaddr, void *buf, size_t len);
/*
 * The code address a pointer in initialized data at link-time address vaddr
 * holds (a type's slot, say): the R_X86_64_RELATIVE addend in a PIE or
 * shared object, the word itself in an ET_EXEC one. -ENOENT unless it lies
 * in an executable segment.
 */
int elf_file__code_ptr(const struct elf_file *ef, uint64_t vaddr, uint64_t *out);
/* The DT_NEEDED entry that starts with prefix, copied to buf; -ENOENT if none. */
int elf_file__needed(const struct elf_file *ef, const char *prefix, char *buf, size_t len);
/*
 * The string of the first dynamic entry with this tag (DT_RPATH,
 * DT_RUNPATH), copied to buf. -ENOENT if none, -ENAMETOOLONG if cut.
 */
int elf_file__dyn_string(const struct elf_file *ef, int64_t tag, char *buf, size_t len);
/* p_vaddr - p_offset of the PT_LOAD segment mapped at file offset `offset`. */
int elf_file__segment_bias(const struct elf_file *ef, uint64_t offset, uint64_t *vaddr_minus_off);
/*
 * Load bias of the object at path, mapped at address start from file offset
 * offset: what its link-time addresses are moved by (0 for ET_EXEC).
 */
int elf_load_bias(const char *path, uint64_t start, uint64_t offset, uint64_t *bias);
/*
 * Finds the table of 256 code pointers that score() rates highest (given the
 * entries and the table's own link-time address; 0 rejects): the eval loop's
 * computed-goto dispatch table. Works on stripped objects: raw pointers in
 * the data of a non-PIE executable, R_X86_64_RELATIVE addends in a PIE one.
 * Fills table[256] with link-time addresses.
 */
typedef int (*elf_ptr_table_fn)(const uint64_t table[256], uint64_t table_addr, void *ctx);
int elf_file__find_ptr_table(const struct elf_file *ef, elf_ptr_table_fn accept, void *ctx,
			     uint64_t table[256]);

#endif /* PTG_ELF_FILE_H */
