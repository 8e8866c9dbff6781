// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Python frame probes: uprobes on the eval loop's opcode handlers see every
 * Python frame start and end, including the Python-to-Python calls that
 * CPython 3.11 runs inside one _PyEval_EvalFrameDefault invocation.
 *
 *   RESUME / RESUME_QUICK handler  -> PY_START (oparg 0) or PY_RESUME (oparg > 0)
 *   RETURN_VALUE handler           -> PY_RETURN
 *   YIELD_VALUE handler            -> PY_YIELD
 *   PyTraceBack_Here(f)            -> PY_UNWIND: an exception reached f's frame,
 *                                     so every frame above it has exited
 *   _PyEval_EvalFrameDefault ret 0 -> PY_UNWIND: an entry frame exited by an
 *                                     exception into C code
 *
 * Each event is a fixed-size record: the frame's address and code object's
 * address are keys that user space resolves once. On the first event of a
 * thread, and after a drop, the thread's frame chain is sent as well so that
 * user space can rebuild the stack exactly.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* libbpf 1.1 has no BPF_UPROBE(): BPF_KPROBE() reads the same pt_regs. */

#include "ptrace_gpu/events.h"
#include "ptrace_gpu/pyoffsets.h"
#include "hold.bpf.h"
#include "pycache.bpf.h"
#include "preempt.bpf.h"
#include "pystate.bpf.h"
#include "ringbuf.bpf.h"
#include "traced.bpf.h"

#define TID_SNAPSHOTTED 0x1 /* the thread's stack was sent */
#define TID_DIRTY	0x2 /* an event of the thread was dropped since */

const volatile struct ptg_py_offsets off = {};
const volatile __u64 runtime_addr = 0;	/* runtime address of _PyRuntime */
const volatile __u8 resume_ops[6] = {}; /* RESUME, its specialized and instrumented forms; 0 ends */
const volatile __u8 resume_where_mask = 3;    /* oparg bits: where it resumes, 0 = a call starts */
const volatile __u8 resume_not_a_call = 0xff; /* 3.15: RESUME_AT_GEN_EXPR_START */
/*
 * Several processes (record -p A,B, --children): the probes sit on the
 * interpreter's file, in every process that maps it, and only those of the
 * traced set go on. Each may map the file elsewhere: _PyRuntime's address
 * comes from the probe's own address and its cookie, not runtime_addr
 * (filter_tgids and the traced set: traced.bpf.h).
 */

/* check the frame of every register-read hit against the thread state (PTG_PYFRAME_VERIFY=1) */
const volatile bool verify_regs = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by the loader */
} events SEC(".maps");

/*
 * where a snapshot is assembled: too large for the BPF stack. Two per CPU,
 * taken as scratch slots are (pycache.bpf.h): a program that preempts
 * another's snapshot on this CPU assembles its own in the other.
 */
struct snap_slot {
	__u64 busy;
	struct ptg_stack_event ev;
};

#define SNAP_SLOTS 2 /* snap_get() tries each */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SNAP_SLOTS);
	__type(key, __u32);
	__type(value, struct snap_slot);
} snap_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} tid_state SEC(".maps");

__u64 losses[PTG_MAX_CPUS][PTG_LOSS_NR_KINDS] = {};

static __always_inline void count_loss(int kind)
{
	__u32 cpu = bpf_get_smp_processor_id() & (PTG_MAX_CPUS - 1);

	__sync_fetch_and_add(&losses[cpu][kind & (PTG_LOSS_NR_KINDS - 1)], 1);
}

/* tid -> its PyThreadState (see pystate.bpf.h) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct py_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_cache);
} cpu_cache SEC(".maps");

__u64 thread_gen = 0;

/* One probe hit: its thread, this CPU's cache and scratch slot, and where _PyRuntime is. */
struct hit {
	struct cpu_cache *cc;
	struct scratch *s;
	struct tid_info ti;
	__u64 runtime;
	__u64 id; /* bpf_get_current_pid_tgid() */
	__u32 tgid;
	__u32 cpu;
};

static __always_inline bool thread_cached(struct cpu_cache *cc, __u32 tid, struct tid_info *ti)
{
	__u64 seq = *(volatile __u64 *)&cc->thread.seq;

	barrier();
	*ti = cc->thread.ti;
	barrier();
	return !(seq & 1) && *(volatile __u64 *)&cc->thread.seq == seq && ti->tid == tid &&
	       ti->gen == *(volatile __u64 *)&thread_gen;
}

static __always_inline void set_state(struct hit *h, __u32 state);

