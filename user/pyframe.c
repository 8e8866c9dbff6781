// SPDX-License-Identifier: MIT
/* Python frame probes: attach, consume, rebuild stacks, write records. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ptrace_gpu/events.h"
#include "elf_file.h"
#include "procfs.h"
#include "pycode.h"
#include "pyframe.h"
#include "pyframe.skel.h"
#include "u64map.h"
#include "uprobe_multi.h"

#define MAX_SITES 16

/* The probes of one process, or of the file in every process (pid -1). */
struct pyframe_att {
	pid_t pid;
	int fds[2];			       /* multi links: probe sites, eval loop return */
	struct bpf_link *links[MAX_SITES + 1]; /* one per site otherwise */
	int nlinks;
};

/* What is read from one process: its memory, and the names of its code objects. */
struct pyframe_proc {
	pid_t pid;
	int memfd;		 /* /proc/PID/mem, -1 if it cannot be opened */
	struct u64map code_syms; /* code object address -> fingerprint << 32 | symbol */
};

struct pyframe {
	struct pyframe_bpf *skel;
	bool multi;		  /* the kernel has multi-uprobe links */
	struct pyframe_att *atts; /* one per process probed, or one for the file (pid -1) */
	size_t natts;
	struct py_interp py;
	struct tracer *t;
	bool shared; /* for the processes of a traced set (pyframe__open_shared) */
	struct pyframe_proc *procs;
	size_t nprocs;
	size_t last;		  /* index + 1 of the previous event's process */
	struct pyframe_proc *cur; /* the process of the event being handled */
	uint64_t start_ts;	  /* probes attached after the recording started, else 0 */
	struct pyframe_stats st;
};

static const char *const loss_names[PTG_LOSS_NR_KINDS] = {
    [PTG_LOSS_PY_EVENT] = "py_event",	  [PTG_LOSS_PY_STACK] = "py_stack",
    [PTG_LOSS_PY_READ] = "py_frame_read", [PTG_LOSS_PY_DEPTH] = "py_stack_depth",
    [PTG_LOSS_PY_CODE] = "py_code_names",
};

/*
 * The cache key of a code object: its address (user addresses fit in 47
 * bits) with part of its fingerprint on top, so code objects that take turns
 * at one address (exec()'d functions that dataclasses makes and frees) keep
 * their own entries. The value holds the whole fingerprint << 32 | symbol.
 */
static uint64_t code_key(uint64_t code, uint32_t fingerprint)
{
	return code | (uint64_t)(fingerprint & 0xffff) << 48;
}

/* Symbol of a code object, read once per (address, fingerprint). */
static uint32_t resolve_code(struct pyframe *pf, struct pyframe_proc *p, uint64_t code,
			     uint32_t fingerprint)
{
	struct py_code_info ci;
	uint64_t *cached;
	uint32_t sym;

	cached = u64map__get(&p->code_syms, code_key(code, fingerprint));
	if (cached && (uint32_t)(*cached >> 32) == fingerprint)
		return (uint32_t)*cached;
	if (code && p->memfd >= 0 && py_read_code(p->memfd, pf->py.info, code, &ci) == 0 &&
	    ci.fingerprint == fingerprint) {
		sym = trace_writer__sym(tracer__writer(pf->t), PTG_SYM_PY_FUNC, ci.qualname,
					ci.filename, ci.firstlineno);
	} else {
		/* freed (or the process exited) before it could be read */
		snprintf(ci.qualname, sizeof(ci.qualname), "<unknown code %#llx>",
			 (unsigned long long)code);
		sym = trace_writer__sym(tracer__writer(pf->t), PTG_SYM_PY_FUNC, ci.qualname, "", 0);
		pf->st.unresolved++;
	}
	if (code)
		u64map__put(&p->code_syms, code_key(code, fingerprint),
			    (uint64_t)fingerprint << 32 | sym);
	return sym;
}

