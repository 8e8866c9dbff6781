// SPDX-License-Identifier: MIT
/*
 * Dispatcher op probes: attach per library, then pair entries and exits by
 * stack pointer on each thread's stack.
 *
 * An op's entry and each of its exits see the same stack pointer (it points
 * at the return address). The machine stack grows down, so on one thread an
 * op still running has an entry stack pointer above that of any later event
 * of the thread; an open op whose entry stack pointer is at or below a new
 * op's (or below an exit's) has been left without passing a probed exit: a
 * C++ exception unwound it. Python frames that catch such an exception close
 * it too (pyframe pops everything above the frame).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "proc/elf_file.h"
#include "proc/kfeat.h"
#include "proc/procfs.h"
#include "torch/opscan.h"
#include "torch/torchops.h"
#include "torch/torchops_builds.h"
#include "torchops.skel.h"
#include "tracer/sitecookie.h"
#include "tracer/teardown.h"
#include "tracer/uprobe_multi.h"

#define IN_PROCESS_CODE (1ull << 63)
#define ANY_CODE	(~0ull) /* an exit paired by its key alone */

struct op_lib {
	struct opscan *scan;
	uint64_t ino;	  /* of the file probed */
	uint32_t base;	  /* global index of its first op */
	int *link_fds;	  /* uprobe_multi links, one per process attached to */
	pid_t *link_pids; /* the process of each */
	size_t nlink_fds;
	struct bpf_link **links; /* per-site fallback */
	pid_t *links_pid;	 /* the process of each */
	size_t nlinks;
};

/* at::getStepCallbacksUnlessEmpty(at::RecordScope): record -- CMD's one probe (op_trigger) */
#define TRIGGER_SYM "_ZN2at27getStepCallbacksUnlessEmptyENS_11RecordScopeE"

/* A library with the hand-over's one probe on it, and not (yet) its op probes. */
struct op_trig {
	struct proc_map m; /* as offered: start and end 0 when offered ahead */
	char *path;	   /* the file the probe is on, scanned if the op probes go in */
	struct bpf_link *link;
};

struct torchops {
	struct tracer *t;
	struct modpath *mp;
	pid_t pid; /* -1: the processes of the traced set (torchops__open_shared) */
	/* the processes the probes are attached to; -1 alone: every process */
	pid_t *pids;
	size_t npids;
	bool quiet;
	bool multi_loaded; /* op_multi is loaded: the kernel has uprobe_multi */
	/* the legacy build's site cookies (a kernel without BPF cookies), else -1 */
	int cookies_fd;
	bool in_process; /* every process's ops come from its agent (--in-process): no probes */
	uint64_t
	    handover_missed; /* ops of other threads during a hand-over (torchops__handover_done) */
	/* record -- CMD (torchops__handover_arm): libraries get op_trigger alone, until needed */
	bool handover;
	struct op_trig *trigs;
	size_t ntrigs;
	struct torchops_bpf *skel;
	struct op_lib *libs;
	size_t nlibs;
	const char **names; /* global op index -> name */
	uint32_t *syms;	    /* global op index -> symbol, 0 until first call */
	size_t nops;
	uint64_t seq;	      /* ext of the last op: links it to the CUDA calls it makes */
	struct u64map probed; /* inode -> 1: probed ahead or when mapped, once */
	struct torchops_stats st;
};

static uint32_t op_sym(struct torchops *ops, uint64_t op)
{
	if (!ops->syms[op])
		ops->syms[op] =
		    trace_writer__sym(tracer__writer(ops->t), PTG_SYM_OP, ops->names[op], "", 0);
	return ops->syms[op];
}

/*
 * Closes the open ops of th that a stack pointer of sp proves finished:
 * those entered at or below it (below only, for an exit at sp). Ops above
 * the innermost live op are all that can be stale.
 */
static int close_stale(struct torchops *ops, struct tracer_thread *th, uint64_t sp, bool at,
		       uint64_t ts)
{
	uint32_t cut = 0;

	for (uint32_t i = th->depth; i-- > 0;) {
		const struct tracer_slot *s = &th->stack[i];

		if (s->kind != PTG_REC_OP_ENTER)
			continue;
		if (s->key > sp || (!at && s->key == sp))
			break;
		cut = i + 1;
	}
	if (!cut)
		return 0;
	for (uint32_t i = cut - 1; i < th->depth; i++)
		ops->st.unwound += th->stack[i].kind == PTG_REC_OP_ENTER;
	return tracer__pop_to(ops->t, th, cut - 1, ts, PTG_F_EXIT_UNWIND);
}

