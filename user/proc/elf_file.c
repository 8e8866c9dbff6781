// SPDX-License-Identifier: MIT
/* ELF symbols, segments and relocations through libelf. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "proc/elf_file.h"

#define PTR_TABLE_LEN 256

struct elf_file {
	int fd;
	uint64_t size; /* of the file: no header may make us read more */
	Elf *elf;
	GElf_Ehdr ehdr;
	size_t nphdrs;
	GElf_Phdr *phdrs;
};

int elf_file__open(const char *path, struct elf_file **out)
{
	struct elf_file *ef;
	struct stat st;
	int err = -ENOEXEC;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	ef = calloc(1, sizeof(*ef));
	if (!ef)
		return -ENOMEM;
	/*
	 * Callers pass a checked file (procopen.h); should one not, a FIFO
	 * must not hang us here, nor a tty become our terminal.
	 */
	ef->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (ef->fd < 0 || fstat(ef->fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EPERM;
		goto cleanup;
	}
	ef->size = (uint64_t)st.st_size;
	ef->elf = elf_begin(ef->fd, ELF_C_READ_MMAP, NULL);
	if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF || !gelf_getehdr(ef->elf, &ef->ehdr))
		goto cleanup;
	/* libelf clamps the count to what the file holds, and indexes it with an int */
	if (elf_getphdrnum(ef->elf, &ef->nphdrs) || ef->nphdrs > INT_MAX)
		goto cleanup;
	ef->phdrs = calloc(ef->nphdrs ? ef->nphdrs : 1, sizeof(*ef->phdrs));
	if (!ef->phdrs) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < ef->nphdrs; i++) {
		if (!gelf_getphdr(ef->elf, (int)i, &ef->phdrs[i]))
			goto cleanup;
	}
	*out = ef;
	return 0;
cleanup:
	elf_file__close(ef);
	return err;
}

void elf_file__close(struct elf_file *ef)
{
	if (!ef)
		return;
	if (ef->elf)
		elf_end(ef->elf);
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef->phdrs);
	free(ef);
}

bool elf_file__is_dyn(const struct elf_file *ef)
{
	return ef->ehdr.e_type == ET_DYN;
}

static Elf_Scn *find_section(const struct elf_file *ef, Elf64_Word type, GElf_Shdr *shdr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		if (gelf_getshdr(scn, shdr) && shdr->sh_type == type)
			return scn;
	}
	return NULL;
}

/*
 * Entries of a section's data that libelf hands out: gelf_get*() take an int
 * index and step by the type's own size, whatever sh_entsize says. Counting
 * sh_size / sh_entsize instead let a hostile header (entsize 1) run the loop
 * once per byte, far past the table, and past 2^32 wrap the index back onto
 * entries already seen. A table of more than INT_MAX entries (tens of GiB)
 * cannot be read through libelf at all: -EFBIG.
 */
static int table_len(const struct elf_file *ef, const Elf_Data *data, Elf_Type type, int *n)
{
	size_t esize = gelf_fsize(ef->elf, type, 1, EV_CURRENT);

	if (!esize)
		return -ENOEXEC;
	if (data->d_size / esize > INT_MAX)
		return -EFBIG;
	*n = (int)(data->d_size / esize);
	return 0;
}

static int find_sym_in(const struct elf_file *ef, Elf64_Word type, const char *name, bool prefix,
		       struct elf_sym_info *out)
{
	size_t len = strlen(name);
	Elf_Data *data;
	GElf_Shdr shdr;
	Elf_Scn *scn;
	int n, err;

