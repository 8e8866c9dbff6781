// SPDX-License-Identifier: MIT
/*
 * The ELF readers on any bytes: elf_file (symbols, segments, DT_NEEDED, the
 * eval loop's dispatch table), pyinterp (the interpreter's version and
 * _Py_DebugOffsets), opscan (PyTorch's ops, disassembled) and the sampler's
 * symbol cache. The last reads objects only through a process's
 * mappings, so the input is mapped here, as a library would be, and
 * addresses inside it are resolved through /proc/self/maps.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fuzz_util.h"
#include "proc/elf_file.h"
#include "pyinterp/pyinterp.h"
#include "sample/sample_syms.h"
#include "torch/opscan.h"

#define RESOLVE_POINTS 16

static int score_table(const uint64_t table[256], uint64_t table_addr, void *ctx)
{
	/* any table will do; reading all of it is the check */
	return 1 + (int)(table[0] & 1) + (int)(table[255] & 1);
}

static void read_elf_file(const char *path)
{
	struct elf_sym_info sym;
	struct elf_file *ef;
	uint64_t off, bias, table[256];
	char buf[256];

	if (elf_file__open(path, &ef))
		return;
	elf_file__is_dyn(ef);
	if (!elf_file__find_sym(ef, "main", false, &sym) ||
	    !elf_file__find_sym(ef, "opcode_targets", true, &sym)) {
		elf_file__vaddr_to_offset(ef, sym.addr, &off);
		elf_file__read(ef, sym.addr, buf, sym.size < sizeof(buf) ? sym.size : sizeof(buf));
	}
	elf_file__needed(ef, "libpython", buf, sizeof(buf));
	elf_file__segment_bias(ef, 0, &bias);
	elf_file__find_ptr_table(ef, score_table, NULL, table);
	elf_file__close(ef);
	elf_load_bias(path, 0x7f0000000000ull, 0, &bias);
}

static void read_interp(const char *path)
{
	static struct py_interp py;
	char err[512] = "";

	/* refused (no stdlib next to a fuzz input, at the latest) with a reason */
	if (py_interp__from_file(path, &py, err, sizeof(err)) && !err[0])
		abort();
}

static void read_ops(const char *path)
{
	struct opscan *s;

	if (opscan__run(path, &s))
		return;
	for (size_t i = 0; i < s->nops; i++) {
		if (!s->ops[i].name)
			abort();
	}
	for (size_t i = 0; i < s->nsites; i++) {
		if (s->sites[i].op >= s->nops)
			abort();
	}
	opscan__free(s);
}

static void resolve_mapped(const char *path, size_t size)
{
	struct syms_cache *c = NULL;
	struct proc_syms *ps = NULL;
	struct sym_result res;
	void *map;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fuzz_die(path);
	/* executable, or the sampler skips the mapping as it skips data */
	map = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		fuzz_die("mmap");
	if (syms_cache__new(&c) || proc_syms__load(c, getpid(), &ps))
		goto cleanup;
	for (size_t i = 0; i < RESOLVE_POINTS; i++) {
		uint64_t addr = (uintptr_t)map + size * i / RESOLVE_POINTS;

		if (proc_syms__resolve(ps, addr, &res))
			abort(); /* our own mapping must be found */
		/* the name must be a string of the object's table */
		if (res.name && strlen(res.name) > (size_t)-2)
			abort();
	}
cleanup:
	proc_syms__free(ps);
	syms_cache__free(c);
	munmap(map, size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_write("in.elf", data, size);

	read_elf_file(path);
	read_interp(path);
	read_ops(path);
	if (size)
		resolve_mapped(path, size);
	return 0;
}
