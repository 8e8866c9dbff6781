// SPDX-License-Identifier: MIT
/* CUDA API probes: find the entry points, attach, pair calls, write records. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "cuda.skel.h"
#include "cuda/cuda.h"
#include "cuda/cuda_builds.h"
#include "cuda/cuda_ring.h"
#include "proc/elf_file.h"
#include "proc/kfeat.h"
#include "ptrace_gpu/events.h"
#include "trace/cuda_match.h"
#include "tracer/sitecookie.h"
#include "tracer/teardown.h"
#include "tracer/uprobe_multi.h"

#define NONE   PTG_CUDA_SLOT_NONE
#define DIRECT PTG_CUDA_DIRECT
/* after the hand-over to an agent, how long the ring buffer may still bring uprobe entries */
#define AGENT_SETTLE_NS 100000000ull

/*
 * Where an entry point's stream and byte count are (argument slots, see
 * PTG_CUDA_COOKIE). bytes_shift turns a memset's element count into bytes.
 */
struct cuda_api {
	const char *name;
	uint8_t stream_slot;
	uint8_t stream_off;
	uint8_t bytes_slot;
	uint8_t bytes_shift;
	bool runtime;
};

/* clang-format off */
#define API(n, ss, so, bs, sh, rt) { n, ss, so, bs, sh, rt }
/* driver API; _PT: also its per-thread-default-stream twin (_ptsz for async, _ptds for sync) */
#define DRV(n, ss, bs, sh) API(n, ss, DIRECT, bs, sh, false)
#define DRV_PT(n, ss, bs, sh) DRV(n, ss, bs, sh), DRV(n "_ptsz", ss, bs, sh)
#define DRV_PTDS(n, bs) DRV(n, NONE, bs, 0), DRV(n "_ptds", NONE, bs, 0)
#define RT(n, ss, bs, sh) API(n, ss, DIRECT, bs, sh, true)
#define RT_PT(n, ss, bs, sh) RT(n, ss, bs, sh), RT(n "_ptsz", ss, bs, sh)
#define RT_PTDS(n, bs) RT(n, NONE, bs, 0), RT(n "_ptds", NONE, bs, 0)

/*
 * Signatures from cuda.h and cuda_runtime_api.h (CUDA 12/13). Canonical
 * names first: where a library exports two names at one address, the first
 * one is probed and named.
 */
static const struct cuda_api apis[] = {
	/* cuLaunchKernel(f, gridX, gridY, gridZ, blockX, blockY, blockZ, shmem, stream, ...) */
	DRV_PT("cuLaunchKernel", 8, NONE, 0),
	/* cuLaunchKernelEx(const CUlaunchConfig *config, ...): hStream at offset 32 */
	API("cuLaunchKernelEx", 0, 32, NONE, 0, false),
	API("cuLaunchKernelEx_ptsz", 0, 32, NONE, 0, false),
	DRV_PT("cuLaunchCooperativeKernel", 8, NONE, 0),
	DRV_PT("cuLaunchHostFunc", 0, NONE, 0),
	DRV_PT("cuGraphLaunch", 1, NONE, 0),
	DRV_PT("cuMemcpyAsync", 3, 2, 0),
	DRV_PT("cuMemcpyHtoDAsync_v2", 3, 2, 0),
	DRV_PT("cuMemcpyDtoHAsync_v2", 3, 2, 0),
	DRV_PT("cuMemcpyDtoDAsync_v2", 3, 2, 0),
	DRV_PT("cuMemcpyHtoAAsync_v2", 4, 3, 0),
	DRV_PT("cuMemcpyAtoHAsync_v2", 4, 3, 0),
	DRV_PT("cuMemcpyPeerAsync", 5, 4, 0),
	DRV_PT("cuMemcpy2DAsync_v2", 1, NONE, 0),
	DRV_PT("cuMemcpy3DAsync_v2", 1, NONE, 0),
	DRV_PT("cuMemcpy3DPeerAsync", 1, NONE, 0),
	DRV_PT("cuMemsetD8Async", 3, 2, 0),
	DRV_PT("cuMemsetD16Async", 3, 2, 1),
	DRV_PT("cuMemsetD32Async", 3, 2, 2),
	DRV_PT("cuMemsetD2D8Async", 5, NONE, 0),
	DRV_PT("cuMemsetD2D16Async", 5, NONE, 0),
	DRV_PT("cuMemsetD2D32Async", 5, NONE, 0),
	DRV_PT("cuStreamSynchronize", 0, NONE, 0),
	DRV_PT("cuStreamWaitEvent", 0, NONE, 0),
	DRV_PT("cuEventRecord", 1, NONE, 0),
	DRV_PT("cuEventRecordWithFlags", 1, NONE, 0),
	DRV("cuCtxSynchronize", NONE, NONE, 0),
	DRV("cuCtxSynchronize_v2", NONE, NONE, 0),
	DRV("cuEventSynchronize", NONE, NONE, 0),
	/* synchronous copies wait for the GPU as well */
	DRV_PTDS("cuMemcpy", 2),
	DRV_PTDS("cuMemcpyHtoD_v2", 2),
	DRV_PTDS("cuMemcpyDtoH_v2", 2),
	DRV_PTDS("cuMemcpyDtoD_v2", 2),

	/* cudaLaunchKernel(func, dim3 grid, dim3 block, args, shmem, stream): dim3 takes 2 slots */
	RT_PT("cudaLaunchKernel", 7, NONE, 0),
	/* cudaLaunchKernelExC(const cudaLaunchConfig_t *config, ...): stream at offset 32 */
	API("cudaLaunchKernelExC", 0, 32, NONE, 0, true),
	API("cudaLaunchKernelExC_ptsz", 0, 32, NONE, 0, true),
	RT_PT("cudaLaunchCooperativeKernel", 7, NONE, 0),
	RT_PT("cudaLaunchHostFunc", 0, NONE, 0),
	RT_PT("cudaGraphLaunch", 1, NONE, 0),
	RT_PT("cudaMemcpyAsync", 4, 2, 0),
	RT_PT("cudaMemcpy2DAsync", 7, NONE, 0),
	RT_PT("cudaMemcpyPeerAsync", 5, 4, 0),
	RT_PT("cudaMemcpyToSymbolAsync", 5, 2, 0),
	RT_PT("cudaMemcpyFromSymbolAsync", 5, 2, 0),
	RT_PT("cudaMemsetAsync", 3, 2, 0),
	RT_PT("cudaMemset2DAsync", 5, NONE, 0),
	RT_PT("cudaStreamSynchronize", 0, NONE, 0),
	RT_PT("cudaStreamWaitEvent", 0, NONE, 0),
	RT_PT("cudaEventRecord", 1, NONE, 0),
	RT_PT("cudaEventRecordWithFlags", 1, NONE, 0),
	RT("cudaDeviceSynchronize", NONE, NONE, 0),
	RT("cudaEventSynchronize", NONE, NONE, 0),
	RT_PTDS("cudaMemcpy", 2),
	RT_PTDS("cudaMemset", 2),
};
/* clang-format on */

