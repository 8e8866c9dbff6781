/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The per-CPU caches of pyframe.bpf.c: the last thread seen on a CPU and
 * the code objects last sent, each entry guarded by a sequence count.
 */
#ifndef PTG_PYCACHE_BPF_H
#define PTG_PYCACHE_BPF_H

#include "ptrace_gpu/pyoffsets.h"

/*
 * Per-CPU copies of what the LRU hashes say, in front of them: a lookup
 * costs tens of ns and a call made five. The last thread seen on the CPU
 * (threads and tid_state) and the code objects last sent (seen_code).
 *
 * An entry of the thread is valid while thread_gen has not moved: every
 * change to the threads or tid_state entry of any thread, and the exit of a
 * tracked thread, moves it. A thread that ran on another CPU in between has
 * changed nothing, or moved it.
 *
 * Uprobe programs run with migration disabled but can be preempted, and
 * another thread's program on this CPU may then rewrite an entry: each
 * entry has a sequence count, odd while written (writers take it with a
 * cmpxchg and skip the write when it is taken), and a copy counts only if
 * the count was even and the same before and after it.
 */
struct tid_info {
	__u32 tid;
	__u32 ns_tid;
	__u64 gen; /* thread_gen when read from the maps */
	__u64 tstate;
	__u32 state; /* TID_*; 0: not in tid_state */
	__u32 pad;
};

/* 64-bit counts: the atomics clang emits for BPF (without -mcpu=v3) are 64-bit */
struct thread_entry {
	__u64 seq;
	struct tid_info ti;
};

#define CODE_SLOTS 256

struct code_entry {
	__u64 seq;
	__u64 code;
	__u64 epoch; /* code_epoch of pyframe.bpf.c when it was put */
	__u32 fingerprint;
	__u32 tgid;
};

/*
 * What one probe hit reads of the target in one go (the thread state's
 * fields, a frame's head, a code object's fields and first instructions):
 * 400 bytes, more than the 512-byte stack that a program and the functions
 * it calls share on kernels without private stacks (all before 6.13, and
 * builds after that which do not grant them) leaves room for. So they go
 * in a slot of the CPU's cache instead.
 *
 * A preempted program keeps its slot: the one that preempted it on this
 * CPU takes the next. Taking a slot is an add and a read back, no cmpxchg
 * (5.10 has none): a program that reads 1 owns the slot until it takes
 * its 1 away again, and while it does, no other program's read can see 1.
 */
#define SCRATCH_SLOTS 4

struct scratch {
	__u64 busy;
	__u64 tstate[PTG_PY_TSTATE_BLOCK_MAX / 8];
	__u64 frame[PTG_PY_FRAME_BLOCK_MAX / 8];
	__u64 code[PTG_PY_CODE_BLOCK_MAX / 8];
};

struct cpu_cache {
	struct scratch scratch[SCRATCH_SLOTS];
	struct thread_entry thread;
	struct code_entry code[CODE_SLOTS];
	__u64 events; /* for ptg_wakeup_flags_every(); a lost count on preemption is harmless */
	__u32 site_hits[PTG_PY_MAX_SITES]; /* register-read hits of each site: when to check */
};

/* A free slot of this CPU's scratch, or NULL when all are taken (then the caller counts a loss). */
static __always_inline struct scratch *scratch_get(struct cpu_cache *cc)
{
#pragma unroll
	for (int i = 0; i < SCRATCH_SLOTS; i++) {
		struct scratch *s = &cc->scratch[i];

		__sync_fetch_and_add(&s->busy, 1);
		if (*(volatile __u64 *)&s->busy == 1)
			return s;
		__sync_fetch_and_add(&s->busy, -1);
	}
	return 0;
}

static __always_inline void scratch_put(struct scratch *s)
{
	__sync_fetch_and_add(&s->busy, -1);
}

static __always_inline bool seq_lock(__u64 *seq, __u64 *was)
{
	*was = *(volatile __u64 *)seq;
#ifdef PTG_BPF_LEGACY
	/*
	 * No cmpxchg before 5.12; there (and up to 5.17, where this build is
	 * loaded) uprobe programs run with preemption off (__uprobe_perf_func):
	 * no other program on this CPU writes between the read and the store.
	 */
	if (*was & 1)
		return false;
	*(volatile __u64 *)seq = *was + 1;
	barrier();
	return true;
#else
	return !(*was & 1) && __sync_val_compare_and_swap(seq, *was, *was + 1) == *was;
#endif
}

static __always_inline void seq_unlock(__u64 *seq, __u64 was)
{
	barrier();
	*(volatile __u64 *)seq = was + 2;
}

static __always_inline void thread_put(struct cpu_cache *cc, const struct tid_info *ti)
{
	__u64 was;

	if (!seq_lock(&cc->thread.seq, &was))
		return;
	cc->thread.ti = *ti;
	seq_unlock(&cc->thread.seq, was);
}

static __always_inline struct code_entry *code_slot(struct cpu_cache *cc, __u64 code)
{
	/* code objects are 16-aligned and a few hundred bytes apart */
	return &cc->code[((code ^ code >> 12) >> 4) & (CODE_SLOTS - 1)];
}

static __always_inline bool code_cached(struct code_entry *e, __u64 code, __u32 fingerprint,
					__u32 tgid, __u64 epoch)
{
	__u64 seq = *(volatile __u64 *)&e->seq;
	bool hit;

	barrier();
	hit = e->code == code && e->fingerprint == fingerprint && e->tgid == tgid &&
	      e->epoch == epoch;
	barrier();
	return hit && !(seq & 1) && *(volatile __u64 *)&e->seq == seq;
}

static __always_inline void code_put(struct code_entry *e, __u64 code, __u32 fingerprint,
				     __u32 tgid, __u64 epoch)
{
	__u64 was;

	if (!seq_lock(&e->seq, &was))
		return;
	e->code = code;
	e->fingerprint = fingerprint;
	e->tgid = tgid;
	e->epoch = epoch;
	seq_unlock(&e->seq, was);
}

#endif /* PTG_PYCACHE_BPF_H */
