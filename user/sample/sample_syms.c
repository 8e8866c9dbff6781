// SPDX-License-Identifier: MIT
/* Address -> object and function symbol, for native stacks of sampled processes. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/u64map.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "sample/sample_syms.h"

struct obj_sym {
	uint64_t addr, size;
	uint32_t name; /* offset in names */
};

struct obj_seg {
	uint64_t offset, vaddr, filesz;
};

/* One object file, as read once for every process that maps it. */
struct obj_file {
	char *path;
	uint64_t inode;
	uint64_t dev; /* of the first mapping seen: the file it was opened as */
	int loaded;   /* 0 not yet, 1 read, < 0 unreadable */
	struct obj_sym *syms;
	size_t nsyms;
	struct buf names; /* NUL-terminated, at obj_sym.name */
	struct obj_seg *segs;
	size_t nsegs;
	uint64_t start, limit, start_offset;
};

struct syms_cache {
	struct obj_file **objs;
	size_t nobjs, cap;
	struct u64map idx; /* hash of (path, inode) -> index + 1 */
};

struct proc_map_ent {
	uint64_t start, end, offset;
	struct obj_file *obj; /* NULL: [vdso] or anonymous */
	const char *special;
};

struct proc_syms {
	struct syms_cache *cache;
	pid_t pid;
	struct proc_map_ent *maps;
	size_t nmaps, cap;
	uint64_t snapshot_ns;
};

int syms_cache__new(struct syms_cache **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void obj_free(struct obj_file *o)
{
	if (!o)
		return;
	free(o->path);
	free(o->syms);
	buf__free(&o->names);
	free(o->segs);
	free(o);
}

void syms_cache__free(struct syms_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nobjs; i++)
		obj_free(c->objs[i]);
	free(c->objs);
	u64map__free(&c->idx);
	free(c);
}

static uint64_t obj_key(const char *path, uint64_t inode)
{
	return u64map_key(u64map_hash(U64MAP_HASH_SEED ^ inode, path, strlen(path)));
}

static struct obj_file *cache_get(struct syms_cache *c, const char *path, uint64_t inode)
{
	uint64_t key = obj_key(path, inode), *idx;
	struct obj_file *o;

	for (;; key = u64map_key(key + 1)) {
		idx = u64map__get(&c->idx, key);
		if (!idx)
			break;
		o = c->objs[*idx - 1];
		if (o->inode == inode && !strcmp(o->path, path))
			return o;
	}
	if (c->nobjs == c->cap) {
		size_t ncap = c->cap ? c->cap * 2 : 32;
		struct obj_file **n = realloc(c->objs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->objs = n;
		c->cap = ncap;
	}
	o = calloc(1, sizeof(*o));
	if (!o || !(o->path = strdup(path)) || u64map__put(&c->idx, key, c->nobjs + 1)) {
		obj_free(o);
		return NULL;
	}
	o->inode = inode;
	c->objs[c->nobjs++] = o;
	return o;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct obj_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* of aliases, the sized one wins the lookup */
	return x->size < y->size ? 1 : x->size > y->size ? -1 : 0;
}

/*
 * Symbols that share one long name in the string table would each copy it:
 * what the names of an object take is bounded by the size of its file.
 */
static uint64_t names_max(uint64_t file_size)
{
	return 2 * file_size + (1 << 20);
}

static int add_name(struct obj_file *o, const char *name, uint64_t max, uint32_t *off)
{
	size_t len = strlen(name) + 1;

	if (o->names.len + len > max || o->names.len + len > UINT32_MAX)
		return -EFBIG;
	*off = (uint32_t)o->names.len;
	return buf__put(&o->names, name, len);
}

static int read_symtab(struct obj_file *o, Elf *elf, Elf64_Word type, uint64_t file_size)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t cap = o->nsyms;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		GElf_Sym sym;
		int err;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			const char *name;
			int t;

			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF ||
			    !sym.st_value)
				continue;
			t = GELF_ST_TYPE(sym.st_info);
			if (t != STT_FUNC && t != STT_GNU_IFUNC)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			if (o->nsyms == cap) {
				struct obj_sym *n;

				cap = cap ? cap * 2 : 1024;
				n = realloc(o->syms, cap * sizeof(*n));
				if (!n)
					return -ENOMEM;
				o->syms = n;
			}
			o->syms[o->nsyms].addr = sym.st_value;
			o->syms[o->nsyms].size = sym.st_size;
			err = add_name(o, name, names_max(file_size), &o->syms[o->nsyms].name);
			if (err)
				return err;
			o->nsyms++;
		}
	}
	return 0;
}