/* The thread's entries in the maps, as h->ti holds them, into this CPU's cache. */
static __always_inline void hit_thread(struct hit *h)
{
	__u32 tid = h->ti.tid, *st;
	struct py_thread *t;

	/* before the lookups: a change that races with them leaves the copy stale */
	h->ti.gen = *(volatile __u64 *)&thread_gen;
	t = bpf_map_lookup_elem(&threads, &tid);
	h->ti.tstate = t ? t->tstate : 0;
	h->ti.ns_tid = t ? t->ns_tid : 0;
	st = bpf_map_lookup_elem(&tid_state, &tid);
	h->ti.state = st ? *st : 0;
	h->ti.pad = 0;
	thread_put(h->cc, &h->ti);
}

/*
 * Fills h for the current thread and takes a scratch slot; -1 when it
 * cannot. Without a slot the hit is lost: counted, and the thread's next
 * event sends its stack again. hit_end() gives the slot back.
 */
static __always_inline int hit_begin(struct hit *h)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;

	h->id = id;
	h->tgid = id >> 32;
	h->cpu = bpf_get_smp_processor_id();
	h->runtime = runtime_addr;
	h->cc = bpf_map_lookup_elem(&cpu_cache, &zero);
	if (!h->cc)
		return -1;
	if (!thread_cached(h->cc, tid, &h->ti)) {
		h->ti.tid = tid;
		hit_thread(h);
	}
	h->s = scratch_get(h->cc);
	if (h->s)
		return 0;
	count_loss(PTG_LOSS_PY_EVENT);
	if (h->ti.state)
		set_state(h, h->ti.state | TID_DIRTY);
	return -1;
}

static __always_inline void hit_end(struct hit *h)
{
	scratch_put(h->s);
}

/* The maps' entries of the thread changed: every CPU's copy of it is stale. */
static __always_inline void thread_changed(struct hit *h)
{
#ifdef PTG_BPF_LEGACY
	/*
	 * No fetching add before 5.12: the count read before the add, plus
	 * one. Another CPU's add in between leaves the copy stale, as it should.
	 */
	__u64 gen = *(volatile __u64 *)&thread_gen;

	__sync_fetch_and_add(&thread_gen, 1);
	h->ti.gen = gen + 1;
#else
	h->ti.gen = __sync_add_and_fetch(&thread_gen, 1);
#endif
	thread_put(h->cc, &h->ti);
}

#ifdef PTG_BPF_LEGACY
/*
 * The legacy build's thread-state walk is a bounded loop, which the 5.10
 * verifier walks step by step at every call site, in every path that leads
 * there: a global function is verified once, on its own.
 */
__noinline __u64 walk_tstates(__u64 runtime, __u32 ns_tid)
{
	return py_walk_tstates(&off, runtime, ns_tid);
}
#else
static __always_inline __u64 walk_tstates(__u64 runtime, __u32 ns_tid)
{
	return py_walk_tstates(&off, runtime, ns_tid);
}
#endif

/*
 * The innermost frame of the thread state, if it is still the thread's
 * (native_thread_id): one read for both. -1 when it is not.
 */
static __always_inline int tstate_frame(__u64 *blk, __u64 tstate, __u32 ns_tid, __u64 *frame)
{
	__u32 n = off.tstate_block_size, start = off.tstate_block;

	if (!tstate || n > PTG_PY_TSTATE_BLOCK_MAX ||
	    bpf_probe_read_user(blk, n, (const void *)(tstate + start)))
		return -1;
	if ((__u32)blk_u64(blk, PTG_PY_TSTATE_BLOCK_MAX, off.tstate_native_tid - start) != ns_tid)
		return -1;
	if (off.tstate_cframe == PTG_OFF_NONE) {
		*frame = blk_u64(blk, PTG_PY_TSTATE_BLOCK_MAX, off.cframe_current_frame - start);
		return 0;
	}
	/* 3.11, 3.12: through the _PyCFrame */
	*frame = py_read_ptr(blk_u64(blk, PTG_PY_TSTATE_BLOCK_MAX, off.tstate_cframe - start) +
			     off.cframe_current_frame);
	return 0;
}

/*
 * The thread's innermost Python frame. The cached thread state is checked
 * against its native_thread_id: a thread that ended may have left its tid or
 * its PyThreadState's memory to another.
 */