/*
 * key: the entry's stack pointer; code: which op (the same at its exit, or
 * ANY_CODE there); sym: its name
 */
static int op_enter(struct torchops *ops, struct tracer_thread *th, uint64_t key, uint64_t code,
		    uint32_t sym, uint64_t ts)
{
	struct tracer_slot slot = {
	    .key = key,
	    .code = code,
	    .kind = PTG_REC_OP_ENTER,
	};
	int err = close_stale(ops, th, key, true, ts);

	if (err)
		return err;
	slot.ext = ++ops->seq;
	slot.aux0 = ops->mp ? modpath__current(ops->mp, th) : 0;
	ops->st.calls++;
	return tracer__push(ops->t, th, &slot, sym, PTG_F_ENTER_CALL, ts);
}

static int op_exit(struct torchops *ops, struct tracer_thread *th, uint64_t key, uint64_t code,
		   uint64_t ts)
{
	uint32_t at = 0;
	int err;

	for (uint32_t i = th->depth; i-- > 0;) {
		const struct tracer_slot *s = &th->stack[i];

		if (s->kind != PTG_REC_OP_ENTER)
			continue;
		if (s->key > key)
			break;
		if (s->key == key && (s->code == code || code == ANY_CODE)) {
			at = i + 1;
			break;
		}
	}
	if (!at) {
		ops->st.unmatched++;
		return close_stale(ops, th, key, false, ts);
	}
	/* what is still open above it has been left without an event: stale ops, lost frames */
	err = tracer__pop_to(ops->t, th, at, ts, PTG_F_EXIT_UNWIND);
	return err ?: tracer__pop_to(ops->t, th, at - 1, ts, PTG_F_EXIT_RETURN);
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct torchops *ops = ctx;
	struct tracer_thread *th;

	if (e->a >= ops->nops)
		return 0;
	th = tracer__thread(t, e->pid, e->tid, e->ts);
	if (!th)
		return -ENOMEM;
	if (e->kind == PTG_EV_OP_ENTER)
		return op_enter(ops, th, e->b, e->a, op_sym(ops, e->a), e->ts);
	return op_exit(ops, th, e->b, e->a, e->ts);
}

/* pid's probes of lib out (none of them can have fired: see torchops__in_process()). */
static void unprobe_pid(struct op_lib *lib, pid_t pid)
{
	size_t n = 0;

	for (size_t i = 0; i < lib->nlink_fds; i++) {
		if (lib->link_pids[i] == pid) {
			close(lib->link_fds[i]);
			continue;
		}
		lib->link_pids[n] = lib->link_pids[i];
		lib->link_fds[n++] = lib->link_fds[i];
	}
	lib->nlink_fds = n;
	n = 0;
	for (size_t i = 0; i < lib->nlinks; i++) {
		if (lib->links_pid[i] == pid) {
			bpf_link__destroy(lib->links[i]);
			continue;
		}
		lib->links_pid[n] = lib->links_pid[i];
		lib->links[n++] = lib->links[i];
	}
	lib->nlinks = n;
}

int torchops__handover_arm(struct torchops *ops, pid_t pid)
{
	struct ptg_op_handover h = {.state = PTG_OP_HANDOVER_ARMED};
	__u32 key = (__u32)pid;

	if (!ops)
		return -ENOENT;
	/* the legacy build's claim of an earlier hand-over (bpf/torchops.bpf.c) */
	if (ops->cookies_fd >= 0) {
		struct bpf_map *claim =
		    bpf_object__find_map_by_name(ops->skel->obj, "handover_claim");

		if (claim)
			bpf_map_delete_elem(bpf_map__fd(claim), &key);
	}
	if (bpf_map_update_elem(bpf_map__fd(ops->skel->maps.handover), &key, &h, BPF_ANY))
		return -errno;
	ops->skel->bss->handover_any = true;
	/* from now on a library gets the one probe of op_trigger, not its thousands */
	ops->handover = true;
	return 0;
}

