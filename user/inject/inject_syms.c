// SPDX-License-Identifier: MIT
/*
 * What injection needs from the target's libc, found before any thread is
 * touched: dlopen (and dlerror) by their ELF symbols, and the signal
 * trampoline every step of user/inject/inject.c returns through, by its code.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "inject/inject_int.h"
#include "inject/sigframe.h"
#include "proc/elf_file.h"
#include "proc/procfs.h"
#include "proc/procopen.h"

#ifdef __x86_64__

static bool is_libc(const char *base)
{
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7);
}

static bool is_ldso(const char *base)
{
	return !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-2.", 5);
}

/*
 * The file mapped at m, as mapped (procopen.h): through map_files, or its
 * path inside the target's root with no link followed, and checked to be
 * the mapped file. An O_PATH fd (to close) and its /proc/self/fd path.
 */
static int mapped_file(pid_t pid, const struct proc_map *m, char *path, size_t len)
{
	int fd = proc_map_open(pid, m);

	if (fd >= 0)
		proc_fd_path(fd, path, len);
	return fd;
}

/* libc's dlopen (glibc >= 2.34) or __libc_dlopen_mode (older glibc), and dlerror. */
static int find_dlopen(struct target *t, const struct proc_map *m, uint64_t bias)
{
	char path[PATH_MAX];
	struct elf_file *ef;
	struct elf_sym_info s;
	int err, fd;

	fd = mapped_file(t->pid, m, path, sizeof(path));
	if (fd < 0)
		return fd;
	err = elf_file__open(path, &ef);
	close(fd);
	if (err)
		return err;
	if (!elf_file__find_sym(ef, "dlopen", false, &s) && s.addr) {
		t->dlopen_fn = bias + s.addr;
		if (!elf_file__find_sym(ef, "dlerror", false, &s) && s.addr)
			t->dlerror_fn = bias + s.addr;
	} else if (!elf_file__find_sym(ef, "__libc_dlopen_mode", false, &s) && s.addr) {
		t->dlopen_fn = bias + s.addr;
	}
	elf_file__close(ef);
	return 0;
}

static int map_bias(pid_t pid, const struct proc_map *m, uint64_t *bias)
{
	char path[PATH_MAX];
	int err, fd;

	fd = mapped_file(pid, m, path, sizeof(path));
	if (fd < 0)
		return fd;
	err = elf_load_bias(path, m->start, m->offset, bias);
	close(fd);
	return err;
}

static int scan_map(const struct proc_map *m, void *ctx)
{
	struct target *t = ctx;
	const char *base = strrchr(m->path, '/');
	uint64_t bias;

	if (!base || m->perms[2] != 'x')
		return 0;
	base++;
	if (is_ldso(base)) {
		t->ldso_text = (struct region){m->start, m->end};
	} else if (is_libc(base) && !t->dlopen_fn) {
		t->libc_text = (struct region){m->start, m->end};
		if (!map_bias(t->pid, m, &bias))
			find_dlopen(t, m, bias);
	}
	return 0;
}

/*
 * __restore_rt is a local symbol, absent from a stripped libc: found by its
 * code in the target's own copy of libc's text.
 */
static int find_restorer(struct target *t)
{
	static uint8_t buf[64 << 10];
	const size_t n = sizeof(sigframe_restorer_code);
	uint64_t addr;
	size_t len;

	for (addr = t->libc_text.lo; addr < t->libc_text.hi; addr += sizeof(buf) - n) {
		len = t->libc_text.hi - addr < sizeof(buf) ? t->libc_text.hi - addr : sizeof(buf);
		if (len < n || proc_mem_read(t->memfd, addr, buf, len))
			break;
		for (size_t i = 0; i + n <= len; i++) {
			if (buf[i] == sigframe_restorer_code[0] &&
			    !memcmp(buf + i, sigframe_restorer_code, n)) {
				t->restorer = addr + i;
				return 0;
			}
		}
	}
	return inject_fail(t, -ENOTSUP, "no signal return trampoline found in the libc of pid %d",
			   t->pid);
}

int inject_find_functions(struct target *t)
{
	int err = proc_maps__for_each(t->pid, scan_map, t);

	if (err == -ENOENT)
		return inject_fail(t, -ESRCH, "no process %d", t->pid);
	if (err)
		return inject_fail(t, err, "cannot read the mappings of pid %d: %s", t->pid,
				   strerror(-err));
	if (!t->dlopen_fn)
		return inject_fail(t, -ENOTSUP,
				   "pid %d has no glibc with dlopen (static or musl program?)",
				   t->pid);
	return find_restorer(t);
}

#endif /* __x86_64__ */