/* Names the BPF side read at the first sight of a code object. */
static int learn_code(struct pyframe *pf, struct pyframe_proc *p, const struct ptg_code_event *c)
{
	char name[PTG_CODE_NAME_BYTES * 3 + 1], file[PTG_CODE_FILE_BYTES * 3 + 1];
	uint32_t sym;

	if (!c->name_width || !c->file_width)
		return 0; /* resolve_code() reads /proc/PID/mem when the code is used */
	py_decode_chars(c->name, c->name_width, c->name_chars, name, sizeof(name));
	py_decode_chars(c->file, c->file_width, c->file_chars, file, sizeof(file));
	sym = trace_writer__sym(tracer__writer(pf->t), PTG_SYM_PY_FUNC, name, file,
				(uint32_t)c->hdr.b);
	return u64map__put(&p->code_syms, code_key(c->hdr.a, c->hdr.aux),
			   (uint64_t)c->hdr.aux << 32 | sym);
}

static int push(struct pyframe *pf, struct tracer_thread *th, uint64_t frame, uint64_t code,
		uint32_t fingerprint, uint64_t local0, uint64_t ts, uint16_t flags)
{
	struct tracer_slot slot = {
	    .key = frame,
	    .code = code,
	    .fingerprint = fingerprint,
	    .kind = PTG_REC_PY_ENTER,
	    .local0 = local0,
	};

	return tracer__push(pf->t, th, &slot, resolve_code(pf, pf->cur, code, fingerprint), flags,
			    ts);
}

/*
 * A frame starts or resumes on top of `previous`: frames above it must have
 * left without an event we saw (an uretprobe beyond its nesting limit).
 */
static bool is_frame(const struct tracer_slot *s)
{
	return s->kind == PTG_REC_PY_ENTER || s->kind == TRACER_SLOT_HIDDEN;
}

/* Depth (index + 1) of the innermost frame (shown or hidden) at frame address key, 0 if none. */
static uint32_t find_frame(const struct tracer_thread *th, uint64_t key)
{
	for (uint32_t i = th->depth; i > 0; i--) {
		if (th->stack[i - 1].key == key && is_frame(&th->stack[i - 1]))
			return i;
	}
	return 0;
}

/* Depth (index + 1) of the innermost frame above depth from, 0 if none. */
static uint32_t python_above(const struct tracer_thread *th, uint32_t from)
{
	for (uint32_t i = th->depth; i > from; i--) {
		if (is_frame(&th->stack[i - 1]))
			return i;
	}
	return 0;
}

/*
 * The caller of a new frame is a frame we never saw start: one that runs no
 * RESUME, such as the cleanup frame 3.13+ push under an __init__ called
 * through CALL_ALLOC_AND_ENTER_INIT (EXIT_INIT_CHECK, RETURN_VALUE). It will
 * return like any frame; keep it on the stack, unrecorded, so that its
 * return pops it and not its caller.
 */
static int push_hidden(struct pyframe *pf, struct tracer_thread *th, uint64_t frame)
{
	struct tracer_slot slot = {.key = frame, .kind = TRACER_SLOT_HIDDEN};

	pf->st.hidden++;
	return tracer__push(pf->t, th, &slot, 0, 0, 0);
}

static int enter(struct pyframe *pf, struct tracer_thread *th, const struct ptg_event *e,
		 uint16_t flags)
{
	const struct tracer_slot *top = th->depth ? &th->stack[th->depth - 1] : NULL;
	uint32_t at;
	int err = 0;

	/*
	 * The frame already on top, with no exit in between: the same RESUME
	 * dispatched again, not a new call. 3.12+ do that when a code object's
	 * instrumentation is out of date (after any sys.monitoring, settrace or
	 * setprofile in the process): RESUME re-instruments it and jumps back to
	 * the instruction. A new frame at the same address needs the old one's
	 * exit first, and that pops it.
	 */
	if (top && top->kind == PTG_REC_PY_ENTER && top->key == e->a && top->code == e->b) {
		pf->st.redispatched++;
		return 0;
	}
	at = e->d ? find_frame(th, e->d) : 0;
	if (at || !e->d)
		err = tracer__pop_to(pf->t, th, at, e->ts, PTG_F_EXIT_UNWIND);
	else
		err = push_hidden(pf, th, e->d);
	return err ?: push(pf, th, e->a, e->b, e->aux, e->c, e->ts, flags);
}

/*
 * A return or yield. The event names the thread's current frame as the
 * probe saw it, and where the probe sits in the handler decides which
 * that is: before the handler makes the caller current, the leaving frame
 * itself (the innermost on our stack); after, its caller, with the leaving
 * frame the innermost one above it; on 3.12+, after an entry frame made the
 * C-stack shim current, 0 (the BPF side does not name shims), and the
 * leaving frame is the innermost. The probe site is fixed per build, and a
 * frame is never left without an event (or a resync after a loss), so this
 * is exact.
 */