bool torchops__handover_stopped(struct torchops *ops, pid_t pid, pid_t tid)
{
	struct ptg_op_handover h;
	__u32 key = (__u32)pid;

	return ops && !bpf_map_lookup_elem(bpf_map__fd(ops->skel->maps.handover), &key, &h) &&
	       h.state == PTG_OP_HANDOVER_STOPPED && h.tid == (__u32)tid;
}

struct ret_map {
	uint64_t addr;
	uint64_t ino;
	struct proc_map m;
};

static int map_of_ret(const struct proc_map *m, void *ctx)
{
	struct ret_map *r = ctx;

	if (m->inode != r->ino || r->addr < m->start || r->addr >= m->end)
		return 0;
	r->m = *m;
	return 1;
}

/*
 * The op whose call() called the trigger at h->ret (c10::Dispatcher::call
 * is inlined there), and the stack pointer its entry had: the stack-protector
 * check before its ret sees the body's stack, as the call did, so the
 * check's cookie rule gives it. 0 when the caller is no op of ours (a boxed
 * call), or the op has no such check: its exit then closes nothing.
 */
static int trigger_op(struct torchops *ops, pid_t pid, const struct op_lib *lib, const char *path,
		      const struct ptg_op_handover *h, struct ptg_event *e)
{
	const struct opscan *s = lib->scan;
	struct ret_map r = {.addr = h->ret, .ino = lib->ino};
	uint64_t bias, vaddr;
	size_t op;

	if (!h->ret || proc_maps__for_each(pid, map_of_ret, &r) != 1 ||
	    elf_load_bias(path, r.m.start, r.m.offset, &bias))
		return 0;
	vaddr = h->ret - bias;
	for (op = 0; op < s->nops; op++) {
		if (vaddr > s->ops[op].addr && vaddr <= s->ops[op].addr + s->ops[op].size)
			break;
	}
	if (op == s->nops)
		return 0;
	for (size_t i = 0; i < s->nsites; i++) {
		const struct opscan_site *site = &s->sites[i];

		if (site->op != op || site->site != PTG_OP_SITE_CHECK)
			continue;
		e->a = lib->base + op;
		e->b = (site->fp ? h->fp : h->sp) + (uint64_t)(int64_t)site->delta;
		return 1;
	}
	return 0;
}

static int probe_lib(struct torchops *ops, const struct proc_map *m, const char *attach_path);

/*
 * The agent did not take pid's ops: the op probes go on the libraries that
 * had the trigger alone, and (stopped) the op that stopped it is written as
 * its entry probe would have written it, from what the trigger saw.
 */
static int handover_probe(struct torchops *ops, pid_t pid, const struct ptg_op_handover *h,
			  bool stopped)
{
	struct ptg_event e = {0};
	int err = 0, found = 0;

	for (size_t i = 0; !err && i < ops->ntrigs; i++) {
		size_t nlibs = ops->nlibs;

		err = probe_lib(ops, &ops->trigs[i].m, ops->trigs[i].path);
		if (!err && stopped && !found && ops->nlibs > nlibs)
			found = trigger_op(ops, pid, &ops->libs[nlibs], ops->trigs[i].path, h, &e);
	}
	if (err || !found)
		return err;
	e.ts = h->ts;
	e.pid = (__u32)pid;
	e.tid = h->tid;
	e.kind = PTG_EV_OP_ENTER;
	e.cpu = (__u16)h->cpu;
	e.aux = PTG_OP_SITE_ENTRY;
	return handle_event(ops->t, ops, &e, sizeof(e));
}

/* The hand-over ends in state: the ops its other threads ran meanwhile are counted. */
static int handover_end(struct torchops *ops, pid_t pid, struct ptg_op_handover *h,
			enum ptg_op_handover_state state)
{
	int fd = bpf_map__fd(ops->skel->maps.handover);
	__u32 key = (__u32)pid;

	h->state = state;
	h->missed = 0;
	if (bpf_map_update_elem(fd, &key, h, BPF_ANY))
		return -errno;
	/* what op_trigger counted after the lookup before ours, up to the update */
	if (!bpf_map_lookup_elem(fd, &key, h))
		ops->handover_missed += h->missed;
	return 0;
}