#define NR_APIS (sizeof(apis) / sizeof(apis[0]))
_Static_assert(NR_APIS <= 0xff, "the api id is 8 bits of an event's aux");

/*
 * Calls open on one thread, mirroring the BPF side's stack; and its last
 * returned calls, for CUPTI's records to find (cudaprobe__join): the last
 * CUDA_JOIN_HISTORY to 2 x CUDA_JOIN_HISTORY of them, in return order,
 * allocated at the thread's first call.
 */
struct cuda_thread {
	uint32_t depth;
	struct {
		uint64_t id;
		uint64_t ts; /* its start */
		uint8_t api;
		bool claimed; /* the agent's record of it was left out (cuda_agent_enter) */
	} calls[PTG_CUDA_MAX_NEST];
	/* calls open from a CUPTI agent's ring; adepth may exceed PTG_CUDA_MAX_NEST */
	uint32_t adepth;
	struct {
		uint64_t id;
		uint64_t ts;
		uint8_t api;
		bool dup; /* a call the uprobes recorded: not written again */
	} acalls[PTG_CUDA_MAX_NEST];
	struct cuda_host_call *hist;
	size_t nhist;
};

/*
 * A process whose CUPTI agent gives its CUDA calls: its ring, and whether
 * the uprobes are out of it yet (cudaprobe__poll).
 */
struct cuda_agent {
	pid_t pid;
	struct cuda_ring *ring;
	uint64_t since; /* when its calls stopped coming from the uprobes */
	bool probes_out;
};

struct cudaprobe {
	struct cuda_bpf *skel;
	struct tracer *t;
	pid_t pid; /* -1: the processes of the traced set (cudaprobe__open_shared) */
	/* the processes the probes are attached to; -1 alone: every process */
	pid_t *pids;
	size_t npids;
	bool quiet;
	bool multi; /* uprobe_multi links: link_fds, else links */
	/* the legacy build's site cookies (a kernel without BPF cookies), else -1 */
	int cookies_fd;
	int *link_fds;
	size_t nlink_fds;
	struct bpf_link **links;
	size_t nlinks;
	uint32_t syms[NR_APIS];	   /* symbol id of each API once written, 0 before */
	struct threads threads;	   /* of struct cuda_thread */
	struct buf libs;	   /* paths probed, ", "-separated, for the trace's metadata */
	struct u64map probed;	   /* inode -> 1: probed ahead or when mapped, once */
	pid_t *link_pids;	   /* the process each of link_fds, then links, was attached for */
	struct cuda_agent *agents; /* processes whose calls come from their CUPTI agent */
	size_t nagents;
	int next_agent;			     /* the ring whose record cuda_agent_peek() found */
	uint8_t agent_api[PTG_CUPTI_NCALLS]; /* the agent's call index -> api (NR_APIS: none) */
	uint64_t agent_ids;		     /* the legacy build's: call ids of agent calls */
	uint64_t agent_lost_nest;
	struct cudaprobe_stats st;
};

static uint32_t api_sym(struct cudaprobe *cp, uint32_t api)
{
	if (!cp->syms[api])
		cp->syms[api] = trace_writer__sym(tracer__writer(cp->t), PTG_SYM_CUDA_API,
						  apis[api].name, "", 0);
	return cp->syms[api];
}

static struct cuda_thread *thread_of(struct cudaprobe *cp, uint32_t pid, uint32_t tid, bool add)
{
	if (!add)
		return threads__find(&cp->threads, pid, tid);
	return threads__get(&cp->threads, pid, tid, NULL);
}

static void cuda_thread_fini(void *ct)
{
	free(((struct cuda_thread *)ct)->hist);
}

