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
#include "procfs.h"
#include "pycode.h"
#include "pyframe.h"
#include "pyframe.skel.h"
#include "u64map.h"

#define MAX_LINKS 16

struct py_slot {
	uint64_t frame;
	uint64_t code;
	uint32_t fingerprint;
};

struct pythread {
	uint32_t pid;
	uint32_t tid;
	struct py_slot *stack;
	uint32_t depth;
	uint32_t cap;
};

struct pyframe {
	struct pyframe_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *links[MAX_LINKS];
	int nlinks;
	struct py_interp py;
	struct trace_writer *w;
	int memfd;
	int err; /* first error of the ring buffer callback */
	uint64_t start_ts;
	uint64_t last_ts;
	struct u64map code_syms; /* code object address -> symbol id */
	struct u64map tids;	 /* tid -> index + 1 in threads */
	struct pythread *threads;
	size_t nthreads;
	size_t last; /* index + 1 of the thread of the previous event */
	struct pyframe_stats st;
};

static const char *const loss_names[PTG_LOSS_NR_KINDS] = {
	[PTG_LOSS_PY_EVENT] = "py_event",
	[PTG_LOSS_PY_STACK] = "py_stack",
	[PTG_LOSS_PY_READ] = "py_frame_read",
	[PTG_LOSS_PY_DEPTH] = "py_stack_depth",
};

/*
 * Symbol of a code object, read once per (address, fingerprint). The cache
 * holds fingerprint << 32 | symbol, so a new code object at a freed one's
 * address is read again.
 */
static uint32_t resolve_code(struct pyframe *pf, uint64_t code, uint32_t fingerprint)
{
	struct py_code_info ci;
	uint64_t *cached;
	uint32_t sym;

	cached = u64map__get(&pf->code_syms, code);
	if (cached && (uint32_t)(*cached >> 32) == fingerprint)
		return (uint32_t)*cached;
	if (code && py_read_code(pf->memfd, pf->py.info, code, &ci) == 0 &&
	    ci.fingerprint == fingerprint) {
		sym = trace_writer__sym(pf->w, PTG_SYM_PY_FUNC, ci.qualname, ci.filename,
					ci.firstlineno);
	} else {
		/* freed (or the process exited) before it could be read */
		snprintf(ci.qualname, sizeof(ci.qualname), "<unknown code %#llx>",
			 (unsigned long long)code);
		sym = trace_writer__sym(pf->w, PTG_SYM_PY_FUNC, ci.qualname, "", 0);
		pf->st.unresolved++;
	}
	if (code)
		u64map__put(&pf->code_syms, code, (uint64_t)fingerprint << 32 | sym);
	return sym;
}

static int write_rec(struct pyframe *pf, const struct pythread *t, uint16_t kind,
		     uint16_t flags, uint32_t sym, uint64_t ts)
{
	struct ptg_record r = {
		.kind = kind, .flags = flags, .pid = t->pid, .tid = t->tid, .sym = sym, .ts = ts,
	};

	return trace_writer__record(pf->w, &r);
}

static struct pythread *new_thread(struct pyframe *pf, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct pythread *n, *t;
	char comm[64];

	n = realloc(pf->threads, (pf->nthreads + 1) * sizeof(*n));
	if (!n)
		return NULL;
	pf->threads = n;
	t = &pf->threads[pf->nthreads++];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->tid = tid;
	if (u64map__put(&pf->tids, tid, pf->nthreads))
		return NULL;
	if (proc_comm(pid, tid, comm, sizeof(comm)) == 0)
		write_rec(pf, t, PTG_REC_THREAD, 0,
			  trace_writer__sym(pf->w, PTG_SYM_STRING, comm, "", 0), ts);
	return t;
}

static struct pythread *thread_of(struct pyframe *pf, const struct ptg_event *e)
{
	uint64_t *idx;

	if (pf->last && pf->threads[pf->last - 1].tid == e->tid)
		return &pf->threads[pf->last - 1];
	idx = u64map__get(&pf->tids, e->tid);
	if (idx) {
		pf->last = *idx;
		return &pf->threads[*idx - 1];
	}
	if (!new_thread(pf, e->pid, e->tid, e->ts))
		return NULL;
	pf->last = pf->nthreads;
	return &pf->threads[pf->nthreads - 1];
}

