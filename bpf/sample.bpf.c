// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Sampling profiler of Python processes: a per-CPU timer (perf_event,
 * cpu-clock) and, with --off-cpu, the scheduler's switch events. For a thread
 * of a process in the procs map it walks the thread's Python frame chain
 * and counts the stack in the counts map; user space reads the aggregates
 * and never sees one event per sample.
 *
 * Each thread's own PyThreadState is needed: the GIL holder is not it when
 * the sampled thread waits for the GIL or runs C code that released it. The
 * threads map caches tid -> tstate, found by pystate.bpf.h's walk of the
 * interpreters' thread lists and checked on every use against
 * tstate->native_thread_id, since tids and thread states are both reused.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/fingerprint.h"
#include "ptrace_gpu/sample.h"
#include "pystate.bpf.h"

#define NSEC_PER_SEC 1000000000ull
/* a thread without a thread state is looked for again after this long */
#define TSTATE_RETRY_NS (100 * 1000000ull)
#define TASK_DEAD	0x80
/* the legacy variant's frame walk (loop.bpf.h): the 5.10 verifier walks each step */
#define SAMPLE_DEPTH_LEGACY 32

const volatile __u64 period_ns = 0;
const volatile bool native = false;
/* sched_switch's prev_state argument (5.18): task.bpf.h, ptg_switch_prev_state() */
const volatile bool switch_has_state = false;

/* the interval being counted; user space moves it on in continuous mode */
__u32 gen = 0;
__u64 stats[PTG_SAMPLE_MAX_CPUS][PTG_SAMPLE_STAT_NR] = {};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ptg_sample_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct ptg_sample_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* set by the loader */
	__type(key, struct ptg_sample_key);
	__type(value, struct ptg_sample_value);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
#ifdef PTG_BPF_LEGACY
	/* before 5.11 perf_event programs take preallocated hash maps only */
	__uint(max_entries, 4096);
#else
	__uint(map_flags, BPF_F_NO_PREALLOC); /* 2 KiB values: pay for the stacks seen */
	__uint(max_entries, 32768);
#endif
	__type(key, __u64);
	__type(value, struct ptg_sample_stack);
} py_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384); /* 1 without --native, set by the loader */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} native_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ptg_sample_stack);
} scratch SEC(".maps");

/* off-CPU: what a blocked thread was doing when it left the CPU, and when */
struct offcpu_start {
	struct ptg_sample_key key;
	__u64 ts;
};

/* LRU: a thread that blocks and then is killed never switches in again */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct offcpu_start);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} notices SEC(".maps");

static __always_inline void stat_inc(int stat)
{
	__u32 cpu = bpf_get_smp_processor_id() & (PTG_SAMPLE_MAX_CPUS - 1);

	__sync_fetch_and_add(&stats[cpu][stat & (PTG_SAMPLE_STAT_NR - 1)], 1);
}

/* No branch: a failed read leaves 0 (the helper clears it), and branches cost verification */
static __always_inline __u64 read_ptr(__u64 addr)
{
	__u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)addr);
	return v;
}

/* Per-CPU copies of the frame's and the code object's first bytes. */
struct window {
	__u8 frame[PTG_SAMPLE_WINDOW];
	__u8 code[PTG_SAMPLE_WINDOW];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct window);
} windows SEC(".maps");

/* The u64 at off in a block read from base, or read on its own when outside it. */
static __always_inline __u64 win_u64(const __u8 *win, __u64 base, __u32 off)
{
	if (off > PTG_SAMPLE_WINDOW - 8)
		return read_ptr(base + off);
	return *(const __u64 *)(win + off);
}

static __always_inline __u8 win_u8(const __u8 *win, __u64 base, __u32 off)
{
	__u8 v = 0;

	if (off > PTG_SAMPLE_WINDOW - 1)
		bpf_probe_read_user(&v, 1, (const void *)(base + off));
	else
		v = win[off];
	return v;
}

/* The fingerprint of the code fields in the window read from code + off.code_block. */
static __always_inline __u32 code_fingerprint(const struct ptg_sample_proc *p, __u64 code,
					      const __u8 *win)
{
	__u32 start = p->off.code_block;
	__u64 base = code + start;
	__u64 name = win_u64(win, base, p->off.code_qualname - start);
	__u64 file = win_u64(win, base, p->off.code_filename - start);
	__u32 line = (__u32)win_u64(win, base, p->off.code_firstlineno - start);

	return ptg_code_fingerprint(name, file, line);
}