/* The external id of the innermost op open on the thread: CUDA calls belong to it. */
static uint64_t op_ext(const struct tracer_thread *th)
{
	for (uint32_t i = th->depth; i > 0; i--) {
		if (th->stack[i - 1].kind == PTG_REC_OP_ENTER)
			return th->stack[i - 1].ext;
	}
	return 0;
}

/* Appends in return order; the older half goes once the array is full. */
static int history_add(struct cuda_thread *ct, const struct ptg_record *r, uint32_t api,
		       uint32_t corr)
{
	const size_t cap = 2 * CUDA_JOIN_HISTORY;

	if (!ct->hist) {
		ct->hist = malloc(cap * sizeof(*ct->hist));
		if (!ct->hist)
			return -ENOMEM;
	}
	if (ct->nhist == cap) {
		memmove(ct->hist, ct->hist + cap - CUDA_JOIN_HISTORY,
			CUDA_JOIN_HISTORY * sizeof(*ct->hist));
		ct->nhist = CUDA_JOIN_HISTORY;
	}
	ct->hist[ct->nhist++] = (struct cuda_host_call){
	    .start = r->ts,
	    .end = r->ts + r->dur,
	    .id = (uint64_t)r->aux[3],
	    .corr = corr,
	    .name = apis[api].name,
	    .driver = !apis[api].runtime,
	};
	return 0;
}

/* A call from the agent's callbacks carries CUPTI's own id: the one its record has. */
static long find_corr(const struct cuda_thread *ct, uint32_t corr)
{
	for (size_t i = ct->nhist; corr && i > 0; i--) {
		if (ct->hist[i - 1].corr == corr)
			return ct->hist[i - 1].joined ? -1 : (long)(i - 1);
	}
	return -1;
}

/* The host call of thread ct that CUPTI's record c (its id corr) is of, or -1. */
static long join_find(struct cuda_thread *ct, uint32_t corr, const struct cuda_cupti_call *c)
{
	long i;

	if (!ct || !ct->nhist)
		return -1;
	i = find_corr(ct, corr);
	/* a name the agent did not send: only CUPTI's id can tell */
	if (i < 0 && c->name)
		i = cuda_join_find(ct->hist, ct->nhist, c);
	return i;
}

int cudaprobe__join(void *ctx, uint32_t pid, uint32_t tid, const char *name, bool driver,
		    uint32_t corr, uint64_t start, uint64_t end, uint64_t *call_id,
		    uint64_t *call_ts)
{
	struct cudaprobe *cp = ctx;
	struct cuda_thread *ct = thread_of(cp, pid, tid, false);
	struct cuda_cupti_call c = {.name = name, .driver = driver, .start = start, .end = end};
	long i = join_find(ct, corr, &c);

	/*
	 * The agents' rings are read a little behind the clock (tracer.h), and
	 * all the more while no probe fires: a call of theirs that CUPTI's
	 * record came before is read now, and looked for again
	 */
	if (i < 0 && cp->nagents && end && !tracer__catch_up(cp->t, end)) {
		ct = thread_of(cp, pid, tid, false);
		i = join_find(ct, corr, &c);
	}
	if (i < 0)
		return 0;
	ct->hist[i].joined = true;
	*call_id = ct->hist[i].id;
	*call_ts = ct->hist[i].start;
	return 1;
}

/* The BPF side says how deep each call is: anything above it was lost. */
static int call_enter(struct cudaprobe *cp, const struct ptg_event *e, uint32_t api, uint32_t depth)
{
	struct cuda_thread *ct = thread_of(cp, e->pid, e->tid, true);

	if (!ct)
		return -ENOMEM;
	if (depth >= PTG_CUDA_MAX_NEST)
		return 0;
	ct->calls[depth].id = e->a;
	ct->calls[depth].ts = e->ts;
	ct->calls[depth].api = (uint8_t)api;
	ct->depth = depth + 1;
	return 0;
}

/*
 * One call's record, as an EXIT event gives it (a uprobe's, or one of an
 * agent's ring made into one): written as it returns, inside the thread's
 * frames and op. corr: CUPTI's id of it, from the agent (0: a uprobe's).
 */
static int write_call(struct cudaprobe *cp, struct cuda_thread *ct, const struct ptg_event *e,
		      uint32_t api, uint32_t corr)
{
	struct tracer_thread *th;
	struct ptg_record r = {
	    .kind = PTG_REC_CUDA_CALL,
	    .flags = (uint16_t)(e->aux >> 16),
	    .pid = e->pid,
	    .tid = e->tid,
	    .sym = api_sym(cp, api),
	    .ts = e->d,
	    .dur = e->ts > e->d ? e->ts - e->d : 0,
	    .stream = e->b,
	    /* kineto's cuda_driver marker; the call id never equals a CUPTI correlation id */
	    .aux = {0, !apis[api].runtime, (int64_t)e->c, (int64_t)e->a},
	};

	th = tracer__thread(cp->t, e->pid, e->tid, e->ts);
	if (!th || !r.sym)
		return -ENOMEM;
	r.ext = op_ext(th);
	cp->st.calls++;
	cp->st.agent_calls += corr != 0;
	if (ct && history_add(ct, &r, api, corr))
		return -ENOMEM;
	return tracer__record(cp->t, &r);
}