static __always_inline __u64 current_frame(struct hit *h)
{
	struct py_thread fresh = {};
	__u64 frame = 0;

	if (!tstate_frame(h->s->tstate, h->ti.tstate, h->ti.ns_tid, &frame))
		return frame;
	fresh.ns_tid = py_ns_tid();
	fresh.tstate = walk_tstates(h->runtime, fresh.ns_tid);
	if (!fresh.tstate)
		return 0;
	bpf_map_update_elem(&threads, &h->ti.tid, &fresh, BPF_ANY);
	h->ti.tstate = fresh.tstate;
	h->ti.ns_tid = fresh.ns_tid;
	thread_changed(h);
	tstate_frame(h->s->tstate, fresh.tstate, fresh.ns_tid, &frame);
	return frame;
}

/*
 * The frame register of a site (PTG_PY_COOKIE) is trusted after it matched
 * the thread state's frame on its first hits on this CPU, and checked again
 * every REG_CHECK_EVERY hits: one register read instead of the thread
 * state's one or two reads. A site whose register ever disagrees goes back
 * to the thread state for good (site_bad), counted in reg_mismatched.
 */
#define REG_CHECK_FIRST 16
#define REG_CHECK_EVERY 64

/* reg_mismatched also counts, in verify mode, shims the SHIM_SPAN test would have missed */
__u8 site_bad[PTG_PY_MAX_SITES] = {};
__u64 reg_checked[PTG_MAX_CPUS] = {};
__u64 reg_mismatched[PTG_MAX_CPUS] = {};

/*
 * The thread's current frame at the probe (what current_frame() reads). *from_reg
 * says it came from the register that holds the handler's own frame: that
 * frame executes the handler, so it is no shim. A PTG_PY_REG_TSTATE
 * register holds the caller a return handler made current: maybe a shim.
 */
static __always_inline __u64 probe_frame(struct hit *h, const struct pt_regs *ctx, __u64 cookie,
					 bool *from_reg)
{
	__u32 reg1 = PTG_PY_COOKIE_REG1(cookie), site = PTG_PY_COOKIE_SITE(cookie);
	__u32 cpu = h->cpu & (PTG_MAX_CPUS - 1), *hits;
	__u64 frame, truth;

	bool own = PTG_PY_COOKIE_OWN(cookie);

	*from_reg = false;
	if (!reg1 || reg1 > PTG_PY_NR_REGS || site_bad[site])
		return current_frame(h);
	frame = reg_value(ctx, reg1 - 1);
	hits = &h->cc->site_hits[site];
	if (!verify_regs && *hits >= REG_CHECK_FIRST && ++*hits % REG_CHECK_EVERY) {
		*from_reg = own;
		return frame;
	}
	truth = current_frame(h);
	if (!truth) {
		/* nothing to check against: trusted once checked, else lost as before */
		*from_reg = own && *hits != 0;
		return *hits ? frame : 0;
	}
	if (*hits < REG_CHECK_FIRST)
		(*hits)++;
	__sync_fetch_and_add(&reg_checked[cpu], 1);
	if (truth == frame) {
		*from_reg = own;
		return frame;
	}
	site_bad[site] = 1;
	__sync_fetch_and_add(&reg_mismatched[cpu], 1);
	return truth;
}

/*
 * A frame's fields from its start in one read: the head (code, previous,
 * prev_instr, owner), and with self localsplus[0] too. That slot may lie
 * past the end of a frame with neither locals nor stack: if the read fails
 * for it, the head is read alone and self stays 0.
 */
static __always_inline int read_frame(__u64 frame, __u64 *blk, bool self)
{
	__u32 head = off.frame_head_size, all = off.frame_block_size;

	if (head > PTG_PY_FRAME_BLOCK_MAX || all > PTG_PY_FRAME_BLOCK_MAX)
		return -1;
	if (self && !bpf_probe_read_user(blk, all, (const void *)frame))
		return 0;
	return bpf_probe_read_user(blk, head, (const void *)frame) ? -1 : 0;
}

static __always_inline __u64 frame_u64(const __u64 *blk, __u32 at)
{
	return blk_u64(blk, PTG_PY_FRAME_BLOCK_MAX, at);
}

static __always_inline bool blk_is_shim(const __u64 *blk)
{
	if (off.owner_cstack == 0xff)
		return false;
	return blk_u8(blk, PTG_PY_FRAME_BLOCK_MAX, off.frame_owner) >= off.owner_cstack;
}

/* 1 when blk_is_shim() is false, else 0, computed without a branch */
static __always_inline __u32 blk_not_shim(const __u64 *blk)
{
	__u64 d = (__u64)blk_u8(blk, PTG_PY_FRAME_BLOCK_MAX, off.frame_owner) - off.owner_cstack;

	if (off.owner_cstack == 0xff)
		return 1;
	/* owner < owner_cstack: both small, so the difference's sign bit; clang would compare */
	asm volatile("" : "+r"(d));
	return d >> 63;
}