static int push(struct pyframe *pf, struct pythread *t, uint64_t frame, uint64_t code,
		uint32_t fingerprint, uint64_t ts, uint16_t flags)
{
	if (t->depth == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		struct py_slot *n = realloc(t->stack, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->stack = n;
		t->cap = cap;
	}
	t->stack[t->depth].frame = frame;
	t->stack[t->depth].code = code;
	t->stack[t->depth++].fingerprint = fingerprint;
	if (!(flags & PTG_F_ENTER_RESUME))
		pf->st.calls++;
	return write_rec(pf, t, PTG_REC_PY_ENTER, flags, resolve_code(pf, code, fingerprint),
			 ts);
}

/* Pops frames until depth `keep` remains. */
static int pop_to(struct pyframe *pf, struct pythread *t, uint32_t keep, uint64_t ts,
		  uint16_t flags)
{
	int err = 0;

	while (!err && t->depth > keep) {
		t->depth--;
		err = write_rec(pf, t, PTG_REC_PY_EXIT, flags, 0, ts);
	}
	return err;
}

/* Depth at which frame sits (index + 1), 0 when it is not on the stack. */
static uint32_t find_frame(const struct pythread *t, uint64_t frame)
{
	for (uint32_t i = t->depth; i > 0; i--) {
		if (t->stack[i - 1].frame == frame)
			return i;
	}
	return 0;
}

/*
 * A frame starts or resumes on top of `previous`: frames above it must have
 * left without an event we saw (an uretprobe beyond its nesting limit).
 */
static int enter(struct pyframe *pf, struct pythread *t, const struct ptg_event *e,
		 uint16_t flags)
{
	uint32_t at = e->d ? find_frame(t, e->d) : 0;
	int err = 0;

	if (at || !e->d)
		err = pop_to(pf, t, at, e->ts, PTG_F_EXIT_UNWIND);
	return err ?: push(pf, t, e->a, e->b, e->aux, e->ts, flags);
}

static int leave(struct pyframe *pf, struct pythread *t, const struct ptg_event *e,
		 uint16_t flags)
{
	uint32_t at = find_frame(t, e->a);

	if (!at) {
		pf->st.unmatched++;
		return 0;
	}
	return pop_to(pf, t, at, e->ts, PTG_F_EXIT_UNWIND) ?:
	       pop_to(pf, t, at - 1, e->ts, flags);
}

/* An exception reached frame e->a: everything above it has exited. */
static int unwind(struct pyframe *pf, struct pythread *t, const struct ptg_event *e)
{
	uint32_t at = e->a ? find_frame(t, e->a) : 0;

	if (e->a && !at)
		return 0;
	return pop_to(pf, t, at, e->ts, PTG_F_EXIT_UNWIND);
}

/*
 * The snapshot is the truth about the thread's stack before the event that
 * follows it: keep the common outer part, close what differs, open the rest.
 */
static int apply_snapshot(struct pyframe *pf, struct pythread *t, const struct ptg_stack_event *s)
{
	uint32_t n = s->hdr.a < PTG_MAX_SNAPSHOT_DEPTH ? (uint32_t)s->hdr.a : PTG_MAX_SNAPSHOT_DEPTH;
	bool first = s->hdr.aux == PTG_SNAP_FIRST;
	uint64_t ts = first ? pf->start_ts : s->hdr.ts;
	uint32_t common = 0;
	int err;

	while (common < n && common < t->depth &&
	       t->stack[common].frame == s->frames[n - 1 - common].frame &&
	       t->stack[common].code == s->frames[n - 1 - common].code &&
	       t->stack[common].fingerprint == s->frames[n - 1 - common].fingerprint)
		common++;
	err = pop_to(pf, t, common, s->hdr.ts, PTG_F_EXIT_LOST);
	for (uint32_t i = common; !err && i < n; i++) {
		const struct ptg_frame_ref *f = &s->frames[n - 1 - i];

		err = push(pf, t, f->frame, f->code, f->fingerprint, ts, PTG_F_ENTER_PREEXISTING);
	}
	return err;
}

static int handle_event(void *ctx, void *data, size_t size)
{
	const struct ptg_event *e = data;
	struct pyframe *pf = ctx;
	struct pythread *t;
	int err = 0;

	if (size < sizeof(*e) || pf->err)
		return 0;
	pf->st.events++;
	if (e->ts > pf->last_ts)
		pf->last_ts = e->ts;
	t = thread_of(pf, e);
	if (!t) {
		pf->err = -ENOMEM;
		return 0;
	}
	switch (e->kind) {
	case PTG_EV_PY_STACK:
		if (size >= sizeof(struct ptg_stack_event))
			err = apply_snapshot(pf, t, data);
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
	if (err)
		pf->err = err;
	return 0;
}

int pyframe__open(const struct py_interp *py, struct trace_writer *w, unsigned int ringbuf_mb,
		  uint64_t start_ts, struct pyframe **out)
{
	struct pyframe *pf;
	char path[64];
	int err;

	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	pf->memfd = -1;
	pf->py = *py;
	pf->w = w;
	pf->start_ts = start_ts;
	snprintf(path, sizeof(path), "/proc/%d/mem", py->pid);
	pf->memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (pf->memfd < 0) {
		err = -errno;
		fprintf(stderr, "pyframe: cannot open %s: %s\n", path, strerror(errno));
		goto cleanup;
	}
	pf->skel = pyframe_bpf__open();
	if (!pf->skel) {
		err = -errno;
		fprintf(stderr, "pyframe: cannot open BPF object: %s\n", strerror(errno));
		goto cleanup;
	}
	pf->skel->rodata->off = py->info->off;
	pf->skel->rodata->runtime_addr = py->runtime_addr;
	err = bpf_map__set_max_entries(pf->skel->maps.events, ringbuf_mb << 20);
	if (!err)
		err = pyframe_bpf__load(pf->skel);
	if (err) {
		fprintf(stderr, "pyframe: cannot load BPF programs: %s\n", strerror(-err));
		goto cleanup;
	}
	pf->rb = ring_buffer__new(bpf_map__fd(pf->skel->maps.events), handle_event, pf, NULL);
	if (!pf->rb) {
		err = -errno;
		fprintf(stderr, "pyframe: cannot create ring buffer: %s\n", strerror(errno));
		goto cleanup;
	}
	*out = pf;
	return 0;
cleanup:
	pyframe__destroy(pf);
	return err;
}

static int attach_one(struct pyframe *pf, struct bpf_program *prog, bool ret, uint64_t off)
{
	struct bpf_link *link;

	if (pf->nlinks == MAX_LINKS)
		return -E2BIG;
	link = bpf_program__attach_uprobe(prog, ret, pf->py.pid, pf->py.attach_path, off);
	if (!link) {
		int err = -errno;

		fprintf(stderr, "pyframe: cannot attach %s at %s+%#llx: %s\n",
			bpf_program__name(prog), pf->py.path, (unsigned long long)off,
			strerror(-err));
		return err;
	}
	pf->links[pf->nlinks++] = link;
	return 0;
}

int pyframe__attach(struct pyframe *pf)
{
	const struct py_interp *py = &pf->py;
	struct pyframe_bpf *s = pf->skel;
	int err = 0;

	for (int i = 0; !err && i < py->nresume; i++)
		err = attach_one(pf, s->progs.py_resume, false, py->resume_offs[i]);
	for (int i = 0; !err && i < py->nreturn; i++)
		err = attach_one(pf, s->progs.py_return, false, py->return_offs[i]);
	for (int i = 0; !err && i < py->nyield; i++)
		err = attach_one(pf, s->progs.py_yield, false, py->yield_offs[i]);
	if (!err)
		err = attach_one(pf, s->progs.py_traceback, false, py->traceback_off);
	if (!err)
		err = attach_one(pf, s->progs.py_eval_ret, true, py->eval_off);
	return err;
}

int pyframe__poll(struct pyframe *pf, int timeout_ms)
{
	int n = ring_buffer__poll(pf->rb, timeout_ms);

	if (n == -EINTR)
		return 0;
	return pf->err ?: n;
}

static void detach(struct pyframe *pf)
{
	for (int i = 0; i < pf->nlinks; i++)
		bpf_link__destroy(pf->links[i]);
	pf->nlinks = 0;
}

static int write_losses(struct pyframe *pf)
{
	const struct pyframe_bpf__bss *bss = pf->skel->bss;
	int err = 0;

	for (int cpu = 0; !err && cpu < PTG_MAX_CPUS; cpu++) {
		for (int k = 0; !err && k < PTG_LOSS_NR_KINDS; k++) {
			uint64_t n = bss->losses[cpu][k];

			if (!n || !loss_names[k])
				continue;
			if (k == PTG_LOSS_PY_EVENT || k == PTG_LOSS_PY_STACK)
				pf->st.dropped += n;
			err = trace_writer__loss(pf->w, loss_names[k], cpu, n);
		}
	}
	if (!err && pf->st.unresolved)
		err = trace_writer__loss(pf->w, "py_code_unresolved", UINT32_MAX,
					 pf->st.unresolved);
	return err;
}

int pyframe__finish(struct pyframe *pf, uint64_t stop_ts)
{
	int err;

	detach(pf);
	err = ring_buffer__consume(pf->rb);
	if (err < 0)
		return err;
	if (pf->err)
		return pf->err;
	if (stop_ts < pf->last_ts)
		stop_ts = pf->last_ts;
	for (size_t i = 0; i < pf->nthreads; i++) {
		err = pop_to(pf, &pf->threads[i], 0, stop_ts, PTG_F_EXIT_STOP);
		if (err)
			return err;
	}
	return write_losses(pf);
}

void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st)
{
	const struct pyframe_bpf__bss *bss = pf->skel->bss;

	*st = pf->st;
	st->dropped = 0;
	for (int cpu = 0; cpu < PTG_MAX_CPUS; cpu++)
		st->dropped += bss->losses[cpu][PTG_LOSS_PY_EVENT] +
			       bss->losses[cpu][PTG_LOSS_PY_STACK];
}

void pyframe__destroy(struct pyframe *pf)
{
	if (!pf)
		return;
	detach(pf);
	ring_buffer__free(pf->rb);
	pyframe_bpf__destroy(pf->skel);
	if (pf->memfd >= 0)
		close(pf->memfd);
	for (size_t i = 0; i < pf->nthreads; i++)
		free(pf->threads[i].stack);
	free(pf->threads);
	u64map__free(&pf->code_syms);
	u64map__free(&pf->tids);
	free(pf);
}