static int read_segments(struct obj_file *o, Elf *elf)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	o->segs = calloc(n ? n : 1, sizeof(*o->segs));
	if (!o->segs)
		return -ENOMEM;
	o->start = UINT64_MAX;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		o->segs[o->nsegs++] = (struct obj_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz};
		if (ph.p_vaddr < o->start) {
			o->start = ph.p_vaddr;
			o->start_offset = ph.p_offset;
		}
		if (ph.p_vaddr + ph.p_memsz > o->limit)
			o->limit = ph.p_vaddr + ph.p_memsz;
	}
	if (!o->nsegs)
		o->start = 0;
	return 0;
}

/*
 * The file mapped at e, opened as mapped (procopen.h): the object's path is
 * the target's to choose, and a FIFO or a link there must neither hang nor
 * redirect us.
 */
static int obj_open(const struct obj_file *o, const struct proc_map_ent *e, pid_t pid)
{
	struct proc_map *m = calloc(1, sizeof(*m));
	int pathfd, fd;

	if (!m)
		return -ENOMEM;
	*m = (struct proc_map){.start = e->start,
			       .end = e->end,
			       .offset = e->offset,
			       .inode = o->inode,
			       .dev = o->dev};
	snprintf(m->path, sizeof(m->path), "%s", o->path);
	pathfd = proc_map_open(pid, m);
	free(m);
	if (pathfd < 0)
		return pathfd;
	fd = proc_fd_reopen(pathfd);
	close(pathfd);
	return fd;
}

/* Reads the object's segments and function symbols, once. */
static int obj_load(struct obj_file *o, const struct proc_map_ent *e, pid_t pid)
{
	Elf *elf = NULL;
	int fd, err = -ENOEXEC;
	struct stat st;

	if (o->loaded)
		return o->loaded < 0 ? o->loaded : 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = obj_open(o, e, pid);
	if (fd < 0) {
		err = fd;
		goto cleanup;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF)
		goto cleanup;
	err = read_segments(o, elf);
	/* a stripped object still exports its dynamic symbols */
	if (!err)
		err = read_symtab(o, elf, SHT_SYMTAB, (uint64_t)st.st_size);
	if (!err && !o->nsyms)
		err = read_symtab(o, elf, SHT_DYNSYM, (uint64_t)st.st_size);
	if (!err)
		array_sort(o->syms, o->nsyms, sizeof(*o->syms), cmp_sym);
cleanup:
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	o->loaded = err ? err : 1;
	return err;
}