int torchops__handover_done(struct torchops *ops, pid_t pid, bool agent)
{
	int fd = bpf_map__fd(ops->skel->maps.handover);
	struct ptg_op_handover h;
	__u32 key = (__u32)pid;
	int err;

	if (bpf_map_lookup_elem(fd, &key, &h))
		return -errno;
	ops->handover_missed += h.missed;
	if (agent) {
		/* its callback has every op from the one that stopped it on */
		torchops__in_process(ops, pid);
		return handover_end(ops, pid, &h, PTG_OP_HANDOVER_AGENT);
	}
	/* the probes keep it: in before the thread resumes, with the op that stopped it */
	err = handover_probe(ops, pid, &h, true);
	return handover_end(ops, pid, &h, PTG_OP_HANDOVER_OFF) ?: err;
}

/* The first op ran on a thread that could not stop for the agent: the probes go in. */
static int handover_unstopped(struct torchops *ops, pid_t pid, struct ptg_op_handover *h)
{
	int err;

	ops->handover_missed += h->missed;
	err = handover_probe(ops, pid, h, h->held);
	return handover_end(ops, pid, h, PTG_OP_HANDOVER_OFF) ?: err;
}

bool torchops__handover_thread_stopped(struct torchops *ops, pid_t pid, pid_t tid)
{
	struct ptg_op_handover h;
	__u32 key = (__u32)pid;

	return ops && !bpf_map_lookup_elem(bpf_map__fd(ops->skel->maps.handover), &key, &h) &&
	       h.state == PTG_OP_HANDOVER_UNSTOPPED && h.held && h.tid == (__u32)tid;
}

int torchops__handover_thread_done(struct torchops *ops, pid_t pid)
{
	struct ptg_op_handover h;
	__u32 key = (__u32)pid;

	if (bpf_map_lookup_elem(bpf_map__fd(ops->skel->maps.handover), &key, &h))
		return -errno;
	return handover_unstopped(ops, pid, &h);
}

int torchops__handover_poll(struct torchops *ops, pid_t pid)
{
	struct ptg_op_handover h;
	__u32 key = (__u32)pid;
	int err;

	/* a thread stopped for it is handled at its stop (torchops__handover_thread_done) */
	if (!ops || !ops->handover ||
	    bpf_map_lookup_elem(bpf_map__fd(ops->skel->maps.handover), &key, &h) ||
	    h.state != PTG_OP_HANDOVER_UNSTOPPED || h.held)
		return 0;
	err = handover_unstopped(ops, pid, &h);
	return err ?: 1;
}

void torchops__in_process(struct torchops *ops, pid_t pid)
{
	size_t n = 0;

	if (!ops)
		return;
	for (size_t i = 0; i < ops->npids; i++) {
		if (ops->pids[i] != pid)
			ops->pids[n++] = ops->pids[i];
	}
	ops->npids = n;
	ops->in_process = !n;
	for (size_t i = 0; i < ops->nlibs; i++)
		unprobe_pid(&ops->libs[i], pid);
}

int torchops__op(struct torchops *ops, uint32_t pid, uint32_t tid, uint64_t ts, bool enter,
		 uint64_t key, uint32_t sym)
{
	struct tracer_thread *th = tracer__thread(ops->t, pid, tid, ts);
	/* apart from the probes' op indexes, though the two never mix in one recording */
	uint64_t code = IN_PROCESS_CODE | sym;

	if (!th)
		return -ENOMEM;
	ops->st.callback_calls += enter;
	return enter ? op_enter(ops, th, key, code, sym, ts) : op_exit(ops, th, key, ANY_CODE, ts);
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct torchops *ops = ctx;
	int err = 0;

	for (int cpu = 0; !err && cpu < PTG_MAX_CPUS; cpu++) {
		if (ops->skel->bss->lost[cpu])
			err = trace_writer__lost(tracer__writer(t), PTG_LOST_OP_EVENT, cpu,
						 ops->skel->bss->lost[cpu]);
	}
	/* ops of other threads while one waited for the op agent: not per CPU */
	if (!err && ops->handover_missed)
		err = trace_writer__lost(tracer__writer(t), PTG_LOST_OP_EVENT, UINT32_MAX,
					 ops->handover_missed);
	return err;
}

KFEAT_SKEL_OPEN_VARIANT(torchops_bpf)

/*
 * The object as built, or before BPF cookies (5.15) and atomics (5.12) its
 * legacy build, which finds a site's cookie by its address; from 6.10 its
 * preempt build.
 */