static int call_exit(struct cudaprobe *cp, const struct ptg_event *e, uint32_t api, uint32_t depth)
{
	struct cuda_thread *ct = thread_of(cp, e->pid, e->tid, false);

	if (ct && ct->depth > depth)
		ct->depth = depth;
	return write_call(cp, ct, e, api, 0);
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct cudaprobe *cp = ctx;
	uint32_t api = e->aux & 0xff, depth = (e->aux >> 8) & 0xff;

	if (api >= NR_APIS)
		return 0;
	if (e->kind == PTG_EV_CUDA_ENTER)
		return call_enter(cp, e, api, depth);
	if (e->kind == PTG_EV_CUDA_EXIT)
		return call_exit(cp, e, api, depth);
	return 0;
}

void cudaprobe__current(struct cudaprobe *cp, uint32_t pid, uint32_t tid, uint64_t since,
			uint32_t *sym, uint64_t *call_id)
{
	struct cuda_thread *ct = cp ? thread_of(cp, pid, tid, false) : NULL;
	uint32_t d = ct ? ct->depth : 0;
	uint32_t a = ct ? (ct->adepth < PTG_CUDA_MAX_NEST ? ct->adepth : PTG_CUDA_MAX_NEST) : 0;

	*sym = 0;
	*call_id = 0;
	while (d && ct->calls[d - 1].ts > since)
		d--;
	/* the agent's calls: those it recorded (a dup has its uprobe's on the other stack) */
	while (a && (ct->acalls[a - 1].ts > since || ct->acalls[a - 1].dup))
		a--;
	/* of the two innermost, the later: a call the agent took is inside one the uprobes had */
	if (a && (!d || ct->acalls[a - 1].ts >= ct->calls[d - 1].ts)) {
		*sym = api_sym(cp, ct->acalls[a - 1].api);
		*call_id = ct->acalls[a - 1].id;
		return;
	}
	if (!d)
		return;
	*sym = api_sym(cp, ct->calls[d - 1].api);
	*call_id = ct->calls[d - 1].id;
}

/*
 * CUDA calls from a CUPTI agent's ring (docs/cuda-sched.md, "From the CUPTI
 * agent"): the same calls as the uprobes', made into the same events and
 * records, so that no report can tell them apart but by the metadata.
 */
static struct cuda_agent *agent_of(const struct cudaprobe *cp, pid_t pid)
{
	for (size_t i = 0; i < cp->nagents; i++) {
		if (cp->agents[i].pid == pid)
			return &cp->agents[i];
	}
	return NULL;
}

/* An id of the uprobes' numbering (bpf/cuda.bpf.c's new_call_id()), so the two never meet. */
static uint64_t agent_call_id(struct cudaprobe *cp)
{
	/* the legacy build numbers per CPU, the CPU in the low 16 bits: 0xffff is none of them */
	if (cp->cookies_fd >= 0 || !cp->skel->bss)
		return ++cp->agent_ids << 16 | 0xffff;
	return __sync_fetch_and_add(&cp->skel->bss->next_id, 1) + 1;
}

/*
 * Whether the uprobes have this call (api, started at ts): while both
 * record, at the hand-over, the agent's ENTER comes after the uprobe's (its
 * callback runs inside the function the uprobe fired at), so the call is on
 * the thread's uprobe stack, or, when the ring was read late, among its
 * last returned calls. A thread runs one call of an API at a time.
 */
static bool uprobes_have(struct cuda_thread *ct, uint32_t api, uint64_t ts)
{
	uint32_t d = ct->depth < PTG_CUDA_MAX_NEST ? ct->depth : PTG_CUDA_MAX_NEST;

	for (uint32_t i = d; i > 0; i--) {
		if (ct->calls[i - 1].api == api && ct->calls[i - 1].ts <= ts &&
		    !ct->calls[i - 1].claimed)
			return ct->calls[i - 1].claimed = true;
	}
	/* in return order: the ends only go back in time */
	for (size_t i = ct->nhist; i > 0 && ct->hist[i - 1].end >= ts; i--) {
		const struct cuda_host_call *h = &ct->hist[i - 1];

		if (!h->corr && h->name == apis[api].name && h->start <= ts)
			return true;
	}
	return false;
}

static int agent_enter(struct cudaprobe *cp, const struct ptg_cupti_call_rec *rec, pid_t pid,
		       uint32_t api)
{
	struct cuda_thread *ct = thread_of(cp, (uint32_t)pid, rec->tid, true);
	uint32_t d;

	if (!ct)
		return -ENOMEM;
	d = ct->adepth++;
	if (d >= PTG_CUDA_MAX_NEST) {
		cp->agent_lost_nest++;
		return 0;
	}
	ct->acalls[d].api = (uint8_t)api;
	ct->acalls[d].ts = rec->start;
	ct->acalls[d].dup = uprobes_have(ct, api, rec->start);
	ct->acalls[d].id = ct->acalls[d].dup ? 0 : agent_call_id(cp);
	return 0;
}

