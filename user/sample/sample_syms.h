/* SPDX-License-Identifier: MIT */
/*
 * Native symbols for the sampler: an address in a process -> the object
 * mapped there, the link-time address in it and the function symbol that
 * covers it. Objects are read once (.symtab, else .dynsym) and shared by
 * every process that maps them; a process keeps a snapshot of its
 * executable mappings, so its stacks resolve after it exited too.
 */
#ifndef PTG_SAMPLE_SYMS_H
#define PTG_SAMPLE_SYMS_H

#include <stdint.h>
#include <sys/types.h>

struct syms_cache;
struct proc_syms;

struct sym_result {
	const char *obj;  /* path of the object in the process, or "[vdso]", "[anon]" */
	const char *name; /* function symbol, NULL when none covers the address */
	uint64_t vaddr;	  /* link-time address in obj */
	/* the object's loaded extent in link-time addresses, for pprof mappings */
	uint64_t obj_start, obj_limit, obj_offset;
};

int syms_cache__new(struct syms_cache **out);
void syms_cache__free(struct syms_cache *c);

/* Snapshot of pid's executable mappings. */
int proc_syms__load(struct syms_cache *c, pid_t pid, struct proc_syms **out);
void proc_syms__free(struct proc_syms *ps);
/*
 * Resolves addr; -ENOENT when no executable mapping holds it (the snapshot
 * is then re-read once, if the process still lives: a library was loaded).
 */
int proc_syms__resolve(struct proc_syms *ps, uint64_t addr, struct sym_result *out);

#endif /* PTG_SAMPLE_SYMS_H */