static void notify(__u32 kind, __u32 tgid, __u32 tid, __u64 hash)
{
	struct ptg_sample_notice *e;

	e = bpf_ringbuf_reserve(&notices, sizeof(*e), 0);
	if (!e) {
		stat_inc(PTG_SAMPLE_STAT_RINGBUF_DROP);
		return;
	}
	e->py_stack = hash;
	e->tgid = tgid;
	e->tid = tid;
	e->kind = kind;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

static __u64 thread_tstate(const struct ptg_sample_proc *p, __u32 tgid, __u32 tid)
{
	struct ptg_sample_thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct ptg_sample_thread fresh = {.tgid = tgid};
	__u64 now = bpf_ktime_get_ns();

	if (t && t->tgid == tgid) {
		/* native_thread_id is the tid in the target's pid namespace, as cached */
		if (t->tstate &&
		    (__u32)py_read_ptr(t->tstate + p->off.tstate_native_tid) == t->ns_tid)
			return t->tstate;
		/* not a Python thread yet (or any more): do not walk on every tick */
		if (!t->tstate && now - t->checked_ns < TSTATE_RETRY_NS)
			return 0;
	}
	stat_inc(PTG_SAMPLE_STAT_TSTATE_WALKS);
	fresh.ns_tid = py_ns_tid();
	fresh.tstate = py_walk_tstates(&p->off, p->runtime_addr, fresh.ns_tid);
	fresh.checked_ns = now;
	if (!t || t->tgid != tgid)
		notify(PTG_SAMPLE_NEW_THREAD, tgid, tid, 0);
	bpf_map_update_elem(&threads, &tid, &fresh, BPF_ANY);
	return fresh.tstate;
}

static __always_inline __u64 mix(__u64 h, __u64 v)
{
	return (h ^ v) * 0x100000001b3ull;
}

/*
 * The depth counts in s->depth, map memory: a counter on the stack would be
 * a known value the verifier follows through every iteration of bpf_loop.
 */
struct frame_walk {
	const struct ptg_sample_proc *p;
	struct ptg_sample_stack *s;
	struct window *win;
	__u64 frame;
	__u64 hash;
	__u64 expect; /* 3.11, 3.12: the caller eval loop's frame, which the chain must pass */
	bool met;
	bool broken; /* a frame was unreadable: the outer ones are missing */
};

/*
 * 3.12+: each eval-loop invocation pushes a C-stack shim frame under the
 * frame it was entered with; that frame is what is_entry marks on 3.11. The
 * mark goes into the hash too: a stack differs from one entered otherwise.
 */
static __always_inline void mark_entry(struct frame_walk *w)
{
	struct ptg_sample_frame *f;

	if (!w->s->depth)
		return;
	f = &w->s->frames[(w->s->depth - 1) & (PTG_SAMPLE_MAX_DEPTH - 1)];
	/* 3.15's base frame, a second shim under the outermost one */
	if (f->instr & PTG_SAMPLE_FRAME_ENTRY)
		return;
	f->instr |= PTG_SAMPLE_FRAME_ENTRY;
	w->hash = mix(w->hash, PTG_SAMPLE_FRAME_ENTRY);
}

static long frame_step(__u32 i, void *arg)
{
	struct frame_walk *w = arg;
	const struct ptg_sample_proc *p = w->p;
	__u8 *fw = w->win->frame, *cw = w->win->code;
	__u64 frame = w->frame, code, instr;
	struct ptg_sample_frame *f;
	__u8 entry = 0;

	if (!frame)
		return 1;
	w->met |= frame == w->expect;
	/* a frame is larger than the window: localsplus follows these fields */
	bpf_probe_read_user(fw, PTG_SAMPLE_WINDOW, (const void *)frame);
	/*
	 * Shim frames run no code of their own. >=: 3.14 moved them to
	 * FRAME_OWNED_BY_INTERPRETER, 3.15's base frame has that owner too.
	 */
	if (win_u8(fw, frame, p->off.frame_owner) >= p->off.owner_cstack) {
		mark_entry(w);
		w->frame = win_u64(fw, frame, p->off.frame_previous);
		return 0;
	}
	/* w->frame stays: the stack is marked truncated */
	if (w->s->depth >= PTG_SAMPLE_MAX_DEPTH)
		return 1;
	w->frame = win_u64(fw, frame, p->off.frame_previous);
	/* 3.14+: f_executable is a _PyStackRef, its low bits a tag */
	code = win_u64(fw, frame, p->off.frame_code) & PTG_PY_REF_MASK;
	if (!code) {
		/*
		 * Also a transient: 3.11 and 3.12 link a new _PyCFrame into
		 * the thread state before they set its current_frame.
		 */
		stat_inc(PTG_SAMPLE_STAT_READ_ERR);
		w->frame = 0;
		w->broken = true;
		return 1;
	}
	/* the instruction last started (3.11, 3.12) or executing (3.13+): the same line */
	instr = win_u64(fw, frame, p->off.frame_prev_instr);
	if (p->off.frame_is_entry != PTG_OFF_NONE)
		entry = win_u8(fw, frame, p->off.frame_is_entry);
	bpf_probe_read_user(cw, PTG_SAMPLE_WINDOW, (const void *)(code + p->off.code_block));
	f = &w->s->frames[w->s->depth & (PTG_SAMPLE_MAX_DEPTH - 1)];
	f->code = code;
	f->fingerprint = code_fingerprint(p, code, cw);
	f->instr = instr > code && instr - code < PTG_SAMPLE_INSTR_NONE ? (__u32)(instr - code)
									: PTG_SAMPLE_INSTR_NONE;
	if (entry)
		f->instr |= PTG_SAMPLE_FRAME_ENTRY;
	w->hash = mix(mix(mix(w->hash, code), f->fingerprint), f->instr);
	w->s->depth++;
	return 0;
}

/*
 * Fills s with the frame chain from frame outwards; returns its hash (0:
 * empty). The process is part of the hash: each process reports its own new
 * stacks, though the non-PIE interpreter puts code at the same addresses in
 * processes that run the same script.
 */
static __u64 walk_frames(const struct ptg_sample_proc *p, __u32 tgid, __u64 frame, __u64 expect,
			 struct ptg_sample_stack *s)
{
	struct frame_walk w = {.p = p, .s = s, .frame = frame, .expect = expect};
	__u32 zero = 0;

	w.win = bpf_map_lookup_elem(&windows, &zero);
	if (!w.win)
		return 0;
	w.hash = mix(0xcbf29ce484222325ull, tgid);
	s->depth = 0;
	/* shim frames take a step but no slot: one under each frame at most, and a base frame */
	PTG_LOOP(2 * PTG_SAMPLE_MAX_DEPTH + 2, 2 * SAMPLE_DEPTH_LEGACY + 2, frame_step, &w);
	/* a whole chain that missed its caller's frame is stale (caller_frame()): none of it */
	if (expect && !w.met && !w.frame && !w.broken) {
		stat_inc(PTG_SAMPLE_STAT_READ_ERR);
		return 0;
	}
	s->truncated = w.frame != 0 || w.broken;
	if (w.frame)
		stat_inc(PTG_SAMPLE_STAT_TRUNCATED);
	return s->depth ? w.hash | 1 : 0;
}

/* Stores the stack the first time it is seen; 0 when it is (or already was) stored. */
static int store_stack(__u32 tgid, __u32 tid, __u64 hash, const struct ptg_sample_stack *s)
{
	if (bpf_map_lookup_elem(&py_stacks, &hash))
		return 0;
	if (bpf_map_update_elem(&py_stacks, &hash, s, BPF_NOEXIST))
		return bpf_map_lookup_elem(&py_stacks, &hash) ? 0 : -1;
	notify(PTG_SAMPLE_NEW_STACK, tgid, tid, hash);
	return 0;
}

/*
 * 3.11 and 3.12 link an eval loop's new _PyCFrame into the thread state a
 * few instructions before they set its current_frame (docs/sample.md): a
 * sample in between reads a stale pointer left on the C stack, often to a
 * frame that is still readable, whose chain looks like a stack and is not
 * (a generator resumed earlier, its previous cleared). Its frames reach the
 * caller eval loop's current frame, which the new one was entered from,
 * when it is not stale: that frame, or 0 (the outermost loop).
 * _PyCFrame.previous follows current_frame in both versions.
 */
static __u64 caller_frame(const volatile struct ptg_py_offsets *off, __u64 cframe)
{
	__u64 prev = py_read_ptr(cframe + off->cframe_current_frame + 8);

	return prev ? py_read_ptr(prev + off->cframe_current_frame) : 0;
}

/* The Python stack of the current thread, into key->py_stack. */
static void take_python(const struct ptg_sample_proc *p, __u32 tgid, __u32 tid,
			struct ptg_sample_key *key)
{
	struct ptg_sample_stack *s;
	__u64 tstate, frame, hash, cframe, expect = 0;
	__u32 zero = 0;

	tstate = thread_tstate(p, tgid, tid);
	if (!tstate) {
		stat_inc(PTG_SAMPLE_STAT_NO_TSTATE);
		return;
	}
	frame = py_tstate_frame_in(&p->off, tstate, &cframe);
	if (frame && p->off.tstate_cframe != PTG_OFF_NONE)
		expect = caller_frame(&p->off, cframe);
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!frame || !s)
		return;
	hash = walk_frames(p, tgid, frame, expect, s);
	if (!hash)
		return;
	if (store_stack(tgid, tid, hash, s)) {
		stat_inc(PTG_SAMPLE_STAT_STACKS_FULL);
		return;
	}
	key->py_stack = hash;
}