	scn = find_section(ef, type, &shdr);
	if (!scn || !shdr.sh_entsize)
		return -ENOENT;
	data = elf_getdata(scn, NULL);
	if (!data)
		return -ENOENT;
	if ((err = table_len(ef, data, ELF_T_SYM, &n)))
		return err;
	for (int i = 0; i < n; i++) {
		const char *sname;
		GElf_Sym sym;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		sname = elf_strptr(ef->elf, shdr.sh_link, sym.st_name);
		if (!sname)
			continue;
		if (prefix ? strncmp(sname, name, len) : strcmp(sname, name))
			continue;
		out->addr = sym.st_value;
		out->size = sym.st_size;
		return 0;
	}
	return -ENOENT;
}

int elf_file__find_sym(const struct elf_file *ef, const char *name, bool prefix,
		       struct elf_sym_info *out)
{
	if (!find_sym_in(ef, SHT_DYNSYM, name, prefix, out))
		return 0;
	return find_sym_in(ef, SHT_SYMTAB, name, prefix, out);
}

static const GElf_Phdr *load_segment_of(const struct elf_file *ef, uint64_t vaddr, size_t len)
{
	for (size_t i = 0; i < ef->nphdrs; i++) {
		const GElf_Phdr *ph = &ef->phdrs[i];

		if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr &&
		    vaddr + len <= ph->p_vaddr + ph->p_filesz)
			return ph;
	}
	return NULL;
}

int elf_file__vaddr_to_offset(const struct elf_file *ef, uint64_t vaddr, uint64_t *off)
{
	const GElf_Phdr *ph = load_segment_of(ef, vaddr, 1);

	if (!ph)
		return -ENOENT;
	*off = vaddr - ph->p_vaddr + ph->p_offset;
	return 0;
}