static struct torchops_bpf *open_bpf(void)
{
	size_t size;
	const void *data;

	if (kfeat_cookies() && !kfeat_preempt_build())
		return torchops_bpf__open();
	data = kfeat_cookies() ? torchops_preempt_elf(&size) : torchops_legacy_elf(&size);
	return torchops_bpf__open_variant(data, size);
}

static int load(struct torchops *ops, bool multi, int traced_fd)
{
	int err;

	ops->skel = open_bpf();
	if (!ops->skel)
		return -errno;
	if (multi)
		err = bpf_program__set_expected_attach_type(ops->skel->progs.op_multi,
							    PTG_BPF_TRACE_UPROBE_MULTI);
	else
		err = bpf_program__set_autoload(ops->skel->progs.op_multi, false);
	ops->skel->rodata->filter_tgids = traced_fd >= 0;
	ops->skel->rodata->recorder_tgid = (__u32)getpid();
	err = err ?: bpf_map__reuse_fd(ops->skel->maps.events, tracer__ringbuf_fd(ops->t));
	if (!err && traced_fd >= 0)
		err = bpf_map__reuse_fd(ops->skel->maps.traced, traced_fd);
	err = err ?: torchops_bpf__load(ops->skel);
	if (!err && !kfeat_cookies())
		ops->cookies_fd = sitecookie_map(ops->skel->obj);
	if (err) {
		torchops_bpf__destroy(ops->skel);
		ops->skel = NULL;
	}
	ops->multi_loaded = multi && !err;
	return err;
}

/*
 * pid -1 with traced_fd: the processes of that set, probed on the files
 * they map, for pids (npids 0: every process)
 */
static int open_common(struct tracer *t, pid_t pid, int traced_fd, const pid_t *pids, size_t npids,
		       struct modpath *mp, bool quiet, struct torchops **out)
{
	struct torchops *ops;
	int err;

	ops = calloc(1, sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	ops->t = t;
	ops->pid = pid;
	ops->cookies_fd = -1;
	if (uprobe_pids(pid, pids, npids, &ops->pids, &ops->npids)) {
		free(ops);
		return -ENOMEM;
	}
	ops->mp = mp;
	ops->quiet = quiet;
	/* a kernel before 6.6 has no uprobe_multi: the per-site program then */
	err = load(ops, uprobe_multi_supported(), traced_fd);
	if (err) {
		log_libbpf_flush();
		pr_err("torchops: cannot load BPF programs: %s", strerror(-err));
		goto cleanup;
	}
	err = tracer__on(t, PTG_EV_OP_ENTER, PTG_EV_OP_EXIT, handle_event, write_losses, ops);
	if (err)
		goto cleanup;
	*out = ops;
	return 0;
cleanup:
	torchops__destroy(ops);
	return err;
}

int torchops__open(struct tracer *t, pid_t pid, struct modpath *mp, bool quiet,
		   struct torchops **out)
{
	return open_common(t, pid, -1, NULL, 0, mp, quiet, out);
}

int torchops__open_shared(struct tracer *t, int traced_fd, const pid_t *pids, size_t npids,
			  bool quiet, struct torchops **out)
{
	return open_common(t, -1, traced_fd, pids, npids, NULL, quiet, out);
}

void torchops__set_modpath(struct torchops *ops, struct modpath *mp)
{
	if (ops)
		ops->mp = mp;
}

static uint64_t site_cookie(const struct op_lib *lib, const struct opscan_site *site)
{
	return PTG_OP_COOKIE(lib->base + site->op, site->site, site->fp, site->delta);
}

static int attach_multi(struct torchops *ops, struct op_lib *lib, const char *path)
{
	const struct opscan *s = lib->scan;
	uint64_t *offsets, *cookies;
	int fd, *fds, err = 0;

	offsets = calloc(s->nsites, sizeof(*offsets));
	cookies = calloc(s->nsites, sizeof(*cookies));
	if (!offsets || !cookies) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t i = 0; i < s->nsites; i++) {
		offsets[i] = s->sites[i].offset;
		cookies[i] = site_cookie(lib, &s->sites[i]);
	}
	fds = calloc(ops->npids, sizeof(*fds));
	lib->link_pids = calloc(ops->npids, sizeof(*lib->link_pids));
	if (!fds || !lib->link_pids) {
		free(fds);
		err = -ENOMEM;
		goto cleanup;
	}
	lib->link_fds = fds;
	for (size_t i = 0; !err && i < ops->npids; i++) {
		pid_t pid = ops->pids[i];

		/* the pid filter covers all its threads: autograd's, the data loader's; 0: all */
		fd = uprobe_multi_attach(bpf_program__fd(ops->skel->progs.op_multi), path, offsets,
					 cookies, (uint32_t)s->nsites, false, pid < 0 ? 0 : pid);
		/* a process of a set that is gone: nothing of it to probe */
		if (fd == -ESRCH && ops->pid < 0)
			continue;
		if (fd < 0) {
			err = fd;
		} else {
			lib->link_pids[lib->nlink_fds] = pid;
			fds[lib->nlink_fds++] = fd;
		}
	}
	/* all or none: the fallback attaches one by one for every process */
	for (size_t i = 0; err && i < lib->nlink_fds; i++)
		close(lib->link_fds[i]);
	if (err) {
		free(lib->link_fds);
		free(lib->link_pids);
		lib->link_fds = NULL;
		lib->link_pids = NULL;
		lib->nlink_fds = 0;
	}
cleanup:
	free(offsets);
	free(cookies);
	return err;
}

