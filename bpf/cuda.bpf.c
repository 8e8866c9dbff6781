// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * CUDA host-side calls: one uprobe and one uretprobe per entry point of
 * libcuda (driver API) and libcudart (runtime API). The attach cookie says
 * which API it is and where its stream and size arguments are, so one pair
 * of programs serves every signature. Before 5.15 the legacy build finds it
 * by the probed site instead (sitecookie.bpf.h); the return needs none.
 *
 *   entry  -> CUDA_ENTER (call id, stream, bytes, depth): lets user space
 *             say which call a thread was in when it blocked
 *   return -> CUDA_EXIT with the entry's time: one self-contained record per
 *             call even if the ENTER was dropped
 *
 * The C functions of the CUDA API never unwind (no C++ exceptions, no
 * longjmp), so uretprobes are safe on them.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "ptrace_gpu/events.h"
#include "preempt.bpf.h"
#include "ringbuf.bpf.h"
#include "traced.bpf.h"

struct call {
	__u64 ts;
	__u64 id;
	__u64 stream;
	__u64 bytes;
	__u32 api;
	__u32 pad;
};

/* Calls open on a thread: the runtime API calls into the driver API. */
struct open_calls {
	__u32 depth; /* may exceed PTG_CUDA_MAX_NEST: those calls are counted, not kept */
	__u32 pad;
	struct call calls[PTG_CUDA_MAX_NEST];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* replaced by the tracer's shared ring buffer */
} events SEC(".maps");

/*
 * Several processes (record -p A,B, --children): the probes sit on the
 * library file for every process that maps it (traced.bpf.h). The cookie
 * holds no address, so one attach serves every process whatever address it
 * maps the file at.
 */

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct open_calls);
} open_calls SEC(".maps");

/*
 * Processes whose CUDA calls come from their CUPTI agent (tgid -> 1,
 * user/cuda/cuda.c, cuda_ring.c): a call they start is kept on the thread's
 * stack unrecorded, so that its return pairs with it and not with a call
 * recorded before the agent took over.
 */
#define CALL_SKIP 0xffffffffu
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} cupti_tgids SEC(".maps");

__u64 next_id = 0;
__u64 lost_events = 0; /* ring buffer full */
__u64 lost_nest = 0;   /* calls nested deeper than PTG_CUDA_MAX_NEST */
__u64 lost_state = 0;  /* a thread's state could not be created */

#ifdef PTG_BPF_LEGACY
/*
 * Before 5.12 (atomics) no fetch-and-add: a count per CPU, the CPU number in
 * its low bits. Uprobe programs of those kernels run with preemption off
 * (__uprobe_perf_func), so nothing comes between the read and the write.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} call_ids SEC(".maps");

#include "sitecookie.bpf.h"

static __always_inline __u64 new_call_id(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&call_ids, &zero);

	if (!n)
		return 0;
	return ++*n << 16 | (bpf_get_smp_processor_id() & 0xffff);
}

/* an entry point with no cookie is kept on the thread's stack, under no API user space knows */
static __always_inline __u64 entry_cookie(struct pt_regs *ctx)
{
	__u64 cookie;

	return ptg_site_cookie(ctx, &cookie)
		   ? PTG_CUDA_COOKIE(0xff, PTG_CUDA_SLOT_NONE, 0, PTG_CUDA_SLOT_NONE, 0)
		   : cookie;
}
#else
static __always_inline __u64 new_call_id(void)
{
	return __sync_fetch_and_add(&next_id, 1) + 1;
}

static __always_inline __u64 entry_cookie(struct pt_regs *ctx)
{
	return bpf_get_attach_cookie(ctx);
}
#endif

/* Argument slot n of the call, read at the function's first instruction. */
static __always_inline __u64 arg_slot(struct pt_regs *ctx, __u32 n)
{
	/* ctx fields at a variable offset do not verify: read all six first */
	__u64 regs[6] = {ctx->di, ctx->si, ctx->dx, ctx->cx, ctx->r8, ctx->r9};
	__u64 v = 0;

	if (n < 6)
		return regs[n];
	/* [rsp] is the return address; the 7th eightbyte follows it */
	bpf_probe_read_user(&v, sizeof(v), (const void *)(PT_REGS_SP(ctx) + 8 * (n - 5)));
	return v;
}