static __always_inline bool is_shim(__u64 frame)
{
	__u8 owner = 0;

	if (off.owner_cstack == 0xff)
		return false;
	bpf_probe_read_user(&owner, sizeof(owner), (const void *)(frame + off.frame_owner));
	return owner >= off.owner_cstack;
}

/* code objects: their names, sent once, forgotten when freed (after off, events, count_loss) */
#include "pycode.bpf.h"

#ifdef PTG_BPF_LEGACY
/*
 * The sites' cookies where the kernel has none (ptg_py_site_key), filled by
 * the loader per process. The last map: the skeleton is the normal build's,
 * whose maps come first in the same order.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ptg_py_site_key);
	__type(value, __u64);
} py_sites SEC(".maps");

/* the 5.10 verifier walks each step of the snapshot's loop (loop.bpf.h) */
#define SNAPSHOT_DEPTH_LEGACY 64
#endif

struct snap_walk {
	__u64 frame;
	struct scratch *s; /* the blocks each step reads into */
	struct ptg_stack_event *ev;
	__u32 n;
};

/*
 * One step of the frame-chain walk, run by bpf_loop(): the verifier checks
 * the body once instead of once per unrolled iteration, which keeps loading
 * fast with a deep bound.
 */
static long snap_step(__u32 i, void *arg)
{
	struct snap_walk *w = arg;
	struct ptg_stack_event *s = w->ev;
	struct scratch *sc = w->s;
	struct ptg_frame_ref *f;
	struct code_id id;
	__u32 real;
	__u64 *blk;

	if (!w->frame || !s || !sc)
		return 1;
	blk = sc->frame;
	/* with the first local: modpath reads a module call's self from it */
	if (read_frame(w->frame, blk, true))
		__builtin_memset(blk, 0,
				 PTG_PY_FRAME_BLOCK_MAX); /* the chain ends here, as it did */
	f = &s->frames[w->n & (PTG_MAX_SNAPSHOT_DEPTH - 1)];
	f->frame = w->frame;
	f->code = frame_u64(blk, off.frame_code) & PTG_PY_REF_MASK;
	read_code_id(f->code, &id, sc->code, false);
	f->fingerprint = id.fingerprint;
	f->local0 = frame_u64(blk, off.frame_localsplus) & PTG_PY_REF_MASK;
	/*
	 * A shim frame's slot is taken by the next frame: n moves on without a
	 * branch, so that the verifier of a bounded loop (loop.bpf.h) follows
	 * one path per step, not one per count of shims so far.
	 */
	real = blk_not_shim(blk);
	w->n += real;
	/* frames that were running before recording began: named now too */
	if (real)
		send_code(f->code, id.fingerprint, id.name, id.file, id.line);
	w->frame = frame_u64(blk, off.frame_previous);
	return 0;
}

/* Snapshot slot i of this CPU if it is free, taken as scratch_get() takes one. */
static __always_inline struct snap_slot *snap_try(__u32 i)
{
	struct snap_slot *b = bpf_map_lookup_elem(&snap_buf, &i);

	if (!b)
		return 0;
	__sync_fetch_and_add(&b->busy, 1);
	if (*(volatile __u64 *)&b->busy == 1)
		return b;
	__sync_fetch_and_add(&b->busy, -1);
	return 0;
}

static __always_inline struct snap_slot *snap_get(void)
{
	struct snap_slot *b = snap_try(0);

	return b ? b : snap_try(1);
}

/* The snapshot of the chain from `frame` outwards, in b; a scratch slot for the reads. */
static __always_inline int snapshot_walk(struct snap_slot *b, __u64 frame, struct snap_walk *w)
{
	struct cpu_cache *cc;
	__u32 zero = 0;

	cc = bpf_map_lookup_elem(&cpu_cache, &zero);
	if (!cc)
		return -1;
	w->frame = frame;
	w->ev = &b->ev;
	w->n = 0;
	w->s = scratch_get(cc);
	if (!w->s)
		return -1;
	/* a deeper chain is cut, and counted (PTG_LOSS_PY_DEPTH) */
	PTG_LOOP(PTG_MAX_SNAPSHOT_DEPTH, SNAPSHOT_DEPTH_LEGACY, snap_step, w);
	scratch_put(w->s);
	return 0;
}

