// SPDX-License-Identifier: MIT
/* The Python stack engine: frame events in, nested PY_ENTER / PY_EXIT records out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "python/pystack.h"

/* What is known of one process: how to read it, and the names of its code objects. */
struct pystack_proc {
	uint32_t pid;
	int handle;		 /* the resolver's, negative if the process cannot be read */
	struct u64map code_syms; /* code object key -> fingerprint << 32 | symbol */
};

struct pystack {
	struct tracer *t;
	struct pystack_resolver res;
	struct pystack_proc *procs;
	size_t nprocs;
	size_t last;		  /* index + 1 of the previous event's process */
	struct pystack_proc *cur; /* the process of the event being handled */
	uint64_t start_ts;	  /* probes attached after the recording started, else 0 */
	struct pystack_stats st;
};

int pystack__new(struct tracer *t, const struct pystack_resolver *res, struct pystack **out)
{
	struct pystack *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return -ENOMEM;
	ps->t = t;
	ps->res = *res;
	*out = ps;
	return 0;
}

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

static int read_code(struct pystack *ps, struct pystack_proc *p, uint64_t code,
		     struct py_code_info *ci)
{
	if (!code || p->handle < 0 || !ps->res.read_code)
		return -ENOENT;
	return ps->res.read_code(ps->res.ctx, p->handle, code, ci);
}

/* Symbol of a code object, read once per (address, fingerprint). */
static uint32_t resolve_code(struct pystack *ps, struct pystack_proc *p, uint64_t code,
			     uint32_t fingerprint)
{
	struct trace_writer *w = tracer__writer(ps->t);
	struct py_code_info ci;
	uint64_t *cached;
	uint32_t sym;

	cached = u64map__get(&p->code_syms, code_key(code, fingerprint));
	if (cached && (uint32_t)(*cached >> 32) == fingerprint)
		return (uint32_t)*cached;
	if (read_code(ps, p, code, &ci) == 0 && ci.fingerprint == fingerprint) {
		sym =
		    trace_writer__sym(w, PTG_SYM_PY_FUNC, ci.qualname, ci.filename, ci.firstlineno);
	} else {
		/* freed (or the process exited) before it could be read */
		snprintf(ci.qualname, sizeof(ci.qualname), "<unknown code %#llx>",
			 (unsigned long long)code);
		sym = trace_writer__sym(w, PTG_SYM_PY_FUNC, ci.qualname, "", 0);
		ps->st.unresolved++;
	}
	if (code)
		u64map__put(&p->code_syms, code_key(code, fingerprint),
			    (uint64_t)fingerprint << 32 | sym);
	return sym;
}

/* The symbol of code object code (with its fingerprint) from now on. */
static int remember(struct pystack *ps, struct pystack_proc *p, uint64_t code, uint32_t fingerprint,
		    const char *name, const char *file, uint32_t line)
{
	uint32_t sym = trace_writer__sym(tracer__writer(ps->t), PTG_SYM_PY_FUNC, name, file, line);

	return u64map__put(&p->code_syms, code_key(code, fingerprint),
			   (uint64_t)fingerprint << 32 | sym);
}

/* Names the BPF side read at the first sight of a code object. */
static int learn_code(struct pystack *ps, struct pystack_proc *p, const struct ptg_code_event *c)
{
	char name[PTG_CODE_NAME_BYTES * 3 + 1], file[PTG_CODE_FILE_BYTES * 3 + 1];

	if (!c->name_width || !c->file_width)
		return 0; /* resolve_code() asks the resolver when the code is used */
	py_decode_chars(c->name, c->name_width, c->name_chars, name, sizeof(name));
	py_decode_chars(c->file, c->file_width, c->file_chars, file, sizeof(file));
	return remember(ps, p, c->hdr.a, (uint32_t)c->hdr.aux, name, file, (uint32_t)c->hdr.b);
}