static __always_inline __u64 read_stream(struct pt_regs *ctx, __u64 cookie)
{
	__u32 slot = PTG_CUDA_STREAM_SLOT(cookie), off = PTG_CUDA_STREAM_OFF(cookie);
	__u64 v, s = 0;

	if (slot == PTG_CUDA_SLOT_NONE)
		return 0;
	v = arg_slot(ctx, slot);
	if (off == PTG_CUDA_DIRECT)
		return v;
	/* cuLaunchKernelEx and cudaLaunchKernelExC take the stream in a config struct */
	if (v)
		bpf_probe_read_user(&s, sizeof(s), (const void *)(v + off));
	return s;
}

static __always_inline __u64 read_bytes(struct pt_regs *ctx, __u64 cookie)
{
	__u32 slot = PTG_CUDA_BYTES_SLOT(cookie);

	if (slot == PTG_CUDA_SLOT_NONE)
		return 0;
	return arg_slot(ctx, slot) << (PTG_CUDA_BYTES_SHIFT(cookie) & 63);
}

static __always_inline struct open_calls *thread_calls(__u32 tid)
{
	static const struct open_calls empty = {};
	struct open_calls *oc;

	oc = bpf_map_lookup_elem(&open_calls, &tid);
	if (oc)
		return oc;
	bpf_map_update_elem(&open_calls, &tid, &empty, BPF_NOEXIST);
	oc = bpf_map_lookup_elem(&open_calls, &tid);
	if (!oc)
		__sync_fetch_and_add(&lost_state, 1);
	return oc;
}

static __always_inline void emit(__u16 kind, __u64 ts, __u64 pid_tgid, __u32 aux,
				 const struct call *c)
{
	struct ptg_event *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->ts = ts;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->kind = kind;
	e->cpu = bpf_get_smp_processor_id();
	e->aux = aux;
	e->a = c->id;
	e->b = c->stream;
	e->c = c->bytes;
	e->d = c->ts;
	bpf_ringbuf_submit(e, ptg_wakeup_flags(&events));
}

static __always_inline int cuda_enter_body(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct open_calls *oc;
	__u32 tgid = id >> 32;
	struct call *c;
	__u64 cookie;
	__u32 d;

	/* the exit needs no filter: a thread not let in here has no open call */
	if (ptg_not_traced(tgid))
		return 0;
	oc = thread_calls((__u32)id);
	if (!oc)
		return 0;
	d = oc->depth++;
	if (bpf_map_lookup_elem(&cupti_tgids, &tgid)) {
		if (d < PTG_CUDA_MAX_NEST)
			oc->calls[d].api = CALL_SKIP;
		return 0;
	}
	if (d >= PTG_CUDA_MAX_NEST) {
		__sync_fetch_and_add(&lost_nest, 1);
		return 0;
	}
	c = &oc->calls[d];
	cookie = entry_cookie(ctx);
	c->ts = bpf_ktime_get_ns();
	c->id = new_call_id();
	c->api = PTG_CUDA_API(cookie);
	c->stream = read_stream(ctx, cookie);
	c->bytes = read_bytes(ctx, cookie);
	emit(PTG_EV_CUDA_ENTER, c->ts, id, c->api | d << 8, c);
	return 0;
}

SEC("uprobe")
int cuda_enter(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(cuda_enter_body(ctx));
}

static __always_inline int cuda_exit_body(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, d, result;
	struct open_calls *oc;
	struct call *c;

	oc = bpf_map_lookup_elem(&open_calls, &tid);
	/* the entry ran before the probes were attached: no return probe was armed then */
	if (!oc || !oc->depth)
		return 0;
	d = --oc->depth;
	if (d >= PTG_CUDA_MAX_NEST)
		return 0;
	c = &oc->calls[d];
	if (c->api == CALL_SKIP)
		return 0;
	/* CUresult and cudaError_t are small ints; 0xffff marks anything larger */
	result = (__u32)PT_REGS_RC(ctx);
	if (result > 0xffff)
		result = 0xffff;
	emit(PTG_EV_CUDA_EXIT, bpf_ktime_get_ns(), id, c->api | d << 8 | result << 16, c);
	return 0;
}

SEC("uretprobe")
int cuda_exit(struct pt_regs *ctx)
{
	return PTG_NO_PREEMPT(cuda_exit_body(ctx));
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