/* Sends the chain of frames from `frame` outwards. Returns 0 when sent. */
__noinline int send_snapshot(__u64 ts, __u64 id, __u64 frame, __u32 reason)
{
	struct snap_walk w = {};
	struct ptg_stack_event *s;
	struct snap_slot *b;
	int err;

	b = snap_get();
	if (!b) {
		count_loss(PTG_LOSS_PY_STACK);
		return -1;
	}
	if (snapshot_walk(b, frame, &w)) {
		__sync_fetch_and_add(&b->busy, -1);
		count_loss(PTG_LOSS_PY_STACK);
		return -1;
	}
	if (w.frame)
		count_loss(PTG_LOSS_PY_DEPTH);
	s = &b->ev;
	s->hdr.ts = ts;
	s->hdr.pid = id >> 32;
	s->hdr.tid = (__u32)id;
	s->hdr.kind = PTG_EV_PY_STACK;
	s->hdr.cpu = bpf_get_smp_processor_id();
	s->hdr.aux = reason;
	s->hdr.a = w.n;
	s->hdr.b = w.frame != 0;
	s->hdr.c = 0;
	s->hdr.d = 0;
	err = bpf_ringbuf_output(&events, s, sizeof(*s), BPF_RB_FORCE_WAKEUP);
	__sync_fetch_and_add(&b->busy, -1);
	if (err) {
		count_loss(PTG_LOSS_PY_STACK);
		return -1;
	}
	return 0;
}

/*
 * Emits one event. `chain` is the innermost frame that was on the stack
 * before this event took effect: what a snapshot must show.
 */
static __always_inline void set_state(struct hit *h, __u32 state)
{
	bpf_map_update_elem(&tid_state, &h->ti.tid, &state, BPF_ANY);
	h->ti.state = state;
	thread_changed(h);
}

static __always_inline int emit(struct hit *h, __u16 kind, __u32 aux, __u64 a, __u64 b, __u64 c,
				__u64 d, __u64 chain)
{
	__u64 id = h->id;
	__u32 tid = (__u32)id;
	__u64 ts = bpf_ktime_get_ns();
	struct ptg_event *e;

	if (!h->ti.state || (h->ti.state & TID_DIRTY)) {
		if (send_snapshot(ts, id, chain, h->ti.state ? PTG_SNAP_RESYNC : PTG_SNAP_FIRST))
			return 0;
		set_state(h, TID_SNAPSHOTTED);
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_loss(PTG_LOSS_PY_EVENT);
		set_state(h, h->ti.state | TID_DIRTY);
		return 0;
	}
	e->ts = ts;
	e->pid = id >> 32;
	e->tid = tid;
	e->kind = kind;
	e->cpu = h->cpu;
	e->aux = aux;
	e->a = a;
	e->b = b;
	e->c = c;
	e->d = d;
	bpf_ringbuf_submit(e, ptg_wakeup_flags_every(&events, &h->cc->events));
	return 0;
}

/*
 * The RESUME being executed: the probe sits at the handler's start, where
 * frame->prev_instr still points at the instruction before it, or a few
 * instructions in (on the first one the kernel emulates, see
 * user/proc/probesite.c), where it may already point at the RESUME itself. Two
 * RESUMEs never follow each other, so the opcode at prev_instr tells which.
 * The oparg (high byte) is 0 at the start of a call, 1-3 when a generator or
 * coroutine continues after yield / yield from / await. The RESUME may be
 * in its specialized (RESUME_QUICK, RESUME_CHECK) or instrumented form.
 */
static __always_inline bool is_resume_op(__u8 op)
{
	for (int i = 0; i < 6; i++) {
		if (!resume_ops[i])
			return false;
		if (op == resume_ops[i])
			return true;
	}
	return false;
}

/*
 * The two units from prev_instr on: in the code block read already when
 * they lie in it (a call's RESUME), else in one read (the RESUME is never a
 * code object's last instruction, so the unit after either is there).
 */
static __always_inline int resume_unit(__u64 prev_instr, __u64 code, const __u64 *cblk, __u32 n,
				       __u16 *unit)
{
	__u64 at = prev_instr - (code + off.code_block);
	__u16 units[2];

	if (prev_instr >= code + off.code_block && at + 4 <= n && at <= PTG_PY_CODE_BLOCK_MAX - 4) {
		/* units are 2-aligned, and so is the block's start: tell the verifier */
		at &= ~1ull;
		/* 6.1-6.12 lose the bound above through the copy compared with +4: check again */
		barrier_var(at);
		if (at > PTG_PY_CODE_BLOCK_MAX - 4)
			return -1;
		units[0] = *(const __u16 *)((const __u8 *)cblk + at);
		units[1] = *(const __u16 *)((const __u8 *)cblk + at + 2);
	} else if (!prev_instr ||
		   bpf_probe_read_user(units, sizeof(units), (const void *)prev_instr)) {
		return -1;
	}
	*unit = is_resume_op((__u8)units[0]) ? units[0] : units[1];
	return 0;
}