static int leave(struct pyframe *pf, struct tracer_thread *th, const struct ptg_event *e,
		 uint16_t flags)
{
	uint32_t at = e->a ? find_frame(th, e->a) : 0;
	uint32_t above = python_above(th, at);

	if (e->a && !at) {
		pf->st.unmatched++;
		return 0;
	}
	if (above)
		at = above;
	if (!at) {
		pf->st.unmatched++;
		return 0;
	}
	return tracer__pop_to(pf->t, th, at, e->ts, PTG_F_EXIT_UNWIND)
		   ?: tracer__pop_to(pf->t, th, at - 1, e->ts, flags);
}

/* An exception reached frame e->a: everything above it has exited. */
static int unwind(struct pyframe *pf, struct tracer_thread *th, const struct ptg_event *e)
{
	uint32_t at = e->a ? find_frame(th, e->a) : 0;

	if (e->a && !at)
		return 0;
	return tracer__pop_to(pf->t, th, at, e->ts, PTG_F_EXIT_UNWIND);
}

/*
 * The snapshot is the truth about the thread's stack before the event that
 * follows it: keep the common outer part, close what differs, open the rest.
 */
static int apply_snapshot(struct pyframe *pf, struct tracer_thread *th,
			  const struct ptg_stack_event *s)
{
	uint32_t n =
	    s->hdr.a < PTG_MAX_SNAPSHOT_DEPTH ? (uint32_t)s->hdr.a : PTG_MAX_SNAPSHOT_DEPTH;
	bool first = s->hdr.aux == PTG_SNAP_FIRST;
	uint64_t born = tracer__proc_born(pf->t, s->hdr.pid);
	uint64_t ts = first ? (pf->start_ts ?: tracer__start_ts(pf->t)) : s->hdr.ts;
	uint32_t common = 0, py = 0;
	int err;

	/* a process forked while recording: its frames were open from its start */
	if (first && born > ts)
		ts = born;
	/* compare the Python frames only: ops in between stay if their frames do */
	while (common < th->depth && py < n) {
		const struct tracer_slot *slot = &th->stack[common];
		const struct ptg_frame_ref *f = &s->frames[n - 1 - py];

		if (slot->kind == PTG_REC_PY_ENTER) {
			if (slot->key != f->frame || slot->code != f->code ||
			    slot->fingerprint != f->fingerprint)
				break;
			py++;
		}
		common++;
	}
	err = tracer__pop_to(pf->t, th, common, s->hdr.ts, PTG_F_EXIT_LOST);
	for (uint32_t i = py; !err && i < n; i++) {
		const struct ptg_frame_ref *f = &s->frames[n - 1 - i];

		err = push(pf, th, f->frame, f->code, f->fingerprint, f->local0, ts,
			   PTG_F_ENTER_PREEXISTING);
	}
	return err;
}

static struct pyframe_proc *new_proc(struct pyframe *pf, pid_t pid)
{
	struct pyframe_proc *n, *p;
	char path[64];