/*
 * Each site a perf event: closing one waits for a grace period (0.1-0.2 s
 * on the VMs measured), so taking thousands out takes minutes. Said once,
 * before they go in, from one probe's close measured here.
 */
static void say_close_cost(struct torchops *ops, const struct opscan *s, const char *path)
{
	struct bpf_link *l;
	struct utsname u;
	uint64_t ns;

	/* an op index no event is taken for (handle_event()), should it fire meanwhile */
	LIBBPF_OPTS(bpf_uprobe_opts, opts,
		    .bpf_cookie = PTG_OP_COOKIE(UINT32_MAX, PTG_OP_SITE_ENTRY, 0, 0));

	if (ops->quiet || !s->nsites || ops->st.sites)
		return;
	l = bpf_program__attach_uprobe_opts(ops->skel->progs.op_single, ops->pids[0], path,
					    s->sites[0].offset, &opts);
	ns = uprobe_site_close_ns(l);
	if (!ns)
		return;
	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	pr_info("op probes: %zu sites without uprobe_multi (Linux %s): taking them out costs "
		"~%.0f s here (%.0f ms a site), once the trace is written; --no-ops avoids it",
		s->nsites * ops->npids, u.release, (double)(s->nsites * ops->npids) * ns / 1e9,
		ns / 1e6);
}

static int attach_each(struct torchops *ops, struct op_lib *lib, const char *path)
{
	const struct opscan *s = lib->scan;
	int err = 0;

	/* the legacy build: the cookies by site, before any of them can be hit */
	for (size_t i = 0; ops->cookies_fd >= 0 && i < s->nsites && !err; i++)
		err = sitecookie_put(ops->cookies_fd, lib->ino, s->sites[i].offset,
				     site_cookie(lib, &s->sites[i]));
	if (err)
		return err;
	lib->links = calloc(s->nsites * ops->npids, sizeof(*lib->links));
	lib->links_pid = calloc(s->nsites * ops->npids, sizeof(*lib->links_pid));
	if (!lib->links || !lib->links_pid)
		return -ENOMEM;
	say_close_cost(ops, s, path);
	for (size_t p = 0; p < ops->npids; p++) {
		for (size_t i = 0; i < s->nsites; i++) {
			LIBBPF_OPTS(bpf_uprobe_opts, opts,
				    .bpf_cookie =
					ops->cookies_fd < 0 ? site_cookie(lib, &s->sites[i]) : 0);
			struct bpf_link *l = bpf_program__attach_uprobe_opts(
			    ops->skel->progs.op_single, ops->pids[p], path, s->sites[i].offset,
			    &opts);

			/* a process of a set that is gone: nothing of it to probe */
			if (!l && errno == ESRCH && ops->pid < 0)
				break;
			if (!l)
				return -errno;
			lib->links_pid[lib->nlinks] = ops->pids[p];
			lib->links[lib->nlinks++] = l;
		}
	}
	return 0;
}