/*
 * 3.12+: the shim frame under a frame entered from C is the eval loop's
 * entry_frame, a local of _PyEval_EvalFrameDefault on the C stack, just
 * above the stack pointer of the handler that runs. Frames called from
 * Python live in the thread's data stack or in a generator, never on the C
 * stack: only a previous frame near the stack pointer can be a shim, and
 * only that one is read. A real frame near it costs the read, no more.
 */
#define SHIM_SPAN (64 << 10)

static __always_inline bool near_sp(const struct pt_regs *ctx, __u64 addr)
{
	return addr - ctx_reg(ctx, sp) < SHIM_SPAN;
}

/* In verify mode (verify_regs) every one is read, and one far from sp counted as a mismatch. */
static __always_inline bool maybe_shim(struct hit *h, const struct pt_regs *ctx, __u64 previous)
{
	if (verify_regs)
		return true;
	return near_sp(ctx, previous);
}

static __always_inline int on_resume(struct hit *h, const struct pt_regs *ctx, __u64 cookie)
{
	__u64 frame, code, prev_instr, previous, self, epoch;
	__u64 *blk = h->s->frame, *cblk = h->s->code;
	struct code_entry *slot;
	struct code_id id;
	__u32 oparg, n;
	__u16 unit = 0;
	bool from_reg;

	frame = probe_frame(h, ctx, cookie, &from_reg);
	if (!frame || read_frame(frame, blk, true)) {
		count_loss(PTG_LOSS_PY_READ);
		return 0;
	}
	code = frame_u64(blk, off.frame_code) & PTG_PY_REF_MASK;
	prev_instr = frame_u64(blk, off.frame_prev_instr);
	previous = frame_u64(blk, off.frame_previous);
	self = frame_u64(blk, off.frame_localsplus) & PTG_PY_REF_MASK;
	/* 3.12+: a frame entered from C sits on a shim frame; its caller is below that */
	if (previous && off.owner_cstack != 0xff && maybe_shim(h, ctx, previous) &&
	    !read_frame(previous, blk, false) && blk_is_shim(blk)) {
		if (!near_sp(ctx, previous))
			__sync_fetch_and_add(&reg_mismatched[h->cpu & (PTG_MAX_CPUS - 1)], 1);
		previous = frame_u64(blk, off.frame_previous);
	}
	/* before the code object is read: a free after this makes what is put below stale */
	epoch = *(volatile __u64 *)&code_epoch;
	n = read_code_id(code, &id, cblk, true);
	if (resume_unit(prev_instr, code, cblk, n, &unit)) {
		count_loss(PTG_LOSS_PY_READ);
		return 0;
	}
	/* 3.13+ keep a flag above (RESUME_OPARG_DEPTH1_MASK): only the low bits say where */
	oparg = (unit >> 8) & resume_where_mask;
	if (oparg == resume_not_a_call)
		return 0;
	slot = code_slot(h->cc, code);
	if (!code_cached(slot, code, id.fingerprint, h->tgid, epoch) &&
	    !send_code(code, id.fingerprint, id.name, id.file, id.line))
		code_put(slot, code, id.fingerprint, h->tgid, epoch);
	if (oparg == 0)
		return emit(h, PTG_EV_PY_START, id.fingerprint, frame, code, self, previous,
			    previous);
	return emit(h, PTG_EV_PY_RESUME, id.fingerprint, frame, code, 0, previous, previous);
}

/*
 * RETURN_VALUE or YIELD_VALUE: the current frame leaves, or, where the
 * probe sits after the handler made the caller current, the frame above
 * the current one (user/python/pyframe.c tells which). A shim frame is sent
 * as 0. The shim such a caller can be is this eval loop's entry_frame, on
 * the C stack just above the handler's stack pointer (as for RESUME's
 * previous frame): a caller elsewhere is not read.
 */
