/* SPDX-License-Identifier: MIT */
/*
 * The sampler's state, shared by user/sample/sample.c (BPF, intervals),
 * sample_procs.c (processes) and sample_resolve.c (stacks).
 */
#ifndef PTG_SAMPLE_INT_H
#define PTG_SAMPLE_INT_H

#include <stdint.h>

#include "base/u64map.h"
#include "pyinterp/pyinterp.h"
#include "sample/sample.h"
#include "sample/sample_syms.h"

/* In cached frame lists: Python, the frame was entered from C; native, it is the eval loop. */
#define FRAME_FLAG (1u << 31)

/* Interned strings, functions and frames: each added once, indices stable. */
struct sample_tables {
	char **strs;
	size_t nstrs, strs_cap;
	struct u64map str_idx;
	struct sample_func *funcs;
	size_t nfuncs, funcs_cap;
	struct u64map func_idx;
	struct sample_frame *frames;
	size_t nframes, frames_cap;
	struct u64map frame_idx;
};

const char *tables_str(struct sample_tables *t, const char *s);
/* Frame of a function with no line or address; UINT32_MAX when out of memory. */
uint32_t tables_simple_frame(struct sample_tables *t, const char *name, const char *file,
			     uint32_t start_line, uint32_t kind, uint32_t line);
uint32_t tables_frame(struct sample_tables *t, const struct sample_frame *f);
void tables_free(struct sample_tables *t);

/* A code object of a process, read once. */
struct scode {
	uint64_t code;
	uint32_t fingerprint;
	uint32_t func; /* UINT32_MAX: unreadable */
	int32_t firstlineno;
	uint32_t ltlen;
	uint8_t *linetable;
};

/* A sampled process; it stays after exit until its samples are written. */
struct sproc {
	pid_t pid;
	uint32_t ns_pid; /* its pid in its container (a pid namespace below ours), else 0 */
	uint64_t starttime;
	bool alive;
	uint32_t last_gen; /* last interval that counted a sample of it */
	const char *comm;
	const char *interp;
	struct py_interp py;
	int memfd;
	struct scode *codes;
	size_t ncodes, codes_cap;
	struct u64map code_idx; /* code address -> index + 1 */
	struct proc_syms *syms;
};

/* A resolved stack (Python or native) or a thread name, kept while it is in use. */
struct centry {
	uint32_t tgid;
	uint32_t id32;	   /* tid, or native stack id */
	uint64_t id64;	   /* Python stack hash */
	uint32_t last_gen; /* last interval that used it */
	uint32_t depth;
	uint32_t *frames; /* outermost first, FRAME_FLAG or'ed in */
	const char *name; /* thread name */
};

struct ccache {
	struct u64map idx;
	struct centry *e;
	size_t n, cap;
};

struct centry *ccache_get(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64);
/* The new entry; pointers to entries are invalid after the next add. */
struct centry *ccache_add(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64);
/* Drops entries last used before min_gen; drop() is called on each first. */
int ccache_prune(struct ccache *c, uint32_t min_gen, void (*drop)(void *ctx, struct centry *e),
		 void *ctx);
void ccache_free(struct ccache *c);

/* An interpreter object already inspected: later processes that map it reuse the result. */
struct interp_tmpl {
	struct py_interp py;
	uint64_t inode;
	uint64_t start; /* where the inspected process mapped it */
};

struct sample_bpf;

/* sample_legacy.c: the ELF bytes of bpf/sample.bpf.c built without bpf_loop */
const void *sample_legacy_elf(size_t *size);

struct sampler {
	struct sample_opts o;
	struct sample_bpf *skel;
	int ncpus;
	int *pfds;
	struct bpf_link **links;
	struct ring_buffer *rb;
	int counts_fd, py_stacks_fd, native_fd;
	uint64_t period_ns;
	uint32_t gen;
	uint64_t interval_start_mono, interval_start_real;
	uint64_t next_tick;
	uint64_t drops_seen; /* ring-buffer notices lost, as of the last sweep */
	struct sproc **procs;
	size_t nprocs, procs_cap;
	struct u64map proc_idx; /* pid -> index + 1 of the live (or last) process */
	struct u64map others;	/* pid -> hash of its exe link: seen, not Python */
	struct sample_tables t;
	struct ccache py, native, threads;
	struct syms_cache *syms;
	struct interp_tmpl *tmpls;
	size_t ntmpls;
	/* what take() hands out */
	struct sample_set set;
	struct sample_row *rows;
	size_t rows_cap;
	uint32_t *pool;
	size_t pool_len, pool_cap;
	struct sample_proc *set_procs;
	size_t set_procs_cap;
	/* user-space losses */
	uint64_t unresolved_code, lost_py_stacks, lost_native_stacks;
};

struct sproc *sampler_proc(struct sampler *s, uint32_t tgid);
/* Resolve into the caches; 0 or a negative errno (out of memory). */
int resolve_py_stack(struct sampler *s, struct sproc *sp, uint64_t hash, struct centry **out);
int resolve_native_stack(struct sampler *s, struct sproc *sp, int32_t id, struct centry **out);
/* The row's frames: Python frames, merged into the native stack when there is one. */
int build_frames(struct sampler *s, const struct centry *py, const struct centry *nat,
		 uint32_t *out, uint32_t *depth, uint32_t max);
void sproc_free(struct sproc *sp);

/* user/sample/sample_procs.c */
/*
 * Starts sampling pid. Returns 0, or a negative errno with the reason in
 * err: -ENOEXEC not Python, -EPROTONOSUPPORT an unsupported version.
 */
int sampler_add_pid(struct sampler *s, pid_t pid, char *err, size_t errlen);
/* -a: every Python process not seen yet, or that ran exec since. */
void sampler_scan_all(struct sampler *s);
/* Ended processes leave the BPF map (their pid may come back as another program). */
void sampler_check_exits(struct sampler *s);

#endif /* PTG_SAMPLE_INT_H */
