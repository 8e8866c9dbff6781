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
 * The instructions of each op are scanned in user/torch/opscan_insns.c, the
 * file's image read in user/torch/opscan_image.c.
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
#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "ptrace_gpu/events.h"
#include "torch/opscan.h"
#include "torch/opscan_int.h"

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
static int scan_sections(struct opscan_run *s, size_t fsot_index)
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
static int scan_dynsym(struct opscan_run *s, Elf_Data *d, const GElf_Shdr *sh, size_t *fsot_index)
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

static int scan_ops(struct opscan_run *s, Elf_Data *d, const GElf_Shdr *sh)
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
		err = scan_add_op(s, name, &es);
		if (err == -EILSEQ || err == -EIO) {
			/* no probe on an op whose code cannot be decoded whole */
			pr_err("opscan: skipping %s: cannot decode it", name);
			s->out->nsites = mark;
			continue;
		}
		if (err)
			return err;
	}
	return 0;
}

static int load_phdrs(struct opscan_run *s)
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
		/* a segment past the end of the file is damage: scan_code_at() sizes by them */
		if (gelf_getphdr(s->elf, (int)i, &p) && p.p_type == PT_LOAD &&
		    p.p_offset <= s->size && p.p_filesz <= s->size - p.p_offset)
			s->load[s->nload++] = p;
	}
	return 0;
}

static int scan_open(struct opscan_run *s, const char *path)
{
	struct stat st;

	/* path is a checked file (procopen.h); a FIFO must not hang us even so */
	s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (s->fd < 0 || fstat(s->fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPERM;
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

static void scan_close(struct opscan_run *s)
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

static int scan_file(struct opscan_run *s, const char *path)
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
	struct opscan_run s = {.fd = -1};
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int err;

	s.out = calloc(1, sizeof(*s.out));
	if (!s.out)
		return -ENOMEM;
	err = scan_file(&s, path);
	if (err) {
		pr_err("opscan: cannot read the ops of %s: %s", path, strerror(-err));
		scan_close(&s);
		opscan__free(s.out);
		return err;
	}
	for (size_t i = 0; i < s.out->nops; i++)
		s.out->ops[i].name = s.out->pool.text + s.name_off[i];
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
	buf__free(&s->pool);
	free(s);
}