static __always_inline int on_leave(struct hit *h, __u16 kind, const struct pt_regs *ctx,
				    __u64 cookie)
{
	bool from_reg, shim = false;
	__u64 frame = probe_frame(h, ctx, cookie, &from_reg);

	if (!frame) {
		count_loss(PTG_LOSS_PY_READ);
		return 0;
	}
	if (!from_reg && maybe_shim(h, ctx, frame) && is_shim(frame)) {
		if (!near_sp(ctx, frame))
			__sync_fetch_and_add(&reg_mismatched[h->cpu & (PTG_MAX_CPUS - 1)], 1);
		shim = true;
	}
	return emit(h, kind, 0, shim ? 0 : frame, 0, 0, 0, frame);
}

/* PyTraceBack_Here(PyFrameObject *f): the exception now is in f's frame. */
static __always_inline int on_traceback(struct hit *h, __u64 frame_obj)
{
	__u64 frame = py_read_ptr(frame_obj + off.frameobj_frame);

	if (!frame)
		return 0;
	return emit(h, PTG_EV_PY_UNWIND, 1, frame, 0, 0, 0, frame);
}

/*
 * One program for every probe site, told apart by its BPF cookie: the
 * kernel verifies it once and one multi-uprobe link holds all the sites.
 */
/* Not a process of the traced set (probes on a file, see filter_tgids). */
static __always_inline bool filtered_out(void)
{
	return ptg_not_traced(bpf_get_current_pid_tgid() >> 32);
}

/*
 * bpf_get_func_ip(): the probed address, for uprobes and uretprobes alike,
 * from 6.6. Before, it is 0 for any uprobe (it knew kprobes only): an entry
 * probe's address is then its ip, which handle_swbp() has set back to the
 * probed address before the handlers run, and a uretprobe's is unknown:
 * runtime stays 0 (py_eval_ret_body). The legacy build is loaded for one
 * process at a time only (runtime_addr).
 */
static __always_inline void hit_runtime(struct hit *h, struct pt_regs *ctx, __u64 cookie,
					bool entry)
{
#ifndef PTG_BPF_LEGACY
	__u64 ip;

	if (!filter_tgids)
		return;
	ip = bpf_get_func_ip(ctx);
	if (!ip && entry)
		ip = ctx_reg(ctx, ip);
	h->runtime = ip ? ip + PTG_PY_COOKIE_DELTA(cookie) : 0;
#endif
}

/*
 * The site's cookie. The legacy build's comes from py_sites: the int3 has
 * run, but handle_swbp() sets ip back to the probed address before the
 * handlers (5.10 as 6.18). A site not there (cannot be: the loader put each
 * before attaching it) is a lost event, 0.
 */
static __always_inline __u64 probe_cookie(struct pt_regs *ctx)
{
#ifdef PTG_BPF_LEGACY
	struct ptg_py_site_key key = {.tgid = bpf_get_current_pid_tgid() >> 32,
				      .addr = ctx_reg(ctx, ip)};
	__u64 *cookie = bpf_map_lookup_elem(&py_sites, &key);

	if (cookie)
		return *cookie;
	count_loss(PTG_LOSS_PY_EVENT);
	return 0;
#else
	return bpf_get_attach_cookie(ctx);
#endif
}

/* the eval loop's return probe: only a shared one's cookie says anything (hit_runtime) */
static __always_inline __u64 ret_cookie(struct pt_regs *ctx)
{
#ifdef PTG_BPF_LEGACY
	return 0;
#else
	return bpf_get_attach_cookie(ctx);
#endif
}

static __always_inline int on_probe(struct hit *h, struct pt_regs *ctx, __u64 cookie, __u32 probe)
{
	switch (probe) {
	case PTG_PY_PROBE_RESUME:
		return on_resume(h, ctx, cookie);
	case PTG_PY_PROBE_RETURN:
		return on_leave(h, PTG_EV_PY_RETURN, ctx, cookie);
	case PTG_PY_PROBE_YIELD:
		return on_leave(h, PTG_EV_PY_YIELD, ctx, cookie);
	case PTG_PY_PROBE_TRACEBACK:
		return on_traceback(h, PT_REGS_PARM1(ctx));
	}
	return 0;
}

static __always_inline int py_probe_body(struct pt_regs *ctx)
{
	__u64 cookie;
	__u32 probe;
	struct hit h;

	if (filtered_out())
		return 0;
	cookie = probe_cookie(ctx);
	probe = PTG_PY_COOKIE_PROBE(cookie);
	if (probe == PTG_PY_PROBE_CODE_FREE)
		return code_frees ? code_freed(PT_REGS_PARM1(ctx)) : 0;
	if (hit_begin(&h))
		return 0;
	hit_runtime(&h, ctx, cookie, true);
	if (probe)
		on_probe(&h, ctx, cookie, probe);
	else if (h.ti.state)
		set_state(&h, h.ti.state | TID_DIRTY); /* lost (probe_cookie): resend the stack */
	hit_end(&h);
	return 0;
}