/* The EXIT of the innermost open call: written as a uprobe's return would be. */
static int agent_exit(struct cudaprobe *cp, const struct ptg_cupti_call_rec *rec, pid_t pid,
		      uint32_t api)
{
	struct cuda_thread *ct = thread_of(cp, (uint32_t)pid, rec->tid, false);
	struct ptg_event e = {
	    .ts = rec->ts,
	    .pid = (uint32_t)pid,
	    .tid = rec->tid,
	    .kind = PTG_EV_CUDA_EXIT,
	    .aux = rec->what & 0xffff0000u,
	    .b = rec->stream,
	    .c = rec->bytes,
	    .d = rec->start,
	};
	uint32_t d;

	/* the agent writes an EXIT only after its ENTER: one without is a lying agent's */
	if (!ct || !ct->adepth)
		return 0;
	d = --ct->adepth;
	if (d >= PTG_CUDA_MAX_NEST || ct->acalls[d].dup || ct->acalls[d].api != api)
		return 0;
	e.a = ct->acalls[d].id;
	return write_call(cp, ct, &e, api, rec->corr ? rec->corr : UINT32_MAX);
}

static int agent_peek(struct tracer *t, void *ctx, uint64_t *ts)
{
	struct cudaprobe *cp = ctx;
	struct ptg_cupti_call_rec rec;
	bool any = false;

	for (size_t i = 0; i < cp->nagents; i++) {
		if (!cuda_ring__peek(cp->agents[i].ring, &rec) || (any && rec.ts >= *ts))
			continue;
		*ts = rec.ts;
		cp->next_agent = (int)i;
		any = true;
	}
	return any;
}

static int agent_take(struct tracer *t, void *ctx)
{
	struct cudaprobe *cp = ctx;
	struct cuda_agent *ag = &cp->agents[cp->next_agent];
	struct ptg_cupti_call_rec rec;
	uint32_t kind, call, api;
	uint64_t now;

	if (!cuda_ring__peek(ag->ring, &rec))
		return 0;
	cuda_ring__consume(ag->ring);
	kind = rec.what & 0xff;
	call = rec.what >> 8 & 0xff;
	if (call >= PTG_CUPTI_NCALLS || !rec.tid || rec.start > rec.ts)
		return 0;
	api = cp->agent_api[call];
	if (api >= NR_APIS)
		return 0;
	/* no time beyond now: a lying clock cannot push the trace's end out */
	now = now_ns(CLOCK_MONOTONIC);
	rec.ts = rec.ts < now ? rec.ts : now;
	rec.start = rec.start < rec.ts ? rec.start : rec.ts;
	if (kind == PTG_CUPTI_CALL_ENTER)
		return agent_enter(cp, &rec, ag->pid, api);
	if (kind == PTG_CUPTI_CALL_EXIT)
		return agent_exit(cp, &rec, ag->pid, api);
	return 0;
}

int cudaprobe__agent_ring(void *ctx, pid_t pid, int fd, uint64_t size)
{
	struct cudaprobe *cp = ctx;
	struct cuda_agent *n;
	struct cuda_ring *ring;
	__u32 tgid = (__u32)pid;
	__u8 one = 1;
	int err;

	if (!cp || agent_of(cp, pid))
		return cp ? -EPROTO : 0;
	err = cuda_ring__open(fd, size, &ring);
	if (err)
		return err;
	n = realloc(cp->agents, (cp->nagents + 1) * sizeof(*n));
	if (!n) {
		cuda_ring__free(ring);
		return -ENOMEM;
	}
	cp->agents = n;
	/* from now on the uprobes let this process's calls be (the ones open go on) */
	err = bpf_map_update_elem(bpf_map__fd(cp->skel->maps.cupti_tgids), &tgid, &one, BPF_ANY);
	if (err) {
		cuda_ring__free(ring);
		return -errno;
	}
	n[cp->nagents++] =
	    (struct cuda_agent){.pid = pid, .ring = ring, .since = now_ns(CLOCK_MONOTONIC)};
	tracer__set_timed_source(cp->t, agent_peek, agent_take, cp);
	if (!cp->quiet)
		pr_info("cuda: pid %d: CUDA calls from its CUPTI agent's callbacks", pid);
	return 0;
}

/* Whether a call the uprobes started in process pid is still open. */
static bool uprobe_open(struct cudaprobe *cp, pid_t pid)
{
	for (size_t i = 0; i < cp->threads.len; i++) {
		struct cuda_thread *ct = threads__at(&cp->threads, i);

		if (threads__pid(&cp->threads, i) == (uint32_t)pid && ct->depth)
			return true;
	}
	return false;
}

/* The uprobes of process pid out, theirs alone (a set shares its probes on pid 0: they stay). */
static void detach_pid(struct cudaprobe *cp, pid_t pid)
{
	for (size_t i = 0; i < cp->nlink_fds; i++) {
		if (cp->link_pids[i] == pid && cp->link_fds[i] >= 0) {
			teardown_fd(cp->link_fds[i]);
			cp->link_fds[i] = -1;
		}
	}
	for (size_t i = 0; i < cp->nlinks; i++) {
		if (cp->link_pids[i] == pid && cp->links[i]) {
			teardown_link(cp->links[i]);
			cp->links[i] = NULL;
		}
	}
}

/*
 * The calls the uprobes started before the agent took over return through
 * their return probes: the probes come out once none is open (and the ring
 * buffer has had time to bring the last entries in).
 */