static const struct obj_sym *obj_lookup(const struct obj_file *o, uint64_t vaddr)
{
	size_t lo = 0, hi = o->nsyms;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (o->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* aliases at one address sort the sized one first */
	while (lo > 1 && o->syms[lo - 2].addr == o->syms[lo - 1].addr)
		lo--;
	if (o->syms[lo - 1].size && vaddr >= o->syms[lo - 1].addr + o->syms[lo - 1].size)
		return NULL;
	return &o->syms[lo - 1];
}

static int add_map(const struct proc_map *m, void *arg)
{
	struct proc_syms *ps = arg;
	struct proc_map_ent *e;

	if (m->perms[2] != 'x')
		return 0;
	if (ps->nmaps == ps->cap) {
		size_t ncap = ps->cap ? ps->cap * 2 : 64;
		struct proc_map_ent *n = realloc(ps->maps, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		ps->maps = n;
		ps->cap = ncap;
	}
	e = &ps->maps[ps->nmaps];
	*e = (struct proc_map_ent){.start = m->start, .end = m->end, .offset = m->offset};
	if (m->path[0] == '/') {
		e->obj = cache_get(ps->cache, m->path, m->inode);
		if (!e->obj)
			return -ENOMEM;
		if (!e->obj->dev)
			e->obj->dev = m->dev;
	} else {
		e->special = !strcmp(m->path, "[vdso]") ? "[vdso]" : "[anon]";
	}
	ps->nmaps++;
	return 0;
}

/* Re-reads the mappings; the old snapshot stays when the process is gone. */
static int snapshot(struct proc_syms *ps)
{
	struct proc_map_ent *old = ps->maps;
	size_t nold = ps->nmaps, oldcap = ps->cap;
	int err;

	ps->snapshot_ns = now_ns(CLOCK_MONOTONIC);
	ps->maps = NULL;
	ps->nmaps = ps->cap = 0;
	err = proc_maps__for_each(ps->pid, add_map, ps);
	if (err) {
		free(ps->maps);
		ps->maps = old;
		ps->nmaps = nold;
		ps->cap = oldcap;
		return err;
	}
	free(old);
	return 0;
}

int proc_syms__load(struct syms_cache *c, pid_t pid, struct proc_syms **out)
{
	struct proc_syms *ps = calloc(1, sizeof(*ps));
	int err;

	if (!ps)
		return -ENOMEM;
	ps->cache = c;
	ps->pid = pid;
	err = snapshot(ps);
	if (err) {
		proc_syms__free(ps);
		return err;
	}
	*out = ps;
	return 0;
}

void proc_syms__free(struct proc_syms *ps)
{
	if (!ps)
		return;
	free(ps->maps);
	free(ps);
}

static const struct proc_map_ent *find_map(const struct proc_syms *ps, uint64_t addr)
{
	for (size_t i = 0; i < ps->nmaps; i++) {
		if (addr >= ps->maps[i].start && addr < ps->maps[i].end)
			return &ps->maps[i];
	}
	return NULL;
}

static uint64_t file_to_vaddr(const struct obj_file *o, uint64_t off)
{
	for (size_t i = 0; i < o->nsegs; i++) {
		if (off >= o->segs[i].offset && off < o->segs[i].offset + o->segs[i].filesz)
			return off - o->segs[i].offset + o->segs[i].vaddr;
	}
	return off;
}

int proc_syms__resolve(struct proc_syms *ps, uint64_t addr, struct sym_result *out)
{
	const struct proc_map_ent *m = find_map(ps, addr);
	const struct obj_sym *sym;
	struct obj_file *o;

	/*
	 * A library loaded after the snapshot, or a bad frame of an unwind
	 * without frame pointers: re-read at most once a second.
	 */
	if (!m && now_ns(CLOCK_MONOTONIC) - ps->snapshot_ns > 1000000000ull &&
	    proc_exists(ps->pid)) {
		if (snapshot(ps) == 0)
			m = find_map(ps, addr);
	}
	if (!m)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	if (!m->obj) {
		out->obj = m->special;
		out->vaddr = addr - m->start;
		return 0;
	}
	o = m->obj;
	out->obj = o->path;
	if (obj_load(o, m, ps->pid)) {
		out->vaddr = addr - m->start + m->offset;
		return 0;
	}
	out->vaddr = file_to_vaddr(o, addr - m->start + m->offset);
	out->obj_start = o->start;
	out->obj_limit = o->limit;
	out->obj_offset = o->start_offset;
	sym = obj_lookup(o, out->vaddr);
	out->name = sym ? o->names.text + sym->name : NULL;
	return 0;
}