SEC("uprobe")
int py_probe(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(py_probe_body(ctx));
}

/*
 * _PyEval_EvalFrameDefault returned NULL: its entry frame (and any frame it
 * ran) was left by an exception that C code now holds, and may swallow
 * (StopIteration from __next__, hasattr, ...) without any further traceback
 * entry. Everything above the thread's current frame has exited.
 */
static __always_inline int py_eval_ret_body(struct pt_regs *ctx)
{
	void *ret = (void *)PT_REGS_RC(ctx);
	struct hit h;
	__u64 frame;

	if (ret || filtered_out() || hit_begin(&h))
		return 0;
	hit_runtime(&h, ctx, ret_cookie(ctx), false);
	if (h.runtime) {
		frame = current_frame(&h);
	} else if (tstate_frame(h.s->tstate, h.ti.tstate, h.ti.ns_tid, &frame)) {
		/* before 6.6, with probes on the file: no _PyRuntime to find the thread by */
		count_loss(PTG_LOSS_PY_READ);
		goto out;
	}
	emit(&h, PTG_EV_PY_UNWIND, 2, frame, 0, 0, 0, frame);
out:
	hit_end(&h);
	return 0;
}

SEC("uretprobe")
int py_eval_ret(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(py_eval_ret_body(ctx));
}

/*
 * A thread that ends leaves its tid, and its PyThreadState's memory, to
 * others: a cached thread state would still pass the native id check on
 * freed memory. Forget the thread, and the CPUs' copies of it with it.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(py_thread_exit, struct task_struct *task)
{
	__u32 tid = task->pid;
	bool known;

	known = !bpf_map_delete_elem(&threads, &tid);
	known |= !bpf_map_delete_elem(&tid_state, &tid);
	if (known)
		__sync_fetch_and_add(&thread_gen, 1);
	return 0;
}

/*
 * exec() ends the process's interpreter but keeps its pid, and the thread
 * that called it becomes the leader: what was cached of either thread
 * belongs to the old program.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(py_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tids[2] = {p->pid, old_pid};
	bool known = false;

	for (int i = 0; i < 2; i++) {
		known |= !bpf_map_delete_elem(&threads, &tids[i]);
		known |= !bpf_map_delete_elem(&tid_state, &tids[i]);
	}
	if (known)
		__sync_fetch_and_add(&thread_gen, 1);
	return 0;
}

/*
 * record -- CMD: where its script starts, the command's Python calls go to
 * the in-process agent (struct ptg_py_handover). recorder_tgid: ours, the
 * tracer its main thread must have to be stopped (hold.bpf.h).
 */
const volatile __u32 recorder_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32); /* tgid */
	__type(value, struct ptg_py_handover);
} py_handover SEC(".maps");

#define RUN_EVENT     "cpython.run_"
#define RUN_EVENT_LEN 12

/*
 * PySys_Audit(event, format, ...): on the main thread, an event named
 * "cpython.run_*" is Py_RunMain's, raised before the first frame of the
 * script (run_file, run_command, run_module, run_stdin, run_startup,
 * run_interactivehook). The thread stops here, at the function's entry,
 * holding the GIL, with no Python frame on its stack.
 */
static __always_inline int py_audit_body(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct ptg_py_handover *h;
	char ev[RUN_EVENT_LEN + 1];

	if ((__u32)id != tgid)
		return 0;
	h = bpf_map_lookup_elem(&py_handover, &tgid);
	if (!h || h->state != PTG_PY_HANDOVER_ARMED)
		return 0;
	if (bpf_probe_read_user_str(ev, sizeof(ev), (void *)PT_REGS_PARM1(ctx)) != sizeof(ev))
		return 0;
#pragma unroll
	for (int i = 0; i < RUN_EVENT_LEN; i++) {
		if (ev[i] != RUN_EVENT[i])
			return 0;
	}
	h->ts = bpf_ktime_get_ns();
	/* only this thread moves its process's state: no other can race it */
	if (!ptg_can_stop(recorder_tgid)) {
		h->state = PTG_PY_HANDOVER_UNSTOPPED;
		return 0;
	}
	h->state = PTG_PY_HANDOVER_STOPPED;
	bpf_send_signal_thread(SIGURG_NR);
	return 0;
}

SEC("uprobe")
int py_audit(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(py_audit_body(ctx));
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