void cudaprobe__poll(struct cudaprobe *cp)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);

	for (size_t i = 0; cp && i < cp->nagents; i++) {
		struct cuda_agent *ag = &cp->agents[i];

		if (ag->probes_out || now - ag->since < AGENT_SETTLE_NS || uprobe_open(cp, ag->pid))
			continue;
		ag->probes_out = true;
		detach_pid(cp, ag->pid);
	}
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct cudaprobe *cp = ctx;
	const struct cuda_bpf__bss *bss = cp->skel->bss;
	struct trace_writer *w = tracer__writer(t);
	uint64_t dropped = bss->lost_events, nest = bss->lost_nest + cp->agent_lost_nest;
	char buf[32];
	int err = 0;

	/* the agents' rings lose calls as the ring buffer loses events: when full */
	for (size_t i = 0; i < cp->nagents; i++)
		dropped += cuda_ring__dropped(cp->agents[i].ring);
	if (dropped)
		err = trace_writer__lost(w, PTG_LOST_CUDA_EVENT, UINT32_MAX, dropped);
	if (!err && nest)
		err = trace_writer__lost(w, PTG_LOST_CUDA_NESTING, UINT32_MAX, nest);
	if (!err && bss->lost_state)
		err =
		    trace_writer__lost(w, PTG_LOST_CUDA_THREAD_STATE, UINT32_MAX, bss->lost_state);
	if (!err && cp->st.attach_failed)
		err = trace_writer__lost(w, PTG_LOST_CUDA_PROBE_ATTACH, UINT32_MAX,
					 cp->st.attach_failed);
	if (!err && cp->libs.len)
		err = trace_writer__meta(w, "cuda.libraries", cp->libs.text);
	/* where the calls came from: the uprobes' traps, or CUPTI's callbacks */
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(cp->st.calls - cp->st.agent_calls));
	err = err ?: trace_writer__meta(w, "cuda.calls_uprobes", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)cp->st.agent_calls);
	return err ?: trace_writer__meta(w, "cuda.calls_cupti", buf);
}