int elf_file__read(const struct elf_file *ef, uint64_t vaddr, void *buf, size_t len)
{
	const GElf_Phdr *ph = load_segment_of(ef, vaddr, len);
	ssize_t n;

	if (!ph)
		return -ENOENT;
	n = pread(ef->fd, buf, len, vaddr - ph->p_vaddr + ph->p_offset);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/*
 * The strings of the dynamic section's entries with tag, in order, to fn
 * until it returns non-zero (that value). -ENOENT with no dynamic section.
 */
static int for_each_dyn_string(const struct elf_file *ef, int64_t tag,
			       int (*fn)(const char *s, void *ctx), void *ctx)
{
	Elf_Data *data;
	GElf_Shdr shdr;
	Elf_Scn *scn;
	int n, ret;

	scn = find_section(ef, SHT_DYNAMIC, &shdr);
	if (!scn || !shdr.sh_entsize || !(data = elf_getdata(scn, NULL)))
		return -ENOENT;
	if ((ret = table_len(ef, data, ELF_T_DYN, &n)))
		return ret;
	for (int i = 0; i < n; i++) {
		GElf_Dyn dyn;

		if (!gelf_getdyn(data, i, &dyn) || dyn.d_tag != tag)
			continue;
		ret = fn(elf_strptr(ef->elf, shdr.sh_link, dyn.d_un.d_val), ctx);
		if (ret)
			return ret;
	}
	return 0;
}

struct dyn_match {
	const char *prefix; /* NULL: the first string */
	char *buf;
	size_t len;
};

/* 1 when s is the one wanted (copied), -EINVAL for a string the file lacks. */
static int dyn_match(const char *s, void *ctx)
{
	struct dyn_match *m = ctx;

	if (!s)
		return m->prefix ? 0 : -EINVAL;
	if (m->prefix && strncmp(s, m->prefix, strlen(m->prefix)))
		return 0;
	return snprintf(m->buf, m->len, "%s", s) < (int)m->len ? 1 : -ENAMETOOLONG;
}

int elf_file__needed(const struct elf_file *ef, const char *prefix, char *buf, size_t len)
{
	struct dyn_match m = {.prefix = prefix, .buf = buf, .len = len};
	int ret = for_each_dyn_string(ef, DT_NEEDED, dyn_match, &m);

	return ret == 1 ? 0 : ret ?: -ENOENT;
}

int elf_file__dyn_string(const struct elf_file *ef, int64_t tag, char *buf, size_t len)
{
	struct dyn_match m = {.buf = buf, .len = len};
	int ret = for_each_dyn_string(ef, tag, dyn_match, &m);

	return ret == 1 ? 0 : ret ?: -ENOENT;
}

int elf_file__segment_bias(const struct elf_file *ef, uint64_t offset, uint64_t *vaddr_minus_off)
{
	for (size_t i = 0; i < ef->nphdrs; i++) {
		const GElf_Phdr *ph = &ef->phdrs[i];
		uint64_t align = ph->p_align > 1 ? ph->p_align : 1;
		uint64_t start = ph->p_offset & ~(align - 1);

		if (ph->p_type != PT_LOAD)
			continue;
		if (offset >= start && offset < ph->p_offset + ph->p_filesz) {
			*vaddr_minus_off = ph->p_vaddr - ph->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

int elf_load_bias(const char *path, uint64_t start, uint64_t offset, uint64_t *bias)
{
	struct elf_file *ef;
	uint64_t seg;
	int err;

	err = elf_file__open(path, &ef);
	if (err)
		return err;
	err = elf_file__segment_bias(ef, offset, &seg);
	if (!err)
		*bias = elf_file__is_dyn(ef) ? start - offset - seg : 0;
	elf_file__close(ef);
	return err;
}

static bool is_code(const struct elf_file *ef, uint64_t addr)
{
	for (size_t i = 0; i < ef->nphdrs; i++) {
		const GElf_Phdr *ph = &ef->phdrs[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && addr >= ph->p_vaddr &&
		    addr < ph->p_vaddr + ph->p_memsz)
			return true;
	}
	return false;
}

/* Raw pointers, as a non-PIE link leaves them in initialized data. */
static int scan_raw_tables(const struct elf_file *ef, elf_ptr_table_fn accept, void *ctx,
			   uint64_t table[PTR_TABLE_LEN])
{
	int best = 0;

	for (size_t i = 0; i < ef->nphdrs; i++) {
		const GElf_Phdr *ph = &ef->phdrs[i];
		uint64_t *words, run = 0;
		size_t n;

		if (ph->p_type != PT_LOAD || (ph->p_flags & PF_X) || ph->p_filesz < 8)
			continue;
		/* a segment past the end of the file is damage, not a reason to allocate it */
		if (ph->p_offset > ef->size || ph->p_filesz > ef->size - ph->p_offset)
			continue;
		n = ph->p_filesz / 8;
		words = malloc(n * 8);
		if (!words)
			return -ENOMEM;
		if (pread(ef->fd, words, n * 8, ph->p_offset) != (ssize_t)(n * 8)) {
			free(words);
			continue;
		}
		/* p_offset and p_vaddr agree modulo the page size, so 8-byte slots line up */
		for (size_t j = 0; j < n; j++) {
			int score;

			run = is_code(ef, words[j]) ? run + 1 : 0;
			if (run < PTR_TABLE_LEN)
				continue;
			score = accept(&words[j + 1 - PTR_TABLE_LEN],
				       ph->p_vaddr + (j + 1 - PTR_TABLE_LEN) * 8, ctx);
			if (score > best) {
				best = score;
				memcpy(table, &words[j + 1 - PTR_TABLE_LEN], PTR_TABLE_LEN * 8);
			}
		}
		free(words);
	}
	return best ? 0 : -ENOENT;
}

struct rel_slot {
	uint64_t offset;
	uint64_t addend;
};

static int cmp_slot(const void *a, const void *b)
{
	const struct rel_slot *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/*
 * Each R_X86_64_RELATIVE relocation of the object's SHT_RELA sections, to fn
 * until it returns non-zero (that value); 0 when all were seen.
 */
static int for_each_relative(const struct elf_file *ef, int (*fn)(const GElf_Rela *r, void *ctx),
			     void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		Elf_Data *data;
		int n;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_RELA || !shdr.sh_entsize)
			continue;
		if (!(data = elf_getdata(scn, NULL)))
			continue;
		/* like a section with no data: one libelf cannot index holds nothing for us */
		if (table_len(ef, data, ELF_T_RELA, &n))
			continue;
		for (int i = 0; i < n; i++) {
			GElf_Rela rela;
			int ret;

			if (!gelf_getrela(data, i, &rela) ||
			    GELF_R_TYPE(rela.r_info) != R_X86_64_RELATIVE)
				continue;
			ret = fn(&rela, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

struct slots {
	const struct elf_file *ef;
	struct rel_slot *v;
	size_t n, cap;
};

/* Keeps the relocations that point at code. */
static int add_slot(const GElf_Rela *r, void *ctx)
{
	struct slots *s = ctx;

	if (!is_code(s->ef, r->r_addend))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct rel_slot *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n].offset = r->r_offset;
	s->v[s->n++].addend = r->r_addend;
	return 0;
}

/* Relocated pointers of a PIE object: R_X86_64_RELATIVE addends into [lo, hi). */
static int scan_rela_tables(const struct elf_file *ef, elf_ptr_table_fn accept, void *ctx,
			    uint64_t table[PTR_TABLE_LEN])
{
	struct slots slots = {.ef = ef};
	uint64_t cand[PTR_TABLE_LEN];
	int err, best = 0;

	err = for_each_relative(ef, add_slot, &slots);
	if (err) {
		free(slots.v);
		return err;
	}
	err = -ENOENT;
	array_sort(slots.v, slots.n, sizeof(*slots.v), cmp_slot);
	for (size_t i = 0, run = 0; i < slots.n; i++) {
		run = i && slots.v[i].offset == slots.v[i - 1].offset + 8 ? run + 1 : 1;
		if (run < PTR_TABLE_LEN)
			continue;
		int score;

		for (size_t k = 0; k < PTR_TABLE_LEN; k++)
			cand[k] = slots.v[i + 1 - PTR_TABLE_LEN + k].addend;
		score = accept(cand, slots.v[i + 1 - PTR_TABLE_LEN].offset, ctx);
		if (score > best) {
			best = score;
			memcpy(table, cand, sizeof(cand));
			err = 0;
		}
	}
	free(slots.v);
	return err;
}

int elf_file__find_ptr_table(const struct elf_file *ef, elf_ptr_table_fn accept, void *ctx,
			     uint64_t table[256])
{
	int err;

	if (elf_file__is_dyn(ef)) {
		err = scan_rela_tables(ef, accept, ctx, table);
		if (err != -ENOENT)
			return err;
	}
	return scan_raw_tables(ef, accept, ctx, table);
}

struct addend_at {
	uint64_t vaddr;
	uint64_t addend;
};

static int match_addend(const GElf_Rela *r, void *ctx)
{
	struct addend_at *a = ctx;

	if (r->r_offset != a->vaddr)
		return 0;
	a->addend = r->r_addend;
	return 1;
}

/* The addend of the R_X86_64_RELATIVE relocation of the word at vaddr; -ENOENT if none. */
static int relative_addend(const struct elf_file *ef, uint64_t vaddr, uint64_t *addend)
{
	struct addend_at a = {.vaddr = vaddr};

	if (for_each_relative(ef, match_addend, &a) != 1)
		return -ENOENT;
	*addend = a.addend;
	return 0;
}

int elf_file__code_ptr(const struct elf_file *ef, uint64_t vaddr, uint64_t *out)
{
	uint64_t ptr;
	int err;

	if (elf_file__is_dyn(ef))
		err = relative_addend(ef, vaddr, &ptr);
	else
		err = elf_file__read(ef, vaddr, &ptr, sizeof(ptr));
	if (err)
		return err;
	if (!is_code(ef, ptr))
		return -ENOENT;
	*out = ptr;
	return 0;
}