/* Both stacks of the current thread; ctx is what bpf_get_stackid() needs. */
static __always_inline void take_stacks(void *ctx, const struct ptg_sample_proc *p, __u64 id,
					__u16 kind, struct ptg_sample_key *key)
{
	__builtin_memset(key, 0, sizeof(*key));
	key->tgid = id >> 32;
	key->tid = (__u32)id;
	key->kind = kind;
	key->gen = (__u16)gen;
	key->native_stack = -1;
	if (native) {
		key->native_stack = bpf_get_stackid(ctx, &native_stacks, BPF_F_USER_STACK);
		if (key->native_stack < 0)
			stat_inc(PTG_SAMPLE_STAT_NATIVE_ERR);
	}
	take_python(p, key->tgid, key->tid, key);
}

static void count(const struct ptg_sample_key *key, __u64 ns)
{
	struct ptg_sample_value *v = bpf_map_lookup_elem(&counts, key);
	struct ptg_sample_value init = {.count = 1, .ns = ns};

	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		__sync_fetch_and_add(&v->ns, ns);
		return;
	}
	if (!bpf_map_update_elem(&counts, key, &init, BPF_NOEXIST))
		return;
	/* another CPU added the key in between */
	v = bpf_map_lookup_elem(&counts, key);
	if (!v) {
		stat_inc(PTG_SAMPLE_STAT_COUNTS_FULL);
		return;
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->ns, ns);
}

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct ptg_sample_proc *p;
	struct ptg_sample_key key;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	stat_inc(PTG_SAMPLE_STAT_TICKS);
	take_stacks(ctx, p, id, PTG_SAMPLE_CPU, &key);
	count(&key, period_ns);
	return 0;
}