/* The process of link i (link_fds first, then links), for its detach when its agent takes over. */
static int add_pid(struct cudaprobe *cp, size_t i, pid_t pid)
{
	pid_t *n = realloc(cp->link_pids, (i + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	cp->link_pids = n;
	cp->link_pids[i] = pid;
	return 0;
}

static int add_fd(struct cudaprobe *cp, int fd, pid_t pid)
{
	int *n = realloc(cp->link_fds, (cp->nlink_fds + 1) * sizeof(*n));

	/* one kind of link in a cudaprobe (multi or not): link_pids follows it */
	if (!n || add_pid(cp, cp->nlink_fds, pid)) {
		if (n)
			cp->link_fds = n;
		close(fd);
		return -ENOMEM;
	}
	cp->link_fds = n;
	cp->link_fds[cp->nlink_fds++] = fd;
	return 0;
}

static int add_link(struct cudaprobe *cp, struct bpf_link *link, pid_t pid)
{
	struct bpf_link **n = realloc(cp->links, (cp->nlinks + 1) * sizeof(*n));

	if (!n || add_pid(cp, cp->nlinks, pid)) {
		if (n)
			cp->links = n;
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	cp->links = n;
	cp->links[cp->nlinks++] = link;
	return 0;
}

/* The probes found in one library: file offsets and cookies. */
struct probe_set {
	uint64_t offs[NR_APIS];
	uint64_t cookies[NR_APIS];
	uint32_t n;
};

/*
 * Return probes go in first: a call that starts between the two attaches
 * then has neither, rather than an entry whose return is never seen.
 */
static int attach_multi(struct cudaprobe *cp, const char *path, const struct probe_set *ps,
			pid_t pid)
{
	struct bpf_program *progs[2] = {cp->skel->progs.cuda_exit, cp->skel->progs.cuda_enter};
	int err = 0;

	for (int i = 0; i < 2 && !err; i++) {
		/* uprobe_multi: pid 0 is every process (a set, filtered in BPF) */
		int fd = uprobe_multi_attach(bpf_program__fd(progs[i]), path, ps->offs, ps->cookies,
					     ps->n, i == 0, pid < 0 ? 0 : pid);

		err = fd < 0 ? fd : add_fd(cp, fd, pid);
	}
	return err;
}

static int attach_one(struct cudaprobe *cp, const char *path, uint64_t off, uint64_t cookie,
		      pid_t pid)
{
	struct bpf_program *progs[2] = {cp->skel->progs.cuda_exit, cp->skel->progs.cuda_enter};
	int err = 0;

	for (int i = 0; i < 2 && !err; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = i == 0,
			    .bpf_cookie = cp->cookies_fd < 0 ? cookie : 0);
		struct bpf_link *link;

		link = bpf_program__attach_uprobe_opts(progs[i], pid, path, off, &opts);
		err = link ? add_link(cp, link, pid) : -errno;
	}
	return err;
}

/* The probes of one library in process pid; a process of a set that is gone has none. */
static int attach_pid(struct cudaprobe *cp, const char *attach_path, const struct probe_set *ps,
		      pid_t pid, int *failed)
{
	int err = 0;

	*failed = 0;
	if (cp->multi && ps->n) {
		err = attach_multi(cp, attach_path, ps, pid);
		*failed = err ? (int)ps->n : 0;
	}
	for (uint32_t i = 0; !cp->multi && i < ps->n && err != -ENOMEM; i++) {
		int e = attach_one(cp, attach_path, ps->offs[i], ps->cookies[i], pid);

		*failed += !!e;
		err = err ?: e;
	}
	if (err == -ESRCH && cp->pid < 0) {
		*failed = 0;
		return 0;
	}
	return err;
}

/* 1: every process of the probes' has its calls from its CUPTI agent, nothing was attached */
static int attach_set(struct cudaprobe *cp, const char *path, const char *attach_path,
		      const struct probe_set *ps)
{
	int err = 0, failed = 0;
	size_t handed = 0;

	for (size_t i = 0; i < cp->npids && err != -ENOMEM; i++) {
		int f, e;

		/* its CUPTI agent gives its calls: no trap for them */
		if (agent_of(cp, cp->pids[i])) {
			handed++;
			continue;
		}
		e = attach_pid(cp, attach_path, ps, cp->pids[i], &f);

		failed = failed > f ? failed : f;
		err = err ?: e;
	}
	if (err == -ENOMEM)
		return err;
	if (handed && handed == cp->npids)
		return 1;
	if (err) {
		log_libbpf_flush();
		pr_err("cuda: cannot probe %d entry points of %s: %s", failed, path,
		       strerror(-err));
	}
	cp->st.attach_failed += failed;
	cp->st.entry_points += ps->n - failed;
	return 0;
}

static bool seen_offset(const struct probe_set *ps, uint64_t off)
{
	for (uint32_t i = 0; i < ps->n; i++) {
		if (ps->offs[i] == off)
			return true;
	}
	return false;
}

static void find_probes(struct elf_file *ef, bool runtime, struct probe_set *ps)
{
	ps->n = 0;
	for (uint32_t api = 0; api < NR_APIS; api++) {
		const struct cuda_api *a = &apis[api];
		struct elf_sym_info si;
		uint64_t off;

		if (a->runtime != runtime || elf_file__find_sym(ef, a->name, false, &si) ||
		    elf_file__vaddr_to_offset(ef, si.addr, &off) || seen_offset(ps, off))
			continue;
		ps->offs[ps->n] = off;
		ps->cookies[ps->n++] = PTG_CUDA_COOKIE(api, a->stream_slot, a->stream_off,
						       a->bytes_slot, a->bytes_shift);
	}
}

/* The legacy build: the cookies by site, before any of them can be hit. */
static int put_cookies(struct cudaprobe *cp, const char *path, uint64_t ino,
		       const struct probe_set *ps)
{
	int err = 0;

	for (uint32_t i = 0; cp->cookies_fd >= 0 && i < ps->n && !err; i++)
		err = sitecookie_put(cp->cookies_fd, ino, ps->offs[i], ps->cookies[i]);
	if (err)
		pr_err("cuda: cannot probe the entry points of %s: %s", path, strerror(-err));
	return err;
}

static int probe_library(struct cudaprobe *cp, struct elf_file *ef, const struct proc_map *m,
			 const char *attach_path, bool runtime)
{
	const char *path = m->path;
	struct probe_set ps;
	uint32_t before = cp->st.entry_points;
	int err;

	find_probes(ef, runtime, &ps);
	if (put_cookies(cp, path, m->inode, &ps)) {
		cp->st.attach_failed += ps.n;
		return 0;
	}
	err = attach_set(cp, path, attach_path, &ps);
	if (err > 0 && !cp->quiet)
		pr_info("cuda: %s not probed: the CUDA calls come from the CUPTI agent", path);
	if (err)
		return err;
	cp->st.libraries++;
	if (!cp->quiet)
		pr_info("cuda: probing %u entry points of %s", cp->st.entry_points - before, path);
	return 0;
}

static int note_library(struct cudaprobe *cp, const char *path)
{
	return buf__printf(&cp->libs, "%s%s", cp->libs.len ? ", " : "", path);
}

/* libcuda.so.1 (driver); libcudart.so.12 or a wheel's bundled libcudart-HASH.so.12 (runtime). */
static int lib_kind(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libcuda.so", 10))
		return 0;
	if (!strncmp(base, "libcudart", 9) && (base[9] == '.' || base[9] == '-'))
		return 1;
	return -1;
}

static int on_library(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias)
{
	struct cudaprobe *cp = ctx;
	int kind = lib_kind(m->path), err;
	struct elf_file *ef;

	if (kind < 0 || u64map__get(&cp->probed, m->inode))
		return 0;
	if (u64map__put(&cp->probed, m->inode, 1))
		return -ENOMEM;
	err = elf_file__open(attach_path, &ef);
	if (err) {
		pr_err("cuda: cannot read %s: %s", m->path, strerror(-err));
		cp->st.attach_failed++;
		return 0;
	}
	err = probe_library(cp, ef, m, attach_path, kind == 1);
	elf_file__close(ef);
	/* one the agent made unneeded (1) is no library of the probes' */
	if (err)
		return err < 0 ? err : 0;
	return note_library(cp, m->path);
}

/* The agent's table names the same entry points: its index -> ours, by name. */
static void agent_apis(struct cudaprobe *cp)
{
	for (size_t i = 0; i < PTG_CUPTI_NCALLS; i++) {
		cp->agent_api[i] = NR_APIS;
		for (uint32_t api = 0; api < NR_APIS; api++) {
			if (!strcmp(apis[api].name, ptg_cupti_call_names[i]))
				cp->agent_api[i] = (uint8_t)api;
		}
	}
}

KFEAT_SKEL_OPEN_VARIANT(cuda_bpf)

/*
 * The object as built, or before BPF cookies (5.15) and fetching atomics
 * (5.12) its legacy build, which finds a site's cookie by its address; from
 * 6.10 its preempt build.
 */
static struct cuda_bpf *open_bpf(void)
{
	size_t size;
	const void *data;

	if (kfeat_cookies() && !kfeat_preempt_build())
		return cuda_bpf__open();
	data = kfeat_cookies() ? cuda_preempt_elf(&size) : cuda_legacy_elf(&size);
	return cuda_bpf__open_variant(data, size);
}

/*
 * pid -1 with traced_fd: the processes of that set, probed on the files
 * they map, for pids (npids 0: every process)
 */
static int open_common(struct tracer *t, struct libwatch *lw, pid_t pid, int traced_fd,
		       const pid_t *pids, size_t npids, bool quiet, struct cudaprobe **out)
{
	struct cudaprobe *cp;
	int err;

	cp = calloc(1, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	cp->threads = THREADS_INIT(struct cuda_thread);
	cp->t = t;
	cp->pid = pid;
	agent_apis(cp);
	if (uprobe_pids(pid, pids, npids, &cp->pids, &cp->npids)) {
		free(cp);
		return -ENOMEM;
	}
	cp->quiet = quiet;
	cp->cookies_fd = -1;
	cp->skel = open_bpf();
	if (!cp->skel) {
		err = -errno;
		goto cleanup;
	}
	cp->multi = uprobe_multi_supported();
	if (cp->multi) {
		bpf_program__set_expected_attach_type(cp->skel->progs.cuda_enter,
						      PTG_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(cp->skel->progs.cuda_exit,
						      PTG_BPF_TRACE_UPROBE_MULTI);
	}
	cp->skel->rodata->filter_tgids = traced_fd >= 0;
	err = bpf_map__reuse_fd(cp->skel->maps.events, tracer__ringbuf_fd(t));
	if (!err && traced_fd >= 0)
		err = bpf_map__reuse_fd(cp->skel->maps.traced, traced_fd);
	err = err ?: cuda_bpf__load(cp->skel);
	if (err)
		goto cleanup;
	if (!kfeat_cookies())
		cp->cookies_fd = sitecookie_map(cp->skel->obj);
	err = tracer__on(t, PTG_EV_CUDA_ENTER, PTG_EV_CUDA_EXIT, handle_event, write_losses, cp);
	err = err ?: libwatch__subscribe(lw, on_library, cp);
	if (err)
		goto cleanup;
	*out = cp;
	return 0;
cleanup:
	log_libbpf_flush();
	pr_err("cuda: cannot load the CUDA API probes: %s", strerror(-err));
	cudaprobe__destroy(cp);
	return err;
}

int cudaprobe__open(struct tracer *t, struct libwatch *lw, pid_t pid, bool quiet,
		    struct cudaprobe **out)
{
	return open_common(t, lw, pid, -1, NULL, 0, quiet, out);
}

int cudaprobe__open_shared(struct tracer *t, struct libwatch *lw, int traced_fd, const pid_t *pids,
			   size_t npids, bool quiet, struct cudaprobe **out)
{
	return open_common(t, lw, -1, traced_fd, pids, npids, quiet, out);
}

void cudaprobe__detach(struct cudaprobe *cp)
{
	if (!cp)
		return;
	for (size_t i = 0; i < cp->nlink_fds; i++)
		teardown_fd(cp->link_fds[i]);
	cp->nlink_fds = 0;
	for (size_t i = 0; i < cp->nlinks; i++)
		teardown_link(cp->links[i]);
	cp->nlinks = 0;
}

void cudaprobe__stats(const struct cudaprobe *cp, struct cudaprobe_stats *st)
{
	*st = cp->st;
}

bool cudaprobe__has_pid(void *ctx, pid_t pid)
{
	struct cudaprobe *cp = ctx;

	/* a thread's entry is made at its first call */
	for (size_t i = 0; cp && i < cp->threads.len; i++) {
		if (threads__pid(&cp->threads, i) == (uint32_t)pid)
			return true;
	}
	return false;
}

void cudaprobe__summary(const struct cudaprobe *cp)
{
	if (!cp)
		return;
	if (!cp->st.libraries && !cp->st.agent_calls) {
		pr_info("no CUDA library was mapped: no CUDA calls");
		return;
	}
	if (cp->st.agent_calls)
		pr_info(
		    "%llu CUDA calls (%llu from CUPTI's callbacks; %u entry points probed in %u "
		    "libraries)",
		    (unsigned long long)cp->st.calls, (unsigned long long)cp->st.agent_calls,
		    cp->st.entry_points, cp->st.libraries);
	else
		pr_info("%llu CUDA calls (%u entry points probed in %u libraries)",
			(unsigned long long)cp->st.calls, cp->st.entry_points, cp->st.libraries);
}

void cudaprobe__destroy(struct cudaprobe *cp)
{
	if (!cp)
		return;
	cudaprobe__detach(cp);
	cuda_bpf__destroy(cp->skel);
	free(cp->link_fds);
	free(cp->links);
	free(cp->link_pids);
	for (size_t i = 0; i < cp->nagents; i++)
		cuda_ring__free(cp->agents[i].ring);
	free(cp->agents);
	free(cp->pids);
	threads__free(&cp->threads, cuda_thread_fini);
	u64map__free(&cp->probed);
	buf__free(&cp->libs);
	free(cp);
}