	n = realloc(pf->procs, (pf->nprocs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	pf->procs = n;
	p = &pf->procs[pf->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	/* names come with the events (PY_CODE); the memory is only read for the rest */
	p->memfd = open(path, O_RDONLY | O_CLOEXEC);
	return p;
}

/* The state of process pid, made at its first event. */
static struct pyframe_proc *proc_of(struct pyframe *pf, pid_t pid)
{
	if (pf->last && pf->procs[pf->last - 1].pid == pid)
		return &pf->procs[pf->last - 1];
	for (size_t i = 0; i < pf->nprocs; i++) {
		if (pf->procs[i].pid == pid) {
			pf->last = i + 1;
			return &pf->procs[i];
		}
	}
	if (!new_proc(pf, pid))
		return NULL;
	pf->last = pf->nprocs;
	return &pf->procs[pf->nprocs - 1];
}

static void free_proc(struct pyframe_proc *p)
{
	if (p->memfd >= 0)
		close(p->memfd);
	u64map__free(&p->code_syms);
}

void pyframe__forget(struct pyframe *pf, pid_t pid)
{
	for (size_t i = 0; pf && i < pf->nprocs; i++) {
		if (pf->procs[i].pid != pid)
			continue;
		free_proc(&pf->procs[i]);
		pf->procs[i] = pf->procs[--pf->nprocs];
		pf->last = 0;
		return;
	}
}

int pyframe__handle(struct pyframe *pf, const struct ptg_event *e, size_t size)
{
	struct tracer_thread *t;
	int err = 0;

	pf->cur = proc_of(pf, (pid_t)e->pid);
	t = tracer__thread(pf->t, e->pid, e->tid, e->ts);
	if (!t || !pf->cur)
		return -ENOMEM;
	switch (e->kind) {
	case PTG_EV_PY_STACK:
		if (size >= sizeof(struct ptg_stack_event))
			err = apply_snapshot(pf, t, (const struct ptg_stack_event *)e);
		break;
	case PTG_EV_PY_CODE:
		if (size >= sizeof(struct ptg_code_event))
			err = learn_code(pf, pf->cur, (const struct ptg_code_event *)e);
		break;
	case PTG_EV_PY_START:
		err = enter(pf, t, e, PTG_F_ENTER_CALL);
		break;
	case PTG_EV_PY_RESUME:
		err = enter(pf, t, e, PTG_F_ENTER_RESUME);
		break;
	case PTG_EV_PY_RETURN:
		err = leave(pf, t, e, PTG_F_EXIT_RETURN);
		break;
	case PTG_EV_PY_YIELD:
		err = leave(pf, t, e, PTG_F_EXIT_YIELD);
		break;
	case PTG_EV_PY_UNWIND:
		err = unwind(pf, t, e);
		break;
	}
	return err;
}

static int handle_event(struct tracer *tr, void *ctx, const struct ptg_event *e, size_t size)
{
	(void)tr;
	return pyframe__handle(ctx, e, size);
}

int pyframe__write_losses(struct pyframe *pf)
{
	const struct pyframe_bpf__bss *bss = pf->skel->bss;
	struct trace_writer *w = tracer__writer(pf->t);
	int err = 0;

	for (int cpu = 0; !err && cpu < PTG_MAX_CPUS; cpu++) {
		for (int k = 0; !err && k < PTG_LOSS_NR_KINDS; k++) {
			uint64_t n = bss->losses[cpu][k];

			if (n && loss_names[k])
				err = trace_writer__loss(w, loss_names[k], cpu, n);
		}
	}
	if (!err && pf->st.unresolved)
		err = trace_writer__loss(w, "py_code_unresolved", UINT32_MAX, pf->st.unresolved);
	if (!err && pf->st.unmatched)
		err = trace_writer__loss(w, "py_unmatched_exit", UINT32_MAX, pf->st.unmatched);
	return err;
}

static int write_losses(struct tracer *t, void *ctx)
{
	(void)t;
	return pyframe__write_losses(ctx);
}

static int open_common(const struct py_interp *py, struct tracer *t, int traced_fd,
		       struct pyframe **out)
{
	struct pyframe *pf;
	int err;

	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	pf->py = *py;
	pf->t = t;
	pf->shared = traced_fd >= 0;
	if (!pf->shared) {
		struct pyframe_proc *p = new_proc(pf, py->pid);

		if (!p) {
			err = -ENOMEM;
			goto cleanup;
		}
		if (p->memfd < 0) {
			err = -errno;
			fprintf(stderr, "pyframe: cannot open /proc/%d/mem: %s\n", py->pid,
				strerror(errno));
			goto cleanup;
		}
	}
	pf->skel = pyframe_bpf__open();
	if (!pf->skel) {
		err = -errno;
		fprintf(stderr, "pyframe: cannot open BPF object: %s\n", strerror(errno));
		goto cleanup;
	}
	pf->skel->rodata->off = py->info->off;
	err = py_offsets_blocks(&pf->skel->rodata->off, py->info->code_adaptive);
	if (err) {
		fprintf(stderr, "pyframe: Python %s's structs do not fit the BPF read buffers\n",
			py->info->name);
		goto cleanup;
	}
	pf->skel->rodata->runtime_addr = py->runtime_addr;
	memcpy((void *)pf->skel->rodata->resume_ops, py->ops.resume, sizeof(py->ops.resume));
	pf->skel->rodata->resume_where_mask = py->info->resume_where_mask;
	pf->skel->rodata->resume_not_a_call = py->info->resume_not_a_call;
	pf->multi = uprobe_multi_supported();
	if (pf->multi) {
		bpf_program__set_expected_attach_type(pf->skel->progs.py_probe,
						      PTG_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(pf->skel->progs.py_eval_ret,
						      PTG_BPF_TRACE_UPROBE_MULTI);
	}
	pf->skel->rodata->filter_tgids = pf->shared;
	err = bpf_map__reuse_fd(pf->skel->maps.events, tracer__ringbuf_fd(t));
	if (!err && pf->shared)
		err = bpf_map__reuse_fd(pf->skel->maps.traced, traced_fd);
	if (!err)
		err = pyframe_bpf__load(pf->skel);
	if (err) {
		fprintf(stderr, "pyframe: cannot load BPF programs: %s\n", strerror(-err));
		goto cleanup;
	}
	*out = pf;
	return 0;
cleanup:
	pyframe__destroy(pf);
	return err;
}

int pyframe__open(const struct py_interp *py, struct tracer *t, struct pyframe **out)
{
	int err = open_common(py, t, -1, out);

	if (err)
		return err;
	err = tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, write_losses, *out);
	if (err) {
		pyframe__destroy(*out);
		*out = NULL;
	}
	return err;
}

int pyframe__open_shared(const struct py_interp *py, struct tracer *t, int traced_fd,
			 struct pyframe **out)
{
	return open_common(py, t, traced_fd, out);
}

const struct py_interp *pyframe__interp(const struct pyframe *pf)
{
	return &pf->py;
}

/*
 * With probes on the file (shared), each cookie also says where _PyRuntime
 * is from the site (PTG_PY_COOKIE): link-time addresses, so the same for
 * every process that maps the file.
 */
static int add_deltas(const struct py_interp *py, const uint64_t *offs, uint64_t *cookies, int n)
{
	uint64_t runtime = py->runtime_addr - py->bias, vmo;
	struct elf_file *ef;
	int err;

	err = elf_file__open(py->attach_path, &ef);
	if (err)
		return err;
	for (int i = 0; !err && i < n; i++) {
		err = elf_file__segment_bias(ef, offs[i], &vmo);
		cookies[i] = PTG_PY_COOKIE(cookies[i], (int64_t)(runtime - (offs[i] + vmo)));
	}
	elf_file__close(ef);
	return err;
}

/* The probe sites of the interpreter and what each does (its BPF cookie). */
static int probe_sites(const struct py_interp *py, uint64_t *offs, uint64_t *cookies)
{
	int n = 0;

	for (int i = 0; i < py->nresume; i++, n++) {
		offs[n] = py->resume_offs[i];
		cookies[n] = PTG_PY_PROBE_RESUME;
	}
	for (int i = 0; i < py->nreturn; i++, n++) {
		offs[n] = py->return_offs[i];
		cookies[n] = PTG_PY_PROBE_RETURN;
	}
	for (int i = 0; i < py->nyield; i++, n++) {
		offs[n] = py->yield_offs[i];
		cookies[n] = PTG_PY_PROBE_YIELD;
	}
	offs[n] = py->traceback_off;
	cookies[n++] = PTG_PY_PROBE_TRACEBACK;
	return n;
}

static int attach_one(struct pyframe_att *a, const char *path, struct bpf_program *prog, bool ret,
		      uint64_t off, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret, .bpf_cookie = cookie);
	struct bpf_link *link;

	if (a->nlinks == MAX_SITES + 1)
		return -E2BIG;
	link = bpf_program__attach_uprobe_opts(prog, a->pid, path, off, &opts);
	if (!link)
		return -errno;
	a->links[a->nlinks++] = link;
	return 0;
}

static int attach_multi(struct pyframe *pf, struct pyframe_att *a, const uint64_t *offs,
			const uint64_t *cookies, int n, uint64_t eval_cookie)
{
	struct pyframe_bpf *s = pf->skel;
	const char *path = pf->py.attach_path;
	pid_t pid = a->pid < 0 ? 0 : a->pid; /* uprobe_multi: 0 is every process */
	int fd;

	fd = uprobe_multi_attach(bpf_program__fd(s->progs.py_probe), path, offs, cookies,
				 (uint32_t)n, false, pid);
	if (fd < 0)
		return fd;
	a->fds[0] = fd;
	fd = uprobe_multi_attach(bpf_program__fd(s->progs.py_eval_ret), path, &pf->py.eval_off,
				 &eval_cookie, 1, true, pid);
	if (fd < 0)
		return fd;
	a->fds[1] = fd;
	return 0;
}

static int attach_probes(struct pyframe *pf, struct pyframe_att *a)
{
	uint64_t offs[MAX_SITES + 1], cookies[MAX_SITES + 1];
	int n = probe_sites(&pf->py, offs, cookies), err = 0;

	/* the eval loop's return probe last, with a cookie of its own */
	offs[n] = pf->py.eval_off;
	cookies[n] = 0;
	if (pf->shared)
		err = add_deltas(&pf->py, offs, cookies, n + 1);
	if (err)
		return err; /* cannot be: the interpreter's finder read the sites from this file */
	if (pf->multi)
		return attach_multi(pf, a, offs, cookies, n, cookies[n]);
	for (int i = 0; !err && i < n; i++)
		err = attach_one(a, pf->py.attach_path, pf->skel->progs.py_probe, false, offs[i],
				 cookies[i]);
	/* C code calls the eval loop, no C++ exception unwinds through it: a uretprobe is safe */
	return err
		   ?: attach_one(a, pf->py.attach_path, pf->skel->progs.py_eval_ret, true, offs[n],
				 cookies[n]);
}

static int attach_tracepoints(struct pyframe *pf)
{
	struct pyframe_bpf *s = pf->skel;

	if (!s->links.py_thread_exit &&
	    !(s->links.py_thread_exit = bpf_program__attach(s->progs.py_thread_exit)))
		return -errno;
	if (!s->links.py_exec && !(s->links.py_exec = bpf_program__attach(s->progs.py_exec)))
		return -errno;
	return 0;
}

int pyframe__attach_pid(struct pyframe *pf, pid_t pid)
{
	struct pyframe_att *n;
	int err;

	for (size_t i = 0; i < pf->natts; i++) {
		if (pf->atts[i].pid == pid || pf->atts[i].pid < 0)
			return 0;
	}
	n = realloc(pf->atts, (pf->natts + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	pf->atts = n;
	n = &pf->atts[pf->natts++];
	*n = (struct pyframe_att){.pid = pid, .fds = {-1, -1}};
	err = attach_probes(pf, n) ?: attach_tracepoints(pf);
	if (err)
		fprintf(stderr, "pyframe: cannot attach probes to %s: %s\n", pf->py.path,
			strerror(-err));
	return err;
}

void pyframe__set_start_ts(struct pyframe *pf, uint64_t ts)
{
	pf->start_ts = ts;
}

int pyframe__attach(struct pyframe *pf)
{
	return pyframe__attach_pid(pf, pf->py.pid);
}

void pyframe__detach(struct pyframe *pf)
{
	if (!pf)
		return;
	for (size_t i = 0; i < pf->natts; i++) {
		struct pyframe_att *a = &pf->atts[i];

		for (int j = 0; j < 2; j++) {
			if (a->fds[j] >= 0)
				close(a->fds[j]);
		}
		for (int j = 0; j < a->nlinks; j++)
			bpf_link__destroy(a->links[j]);
	}
	free(pf->atts);
	pf->atts = NULL;
	pf->natts = 0;
	if (!pf->skel)
		return;
	bpf_link__destroy(pf->skel->links.py_thread_exit);
	pf->skel->links.py_thread_exit = NULL;
	bpf_link__destroy(pf->skel->links.py_exec);
	pf->skel->links.py_exec = NULL;
}

void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st)
{
	const struct pyframe_bpf__bss *bss;

	*st = (struct pyframe_stats){};
	if (!pf)
		return; /* no Python in the target */
	bss = pf->skel->bss;
	*st = pf->st;
	st->dropped = 0;
	for (int cpu = 0; cpu < PTG_MAX_CPUS; cpu++)
		st->dropped +=
		    bss->losses[cpu][PTG_LOSS_PY_EVENT] + bss->losses[cpu][PTG_LOSS_PY_STACK];
}

void pyframe__destroy(struct pyframe *pf)
{
	if (!pf)
		return;
	pyframe__detach(pf);
	pyframe_bpf__destroy(pf->skel);
	for (size_t i = 0; i < pf->nprocs; i++)
		free_proc(&pf->procs[i]);
	free(pf->procs);
	free(pf);
}