static int attach_lib(struct torchops *ops, struct op_lib *lib, const char *path)
{
	int err = -EOPNOTSUPP;

	if (ops->multi_loaded) {
		err = attach_multi(ops, lib, path);
		if (!err) {
			ops->st.multi = true;
			return 0;
		}
	}
	log_libbpf_discard();
	/* a kernel without uprobe_multi is no surprise: say_close_cost() says what it costs */
	if (ops->multi_loaded)
		pr_warn("torchops: no uprobe_multi link (%s): attaching %zu uprobes one by one",
			strerror(-err), lib->scan->nsites);
	return attach_each(ops, lib, path);
}

/* Adds the scanned library's ops to the global tables. */
static int add_lib(struct torchops *ops, struct opscan *scan, struct op_lib **out)
{
	size_t n = ops->nops + scan->nops;
	const char **names = realloc(ops->names, n * sizeof(*names));
	uint32_t *syms;
	struct op_lib *libs;

	if (!names)
		return -ENOMEM;
	ops->names = names;
	syms = realloc(ops->syms, n * sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	ops->syms = syms;
	libs = realloc(ops->libs, (ops->nlibs + 1) * sizeof(*libs));
	if (!libs)
		return -ENOMEM;
	ops->libs = libs;
	for (size_t i = 0; i < scan->nops; i++) {
		names[ops->nops + i] = scan->ops[i].name;
		syms[ops->nops + i] = 0;
	}
	*out = &libs[ops->nlibs++];
	**out = (struct op_lib){.scan = scan, .base = (uint32_t)ops->nops};
	return 0;
}

/* Undoes add_lib() for a library whose probes could not go in. */
static void drop_last_lib(struct torchops *ops)
{
	struct op_lib *lib = &ops->libs[--ops->nlibs];

	for (size_t j = 0; j < lib->nlinks; j++)
		bpf_link__destroy(lib->links[j]);
	free(lib->links);
	free(lib->links_pid);
	for (size_t j = 0; j < lib->nlink_fds; j++)
		close(lib->link_fds[j]);
	free(lib->link_fds);
	free(lib->link_pids);
	opscan__free(lib->scan);
}

static bool is_torch_lib(const char *path)
{
	const char *base = strrchr(path, '/');

	return base && !strncmp(base + 1, "libtorch", 8);
}

/*
 * record -- CMD: the hand-over's one probe on the library, 0; -ENOENT when
 * it has no trigger function (its op probes go in, as with --ops-from probes).
 */
static int attach_trigger(struct torchops *ops, const struct proc_map *m, const char *attach_path)
{
	struct elf_sym_info sym;
	struct elf_file *ef = NULL;
	struct op_trig *trigs, *tr;
	uint64_t off;
	int err;

	err = elf_file__open(attach_path, &ef);
	err = err ?: elf_file__find_sym(ef, TRIGGER_SYM, false, &sym);
	err = err ?: elf_file__vaddr_to_offset(ef, sym.addr, &off);
	elf_file__close(ef);
	if (err)
		return err;
	trigs = realloc(ops->trigs, (ops->ntrigs + 1) * sizeof(*trigs));
	if (!trigs)
		return -ENOMEM;
	ops->trigs = trigs;
	tr = &trigs[ops->ntrigs];
	*tr = (struct op_trig){.m = *m, .path = strdup(attach_path)};
	if (!tr->path)
		return -ENOMEM;
	tr->link = bpf_program__attach_uprobe_opts(ops->skel->progs.op_trigger, ops->pid,
						   attach_path, off, NULL);
	if (!tr->link) {
		err = -errno;
		free(tr->path);
		return err;
	}
	ops->ntrigs++;
	if (!ops->quiet)
		pr_debug("torchops: %s: the hand-over's one probe, at offset 0x%llx", m->path,
			 (unsigned long long)off);
	return 0;
}

int torchops__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias)
{
	struct torchops *ops = ctx;
	uint64_t *probed;

	(void)bias;
	if (!is_torch_lib(m->path))
		return 0;
	/* libtorch_cpu found on the search path is probed ahead: m->end is 0 then */
	ops->st.mapped += !!m->end;
	if (ops->in_process)
		return 0;
	probed = u64map__get(&ops->probed, m->inode);
	if (probed && *probed)
		return 0;
	/*
	 * Without uprobe_multi its thousands of sites are perf events that take
	 * minutes to close: not on a library that may never be mapped
	 */
	if (!m->end && !ops->handover && !ops->multi_loaded)
		return LIBWATCH_WHEN_MAPPED;
	if (u64map__put(&ops->probed, m->inode, 1))
		return -ENOMEM;
	/* -- CMD: one probe until the agent goes in, or does not (torchops__handover_done) */
	if (ops->handover && !attach_trigger(ops, m, attach_path))
		return 0;
	log_libbpf_discard();
	return probe_lib(ops, m, attach_path);
}