static int push(struct pystack *ps, struct tracer_thread *th, uint64_t frame, uint64_t code,
		uint32_t fingerprint, uint64_t local0, uint64_t ts, uint16_t flags)
{
	struct tracer_slot slot = {
	    .key = frame,
	    .code = code,
	    .fingerprint = fingerprint,
	    .kind = PTG_REC_PY_ENTER,
	    .local0 = local0,
	};

	return tracer__push(ps->t, th, &slot, resolve_code(ps, ps->cur, code, fingerprint), flags,
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
static int push_hidden(struct pystack *ps, struct tracer_thread *th, uint64_t frame)
{
	struct tracer_slot slot = {.key = frame, .kind = TRACER_SLOT_HIDDEN};

	ps->st.hidden++;
	return tracer__push(ps->t, th, &slot, 0, 0, 0);
}

static int enter(struct pystack *ps, struct tracer_thread *th, const struct ptg_event *e,
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
		ps->st.redispatched++;
		return 0;
	}
	at = e->d ? find_frame(th, e->d) : 0;
	if (at || !e->d)
		err = tracer__pop_to(ps->t, th, at, e->ts, PTG_F_EXIT_UNWIND);
	else
		err = push_hidden(ps, th, e->d);
	return err ?: push(ps, th, e->a, e->b, e->aux, e->c, e->ts, flags);
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
static int leave(struct pystack *ps, struct tracer_thread *th, const struct ptg_event *e,
		 uint16_t flags)
{
	uint32_t at = e->a ? find_frame(th, e->a) : 0;
	uint32_t above = python_above(th, at);

	if (e->a && !at) {
		ps->st.unmatched++;
		return 0;
	}
	if (above)
		at = above;
	if (!at) {
		ps->st.unmatched++;
		return 0;
	}
	return tracer__pop_to(ps->t, th, at, e->ts, PTG_F_EXIT_UNWIND)
		   ?: tracer__pop_to(ps->t, th, at - 1, e->ts, flags);
}

/* An exception reached frame e->a: everything above it has exited. */
static int unwind(struct pystack *ps, struct tracer_thread *th, const struct ptg_event *e)
{
	uint32_t at = e->a ? find_frame(th, e->a) : 0;

	if (e->a && !at)
		return 0;
	return tracer__pop_to(ps->t, th, at, e->ts, PTG_F_EXIT_UNWIND);
}

/*
 * The snapshot is the truth about the thread's stack before the event that
 * follows it: keep the common outer part, close what differs, open the rest.
 */
static int apply_snapshot(struct pystack *ps, struct tracer_thread *th,
			  const struct ptg_stack_event *s)
{
	uint32_t n =
	    s->hdr.a < PTG_MAX_SNAPSHOT_DEPTH ? (uint32_t)s->hdr.a : PTG_MAX_SNAPSHOT_DEPTH;
	bool first = s->hdr.aux == PTG_SNAP_FIRST;
	uint64_t born = tracer__proc_born(ps->t, s->hdr.pid);
	uint64_t ts = first ? (ps->start_ts ?: tracer__start_ts(ps->t)) : s->hdr.ts;
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
	err = tracer__pop_to(ps->t, th, common, s->hdr.ts, PTG_F_EXIT_LOST);
	for (uint32_t i = py; !err && i < n; i++) {
		const struct ptg_frame_ref *f = &s->frames[n - 1 - i];

		err = push(ps, th, f->frame, f->code, f->fingerprint, f->local0, ts,
			   PTG_F_ENTER_PREEXISTING);
	}
	return err;
}

static struct pystack_proc *new_proc(struct pystack *ps, uint32_t pid)
{
	struct pystack_proc *n, *p;

	n = realloc(ps->procs, (ps->nprocs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	ps->procs = n;
	p = &ps->procs[ps->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	/* names come with the events (PY_CODE); the resolver is only asked for the rest */
	p->handle = ps->res.open_proc ? ps->res.open_proc(ps->res.ctx, pid) : -ENOENT;
	return p;
}

/* The state of process pid, made at its first event. */
static struct pystack_proc *proc_of(struct pystack *ps, uint32_t pid)
{
	if (ps->last && ps->procs[ps->last - 1].pid == pid)
		return &ps->procs[ps->last - 1];
	for (size_t i = 0; i < ps->nprocs; i++) {
		if (ps->procs[i].pid == pid) {
			ps->last = i + 1;
			return &ps->procs[i];
		}
	}
	if (!new_proc(ps, pid))
		return NULL;
	ps->last = ps->nprocs;
	return &ps->procs[ps->nprocs - 1];
}

int pystack__learn(struct pystack *ps, uint32_t pid, uint64_t code, const struct py_code_info *ci,
		   bool replace)
{
	struct pystack_proc *p;

	if (!code)
		return 0;
	p = proc_of(ps, pid);
	if (!p)
		return -ENOMEM;
	if (!replace && u64map__get(&p->code_syms, code_key(code, ci->fingerprint)))
		return 0;
	return remember(ps, p, code, ci->fingerprint, ci->qualname, ci->filename, ci->firstlineno);
}

int pystack__add_proc(struct pystack *ps, uint32_t pid)
{
	struct pystack_proc *p = proc_of(ps, pid);

	if (!p)
		return -ENOMEM;
	return p->handle < 0 ? p->handle : 0;
}

static void free_proc(struct pystack *ps, struct pystack_proc *p)
{
	if (p->handle >= 0 && ps->res.close_proc)
		ps->res.close_proc(ps->res.ctx, p->handle);
	u64map__free(&p->code_syms);
}

void pystack__forget(struct pystack *ps, uint32_t pid)
{
	for (size_t i = 0; ps && i < ps->nprocs; i++) {
		if (ps->procs[i].pid != pid)
			continue;
		free_proc(ps, &ps->procs[i]);
		ps->procs[i] = ps->procs[--ps->nprocs];
		ps->last = 0;
		return;
	}
}

int pystack__handle(struct pystack *ps, const struct ptg_event *e, size_t size)
{
	struct tracer_thread *t;
	int err = 0;

	ps->cur = proc_of(ps, e->pid);
	t = tracer__thread(ps->t, e->pid, e->tid, e->ts);
	if (!t || !ps->cur)
		return -ENOMEM;
	switch (e->kind) {
	case PTG_EV_PY_STACK:
		if (size >= sizeof(struct ptg_stack_event))
			err = apply_snapshot(ps, t, (const struct ptg_stack_event *)e);
		break;
	case PTG_EV_PY_CODE:
		if (size >= sizeof(struct ptg_code_event))
			err = learn_code(ps, ps->cur, (const struct ptg_code_event *)e);
		break;
	case PTG_EV_PY_START:
		err = enter(ps, t, e, PTG_F_ENTER_CALL);
		break;
	case PTG_EV_PY_RESUME:
		err = enter(ps, t, e, PTG_F_ENTER_RESUME);
		break;
	case PTG_EV_PY_RETURN:
		err = leave(ps, t, e, PTG_F_EXIT_RETURN);
		break;
	case PTG_EV_PY_YIELD:
		err = leave(ps, t, e, PTG_F_EXIT_YIELD);
		break;
	case PTG_EV_PY_UNWIND:
		err = unwind(ps, t, e);
		break;
	}
	return err;
}

void pystack__set_start_ts(struct pystack *ps, uint64_t ts)
{
	ps->start_ts = ts;
}

int pystack__write_losses(struct pystack *ps, struct trace_writer *w)
{
	int err = 0;

	if (ps->st.unresolved)
		err = trace_writer__lost(w, PTG_LOST_PY_CODE_UNRESOLVED, UINT32_MAX,
					 ps->st.unresolved);
	if (!err && ps->st.unmatched)
		err =
		    trace_writer__lost(w, PTG_LOST_PY_UNMATCHED_EXIT, UINT32_MAX, ps->st.unmatched);
	return err;
}

void pystack__stats(const struct pystack *ps, struct pystack_stats *st)
{
	*st = ps ? ps->st : (struct pystack_stats){};
}

void pystack__free(struct pystack *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->nprocs; i++)
		free_proc(ps, &ps->procs[i]);
	free(ps->procs);
	free(ps);
}