/*
 * Runs in the context of prev, so prev's memory and user stack are the
 * current ones. A thread that leaves the CPU in a sleeping state (it
 * blocked; a preempted thread is runnable and not counted) gets its stacks
 * taken now; when it is switched in again, the time in between is added
 * under them.
 */
/* Not BPF_PROG: that reads all four arguments up front, the 4th one included. */
SEC("tp_btf/sched_switch")
int sample_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	unsigned int prev_state;
	__u64 now = bpf_ktime_get_ns();
	struct offcpu_start *st, start = {};
	struct ptg_sample_proc *p;
	__u32 pid = next->pid, tgid = prev->tgid;

	st = bpf_map_lookup_elem(&offcpu, &pid);
	if (st) {
		/* counted in the interval it ends in, which user space has not read yet */
		st->key.gen = (__u16)gen;
		if (now > st->ts)
			count(&st->key, now - st->ts);
		bpf_map_delete_elem(&offcpu, &pid);
	}
	/* runnable (preempted) is not blocked; a dying task never comes back */
	if (preempt)
		return 0;
	prev_state = ptg_switch_prev_state(ctx, switch_has_state, prev);
	if (prev_state == 0 || (prev_state & TASK_DEAD))
		return 0;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	stat_inc(PTG_SAMPLE_STAT_TICKS);
	take_stacks(ctx, p, (__u64)tgid << 32 | (__u32)prev->pid, PTG_SAMPLE_OFFCPU, &start.key);
	start.ts = now;
	pid = prev->pid;
	bpf_map_update_elem(&offcpu, &pid, &start, BPF_ANY);
	return 0;
}

/*
 * A thread that ends leaves its tid, and its PyThreadState's memory, to
 * others: a cached thread state would still pass the native id check on
 * freed memory. Forget the thread.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sample_thread_exit, struct task_struct *task)
{
	__u32 tid = task->pid;

	bpf_map_delete_elem(&threads, &tid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