/* Scans the library and attaches its op probes. */
static int probe_lib(struct torchops *ops, const struct proc_map *m, const char *attach_path)
{
	struct opscan *scan = NULL;
	struct op_lib *lib;
	uint64_t t0;
	int err;

	err = opscan__run(attach_path, &scan);
	if (err || !scan->nops) {
		/* a library we cannot read is not worth ending the recording */
		opscan__free(scan);
		return 0;
	}
	err = add_lib(ops, scan, &lib);
	if (err) {
		opscan__free(scan);
		return err;
	}
	lib->ino = m->inode;
	t0 = now_ns(CLOCK_MONOTONIC);
	err = attach_lib(ops, lib, attach_path);
	/* of a set: the process it was found in is gone, another one may offer it again */
	if (ops->pid < 0 && (err == -ENOENT || err == -ESRCH)) {
		drop_last_lib(ops);
		return u64map__put(&ops->probed, m->inode, 0);
	}
	if (err) {
		log_libbpf_flush();
		pr_err("torchops: cannot attach to the ops of %s: %s", m->path, strerror(-err));
		return err;
	}
	/* only now may events name these ops */
	ops->nops += scan->nops;
	ops->st.libs++;
	ops->st.ops += scan->st.ops;
	ops->st.sites += (uint32_t)scan->nsites;
	ops->st.scan_ns += scan->st.elapsed_ns;
	ops->st.attach_ns += now_ns(CLOCK_MONOTONIC) - t0;
	if (!ops->quiet)
		pr_info("%u PyTorch ops of %s probed (%zu sites, %u of them single-stepped; "
			"scan %.2f s, attach %.3f s%s)",
			scan->st.ops, m->path, scan->nsites, scan->st.stepped,
			scan->st.elapsed_ns / 1e9, (now_ns(CLOCK_MONOTONIC) - t0) / 1e9,
			lib->link_fds ? ", uprobe_multi" : "");
	return 0;
}

void torchops__detach(struct torchops *ops)
{
	if (!ops)
		return;
	for (size_t i = 0; i < ops->ntrigs; i++) {
		teardown_link(ops->trigs[i].link);
		ops->trigs[i].link = NULL;
	}
	for (size_t i = 0; i < ops->nlibs; i++) {
		struct op_lib *lib = &ops->libs[i];

		for (size_t j = 0; j < lib->nlink_fds; j++)
			teardown_fd(lib->link_fds[j]);
		free(lib->link_fds);
		free(lib->link_pids);
		lib->link_fds = NULL;
		lib->link_pids = NULL;
		lib->nlink_fds = 0;
		for (size_t j = 0; j < lib->nlinks; j++)
			teardown_link(lib->links[j]);
		free(lib->links);
		free(lib->links_pid);
		lib->links = NULL;
		lib->links_pid = NULL;
		lib->nlinks = 0;
	}
}

void torchops__stats(const struct torchops *ops, struct torchops_stats *st)
{
	*st = ops->st;
	st->dropped = 0;
	for (int cpu = 0; ops->skel && cpu < PTG_MAX_CPUS; cpu++)
		st->dropped += ops->skel->bss->lost[cpu];
}

void torchops__destroy(struct torchops *ops)
{
	if (!ops)
		return;
	torchops__detach(ops);
	for (size_t i = 0; i < ops->nlibs; i++)
		opscan__free(ops->libs[i].scan);
	for (size_t i = 0; i < ops->ntrigs; i++)
		free(ops->trigs[i].path);
	free(ops->trigs);
	free(ops->libs);
	free(ops->names);
	free(ops->syms);
	u64map__free(&ops->probed);
	torchops_bpf__destroy(ops->skel);
	free(ops->pids);
	free(ops);
}
