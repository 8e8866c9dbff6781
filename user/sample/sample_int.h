/* SPDX-License-Identifier: MIT */
/*
 * The sampler's state, shared by user/sample/sample.c (BPF, intervals),
 * sample_procs.c (processes) and sample_resolve.c (stacks); their functions
 * are in sample_resolve.h and sample_procs.h.
 */
#ifndef PTG_SAMPLE_INT_H
#define PTG_SAMPLE_INT_H

#include <stdint.h>

#include "base/u64map.h"
#include "pyinterp/pyinterp.h"
#include "sample/sample_types.h"
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

/* An interpreter object already inspected: later processes that map it reuse the result. */
struct interp_tmpl {
	struct py_interp py;
	uint64_t inode;
	uint64_t start; /* where the inspected process mapped it */
};

struct sample_bpf;

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

#endif /* PTG_SAMPLE_INT_H */
