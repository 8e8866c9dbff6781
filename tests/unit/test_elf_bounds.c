// SPDX-License-Identifier: MIT
/*
 * ELF headers and symbol tables are sized by what the file holds, not by
 * what its headers claim: crafted objects that made elf_file ask for 2 GiB
 * (a segment past the end of the file) and the sampler's symbol reader copy
 * one long name once per symbol that points at it.
 */
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "proc/elf_file.h"
#include "sample/sample_syms.h"
#include "test.h"

#define NAME_LEN (64 << 10)
#define NR_SYMS	 20000

static void tmp_path(char *buf, size_t len, const char *name)
{
	const char *dir = getenv("TMPDIR");

	snprintf(buf, len, "%s/ptg-%s-%d.so", dir ? dir : "/tmp", name, getpid());
}

static long maxrss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* An ET_DYN object: .symtab of NR_SYMS functions all named by one NAME_LEN string. */
static int write_sym_bomb(const char *path, uint64_t load_filesz)
{
	static const char shstr[] = "\0.symtab\0.strtab\0.shstrtab";
	size_t strsz = NAME_LEN + 2, symsz = (NR_SYMS + 1) * sizeof(Elf64_Sym);
	size_t off_sym = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), off_str = off_sym + symsz;
	size_t off_shstr = off_str + strsz, off_sh = (off_shstr + sizeof(shstr) + 7) & ~7ul;
	Elf64_Ehdr eh = {
	    .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
	    .e_type = ET_DYN,
	    .e_machine = EM_X86_64,
	    .e_version = EV_CURRENT,
	    .e_phoff = sizeof(Elf64_Ehdr),
	    .e_shoff = off_sh,
	    .e_ehsize = sizeof(Elf64_Ehdr),
	    .e_phentsize = sizeof(Elf64_Phdr),
	    .e_phnum = 1,
	    .e_shentsize = sizeof(Elf64_Shdr),
	    .e_shnum = 4,
	    .e_shstrndx = 3,
	};
	/* data, not code: where elf_file looks for tables of code pointers */
	Elf64_Phdr ph = {.p_type = PT_LOAD,
			 .p_flags = PF_R | PF_W,
			 .p_filesz = load_filesz,
			 .p_memsz = load_filesz,
			 .p_align = 4096};
	Elf64_Shdr sh[4] = {
	    {0},
	    {.sh_name = 1,
	     .sh_type = SHT_SYMTAB,
	     .sh_offset = off_sym,
	     .sh_size = symsz,
	     .sh_link = 2,
	     .sh_entsize = sizeof(Elf64_Sym)},
	    {.sh_name = 9, .sh_type = SHT_STRTAB, .sh_offset = off_str, .sh_size = strsz},
	    {.sh_name = 17,
	     .sh_type = SHT_STRTAB,
	     .sh_offset = off_shstr,
	     .sh_size = sizeof(shstr)},
	};
	char *name = malloc(strsz);
	FILE *f = fopen(path, "wbx");
	int ok;

	if (!f || !name) {
		free(name);
		if (f)
			fclose(f);
		return -1;
	}
	memset(name, 'f', strsz);
	name[0] = name[strsz - 1] = '\0';
	fwrite(&eh, sizeof(eh), 1, f);
	fwrite(&ph, sizeof(ph), 1, f);
	for (size_t i = 0; i <= NR_SYMS; i++) {
		Elf64_Sym s = {0};

		if (i) {
			s.st_name = 1;
			s.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
			s.st_shndx = 1;
			s.st_value = 0x1000 + i * 16;
			s.st_size = 16;
		}
		fwrite(&s, sizeof(s), 1, f);
	}
	fwrite(name, strsz, 1, f);
	fwrite(shstr, sizeof(shstr), 1, f);
	fseek(f, (long)off_sh, SEEK_SET);
	fwrite(sh, sizeof(sh), 1, f);
	ok = !ferror(f);
	free(name);
	return fclose(f) == 0 && ok ? 0 : -1;
}

static int never(const uint64_t table[256], uint64_t addr, void *ctx)
{
	(void)table, (void)addr, (void)ctx;
	return 0;
}

/* A 2 GiB data segment in a file of a few hundred KiB is skipped, not allocated. */
static void test_segment_past_eof(void)
{
	struct elf_file *ef = NULL;
	uint64_t table[256];
	char path[256];
	long before = maxrss_kib();

	tmp_path(path, sizeof(path), "segment");
	unlink(path);
	if (!ASSERT_EQ(write_sym_bomb(path, 2ull << 30), 0, "write the object"))
		return;
	if (ASSERT_EQ(elf_file__open(path, &ef), 0, "open")) {
		ASSERT_EQ(elf_file__find_ptr_table(ef, never, NULL, table), -ENOENT,
			  "no table, and no -ENOMEM");
		elf_file__close(ef);
	}
	printf("segment past the end: peak RSS grew %ld KiB\n", maxrss_kib() - before);
	unlink(path);
}

/* 20,000 symbols share one 64 KiB name: 1.3 GB of copies before, refused now. */
static void test_shared_long_name(void)
{
	struct syms_cache *cache = NULL;
	struct proc_syms *ps = NULL;
	struct sym_result res;
	char path[256];
	long before, grew;
	FILE *f;
	void *map;

	tmp_path(path, sizeof(path), "names");
	unlink(path);
	if (!ASSERT_EQ(write_sym_bomb(path, 4096), 0, "write the object"))
		return;
	/* the sampler reads objects mapped executable in a process: this one */
	f = fopen(path, "rb");
	map = f ? mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(f), 0) : MAP_FAILED;
	if (map == MAP_FAILED) {
		/* a noexec TMPDIR: nothing to check there, which is no failure */
		printf("skip: cannot map %s executable: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		unlink(path);
		return;
	}
	before = maxrss_kib();
	if (ASSERT_EQ(syms_cache__new(&cache), 0, "cache") &&
	    ASSERT_EQ(proc_syms__load(cache, getpid(), &ps), 0, "load")) {
		ASSERT_EQ(proc_syms__resolve(ps, (uint64_t)(uintptr_t)map + 16, &res), 0,
			  "resolve");
		ASSERT_TRUE(res.name == NULL, "no symbol from an object over its bounds");
	}
	grew = maxrss_kib() - before;
	printf("%d symbols of one %d KiB name: peak RSS grew %ld KiB\n", NR_SYMS, NAME_LEN >> 10,
	       grew);
	ASSERT_TRUE(grew < 64 << 10, "symbol names bounded by the size of the file");
	proc_syms__free(ps);
	syms_cache__free(cache);
	munmap(map, 4096);
	fclose(f);
	unlink(path);
}

int main(void)
{
	/* the old readers fail on allocation here instead of filling the machine */
	struct rlimit as;

	if (!getrlimit(RLIMIT_AS, &as) && as.rlim_max > 1ul << 30) {
		as.rlim_cur = 1ul << 30;
		setrlimit(RLIMIT_AS, &as);
	}
	test_segment_past_eof();
	test_shared_long_name();
	return TEST_DONE();
}
