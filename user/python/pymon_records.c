// SPDX-License-Identifier: MIT
/*
 * record --in-process: the agents' records, read from their rings and
 * checked, into the stack engine's frame events and torchops' ops
 * (pymon_int.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "ptrace_gpu/fingerprint.h"
#include "pyinterp/pycode.h"
#include "python/pymon_int.h"
#include "torch/torchops.h"

/*
 * The code object's fingerprint, read once, its names handed to the stack
 * engine at the same time; 0 when unreadable (its names are then unknown).
 */
static uint32_t fingerprint(struct pymon *pm, uint64_t code)
{
	struct py_code_info ci;
	uint64_t *v;
	uint32_t fp = 0;

	if (!code)
		return 0;
	v = u64map__get(&pm->fprints, code);
	if (v && *v)
		return (uint32_t)(*v >> 1);
	/* never seen, or named by an empty CODE group: the object itself (kept alive) */
	if (pm->memfd_target >= 0 && !py_read_code(pm->memfd_target, pm->py.info, code, &ci)) {
		fp = ci.fingerprint;
		if (pystack__learn(pm->ps, (uint32_t)pm->py.pid, code, &ci, v != NULL))
			return fp; /* out of memory: read again next time */
	}
	if (v)
		*v = (uint64_t)fp << 1 | 1;
	else if (pm->fprints.len < MAX_FPRINTS)
		u64map__put(&pm->fprints, code, (uint64_t)fp << 1 | 1);
	return fp;
}

/*
 * sys.monitoring's events of a thread nest exactly, so the frame they are
 * about is always known by its depth: depth d is the frame key d (never
 * 0). The engine gets the same events as from the uprobes, with these keys
 * for frame addresses.
 */
static int depth_of(struct pymon *pm, uint32_t tid, uint64_t **slot)
{
	*slot = u64map__get(&pm->depths, tid);
	if (*slot)
		return 0;
	if (pm->depths.len >= MAX_TIDS || u64map__put(&pm->depths, tid, 0))
		return -E2BIG;
	*slot = u64map__get(&pm->depths, tid);
	return 0;
}

/* A record as read: its fields apart. */
struct rec {
	uint64_t ts, code, arg;
	uint32_t tid;
	uint16_t kind;
};

static void decode(const struct ptg_pymon_rec *raw, struct rec *r)
{
	r->ts = raw->ts;
	r->code = raw->code_kind & PTG_PYMON_CODE_MASK;
	r->kind = (uint16_t)(raw->code_kind >> PTG_PYMON_KIND_SHIFT);
	r->arg = raw->arg;
	r->tid = raw->tid;
}

/* An op of the agent's RecordFunction callback, to torchops. */
static int on_op(struct pymon *pm, const struct rec *r)
{
	bool enter = r->kind == PTG_PYMON_OP_ENTER;
	uint64_t *sym = enter ? u64map__get(&pm->opnames, r->arg) : NULL;

	if ((enter && !sym) || !r->tid || !pm->ops) {
		pm->bad++;
		return 0;
	}
	return torchops__op(pm->ops, (uint32_t)pm->py.pid, r->tid, r->ts, enter, r->code,
			    sym ? (uint32_t)(*sym >> 1) : 0);
}

static int on_event(struct pymon *pm, const struct rec *r)
{
	struct ptg_event e = {
	    .ts = r->ts, .pid = (uint32_t)pm->py.pid, .tid = r->tid, .b = r->code};
	uint64_t *d;

	if (r->kind == PTG_PYMON_OP_ENTER || r->kind == PTG_PYMON_OP_EXIT)
		return on_op(pm, r);
	/* ops alone were asked for: the probes record the frames */
	if (pm->ops_only || !r->tid || depth_of(pm, r->tid, &d)) {
		pm->bad++;
		return 0;
	}
	switch (r->kind) {
	case PTG_PYMON_START:
	case PTG_PYMON_RESUME:
	case PTG_PYMON_THROW:
		e.kind = r->kind == PTG_PYMON_START ? PTG_EV_PY_START : PTG_EV_PY_RESUME;
		e.d = *d;
		e.a = ++*d;
		e.aux = fingerprint(pm, r->code);
		/* self of a method, for module paths (modpath.c): PY_START's first local */
		e.c = r->kind == PTG_PYMON_START ? r->arg & PTG_PY_REF_MASK : 0;
		break;
	case PTG_PYMON_RETURN:
	case PTG_PYMON_YIELD:
		e.kind = r->kind == PTG_PYMON_RETURN ? PTG_EV_PY_RETURN : PTG_EV_PY_YIELD;
		e.a = *d; /* 0: a frame we never knew of; the engine counts it unmatched */
		if (*d)
			--*d;
		break;
	case PTG_PYMON_UNWIND:
		if (!*d)
			return 0; /* a frame we never knew of left: nothing of ours above it */
		e.kind = PTG_EV_PY_UNWIND;
		e.a = --*d; /* everything above its caller (0: all) */
		break;
	default:
		pm->bad++;
		return 0;
	}
	return tracer__dispatch(pm->t, &e, sizeof(e));
}

/* STACK at pm->tail and its n FRAMEs, all published (checked): the thread's stack. */
static int on_stack(struct pymon *pm, const struct rec *r, uint32_t n)
{
	struct ptg_stack_event *s = &pm->snap;
	uint64_t *d;

	if (!r->tid || depth_of(pm, r->tid, &d)) {
		pm->bad += n + 1;
		return 0;
	}
	memset(&s->hdr, 0, sizeof(s->hdr));
	s->hdr.ts = r->ts;
	s->hdr.pid = (uint32_t)pm->py.pid;
	s->hdr.tid = r->tid;
	s->hdr.kind = PTG_EV_PY_STACK;
	s->hdr.aux = r->arg == PTG_SNAP_FIRST ? PTG_SNAP_FIRST : PTG_SNAP_RESYNC;
	s->hdr.a = n;
	for (uint32_t i = 0; i < n; i++) {
		struct rec f;

		decode(&pm->recs[(pm->tail + 1 + i) & (pm->nrecs - 1)], &f);
		/* innermost first: the innermost frame is the deepest */
		s->frames[i] = (struct ptg_frame_ref){.frame = n - i,
						      .code = f.code,
						      .local0 = f.arg & PTG_PY_REF_MASK,
						      .fingerprint = fingerprint(pm, f.code)};
	}
	*d = n;
	return tracer__dispatch(pm->t, &s->hdr, sizeof(*s));
}

/*
 * Whether records at + 1 .. at + n (a group's, at its first) are published
 * records of kind of the same thread: 1, 0 not yet, -EPROTO not.
 */
static int group_ready(struct pymon *pm, uint64_t at, uint32_t tid, uint32_t n, uint16_t kind)
{
	for (uint32_t i = 1; i <= n; i++) {
		const struct ptg_pymon_rec *f = &pm->recs[(at + i) & (pm->nrecs - 1)];

		if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) != (uint32_t)(at + i + 1))
			return 0;
		if (f->code_kind >> PTG_PYMON_KIND_SHIFT != kind || f->tid != tid)
			return -EPROTO;
	}
	return 1;
}

/* Records after a group's first: size of them each, UINT32_MAX beyond max. */
static uint32_t group_size(uint64_t size, uint32_t max, uint32_t per_rec)
{
	return size > max ? UINT32_MAX : (uint32_t)((size + per_rec - 1) / per_rec);
}

/* The agent's hash of an op name (agent/ptg_pymon_ops.c), checked against what it sent. */
static uint64_t name_id(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The n NAME_BYTES records after at, 16 bytes each, into out. */
static void group_bytes(const struct pymon *pm, uint64_t at, uint32_t n, char *out)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct ptg_pymon_rec *b = &pm->recs[(at + 1 + i) & (pm->nrecs - 1)];

		memcpy(out + i * 16, &b->ts, 8);
		memcpy(out + i * 16 + 8, &b->arg, 8);
	}
}

/* NAME at pm->tail and its NAME_BYTES, all published: the op name's symbol, by its id. */
static int on_name(struct pymon *pm, const struct rec *r, uint32_t n)
{
	char name[PTG_PYMON_MAX_NAME + 17];
	uint32_t sym;

	group_bytes(pm, pm->tail, n, name);
	name[r->code] = '\0';
	if (strlen(name) != r->code || name_id(name, r->code) != r->arg) {
		pm->bad += n + 1;
		return 0;
	}
	if (u64map__get(&pm->opnames, r->arg))
		return 0; /* sent again by a thread that raced the first */
	if (pm->opnames.len >= MAX_OPNAMES) {
		pm->bad += n + 1;
		return 0;
	}
	sym = trace_writer__sym(tracer__writer(pm->t), PTG_SYM_OP, name, "", 0);
	if (!sym)
		return -ENOMEM;
	return u64map__put(&pm->opnames, r->arg, (uint64_t)sym << 1 | 1);
}

/* Records after a CODE record (its names' bytes), UINT32_MAX when its lengths are too long. */
static uint32_t code_group_size(const struct rec *r)
{
	uint64_t q = r->arg >> 32 & 0xffff, f = r->arg >> 48;

	if (q > PTG_PYMON_MAX_QUALNAME || f > PTG_PYMON_MAX_FILENAME)
		return UINT32_MAX;
	return 1 + group_size(q + f, PTG_PYMON_MAX_QUALNAME + PTG_PYMON_MAX_FILENAME, 16);
}

/*
 * CODE at `at` and its n NAME_BYTES, all published: the code object's
 * names. At its turn in the ring (define) they name the address from here
 * on, whatever named it before (a code object freed since, whose records
 * are all behind); read ahead, only an address not named yet. Empty names
 * (the agent could not have them) leave the object to be read from memory
 * at its next record. -EPROTO for names that break the protocol.
 */
static int learn_code(struct pymon *pm, uint64_t at, const struct rec *r, uint32_t n, bool define)
{
	char b[16 + PTG_PYMON_MAX_QUALNAME + PTG_PYMON_MAX_FILENAME + 17];
	size_t q = r->arg >> 32 & 0xffff, f = r->arg >> 48;
	struct py_code_info ci = {.firstlineno = (uint32_t)r->arg};
	uint64_t objs[2], *known;

	if (!r->code)
		return 0;
	known = u64map__get(&pm->fprints, r->code);
	if (known && !define)
		return 0;
	group_bytes(pm, at, n, b);
	if (memchr(b + 16, '\0', q + f))
		return -EPROTO;
	if (!q && !f) {
		if (known)
			*known = 0;
		return 0;
	}
	memcpy(objs, b, 16);
	memcpy(ci.qualname, b + 16, q);
	memcpy(ci.filename, b + 16 + q, f);
	/* as of the object read from memory: steps and module paths check it so */
	ci.fingerprint = ptg_code_fingerprint(objs[0], objs[1], ci.firstlineno);
	if (pystack__learn(pm->ps, (uint32_t)pm->py.pid, r->code, &ci, define))
		return 0; /* out of memory: read from memory later */
	if (known)
		*known = (uint64_t)ci.fingerprint << 1 | 1;
	else if (pm->fprints.len < MAX_FPRINTS)
		u64map__put(&pm->fprints, r->code, (uint64_t)ci.fingerprint << 1 | 1);
	return 0;
}

/*
 * The code objects of every record published so far, read now: records are
 * handled in time order with the other sources, which may be well behind,
 * and a code object freed (or the target gone) by then would have no names.
 */
static void read_ahead(struct pymon *pm)
{
	uint64_t mask = pm->nrecs - 1, end;

	if (pm->ops_only)
		return; /* no code objects: the probes' stack engine reads its own */
	if (pm->ahead < pm->tail)
		pm->ahead = pm->tail;
	for (end = pm->tail + pm->nrecs; pm->ahead < end; pm->ahead++) {
		const struct ptg_pymon_rec *p = &pm->recs[pm->ahead & mask];
		struct rec r;

		if (__atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) != (uint32_t)(pm->ahead + 1))
			break;
		decode(p, &r);
		if (r.kind == PTG_PYMON_CODE) {
			uint32_t n = code_group_size(&r);
			int ready = n == UINT32_MAX ? -EPROTO
						    : group_ready(pm, pm->ahead, r.tid, n,
								  PTG_PYMON_NAME_BYTES);

			if (!ready)
				break; /* its bytes are being written */
			/* a broken one is counted once, when drain() gets to it */
			if (ready > 0) {
				learn_code(pm, pm->ahead, &r, n, false);
				pm->ahead += n;
			}
			continue;
		}
		if (r.kind == PTG_PYMON_START || r.kind == PTG_PYMON_RESUME ||
		    r.kind == PTG_PYMON_THROW || r.kind == PTG_PYMON_FRAME)
			fingerprint(pm, r.code);
	}
}

/*
 * One agent's records up to upto_ts, each checked (the target writes them:
 * a lying one costs it its own trace, nothing more).
 */
/* 0, 1 when records newer than upto_ts wait in the ring, or a negative errno. */
static int drain_proc(struct pymon *pm, uint64_t upto_ts)
{
	uint64_t now, mask = pm->nrecs - 1;
	struct rec r;
	uint32_t n;
	int err = 0, ready, left = 0;

	if (!pm->ring || pm->dropped)
		return 0;
	/* called before each ring-buffer event: nothing new costs one load */
	if (__atomic_load_n(&pm->recs[pm->tail & mask].seq, __ATOMIC_ACQUIRE) !=
	    (uint32_t)(pm->tail + 1))
		return 0;
	now = now_ns(CLOCK_MONOTONIC);
	while (!err) {
		const struct ptg_pymon_rec *p = &pm->recs[pm->tail & mask];

		if (__atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) != (uint32_t)(pm->tail + 1))
			break;
		decode(p, &r);
		/* no time beyond now: a lying clock cannot push the trace's end out */
		if (r.ts > now)
			r.ts = now;
		if (r.ts > upto_ts) {
			left = 1;
			break;
		}
		if (r.kind != PTG_PYMON_STACK && r.kind != PTG_PYMON_NAME &&
		    r.kind != PTG_PYMON_CODE) {
			err = on_event(pm, &r);
			pm->tail++;
			continue;
		}
		/* a group: the record and its n FRAMEs or NAME_BYTES */
		n = r.kind == PTG_PYMON_STACK  ? group_size(r.code, PTG_PYMON_MAX_DEPTH, 1)
		    : r.kind == PTG_PYMON_NAME ? group_size(r.code, PTG_PYMON_MAX_NAME, 16)
					       : code_group_size(&r);
		ready = n == UINT32_MAX
			    ? -EPROTO
			    : group_ready(pm, pm->tail, r.tid, n,
					  r.kind == PTG_PYMON_STACK ? PTG_PYMON_FRAME
								    : PTG_PYMON_NAME_BYTES);
		if (ready == 0 && upto_ts != UINT64_MAX) {
			left = 1;
			break; /* the rest of the group is being written */
		}
		/* ops alone: a stack or a code object is no record of this session's */
		if (ready > 0 && pm->ops_only && r.kind != PTG_PYMON_NAME)
			ready = -EPROTO;
		if (ready > 0 && r.kind == PTG_PYMON_CODE)
			ready = learn_code(pm, pm->tail, &r, n, true) ? -EPROTO : 1;
		if (ready <= 0) {
			pm->bad++;
			pm->tail++;
			continue;
		}
		if (r.kind != PTG_PYMON_CODE)
			err = r.kind == PTG_PYMON_STACK ? on_stack(pm, &r, n) : on_name(pm, &r, n);
		pm->tail += n + 1;
	}
	__atomic_store_n(&pm->ring->tail, pm->tail, __ATOMIC_RELEASE);
	/* what waits for its turn: the records handled above had theirs read as they went */
	read_ahead(pm);
	return err ?: left;
}

/*
 * The processes' threads are apart, so one process's records may go
 * before another's older ones; each thread's stay in order with the ring
 * buffer's.
 */
int pymon_drain(struct tracer *t, void *ctx, uint64_t upto_ts)
{
	int ret = 0, left = 0;

	(void)t;
	for (struct pymon *pm = ctx; pm && ret >= 0; pm = pm->next) {
		ret = drain_proc(pm, upto_ts);
		left |= ret > 0;
	}
	return ret < 0 ? ret : left;
}

int pymon_write_losses(struct tracer *t, void *ctx)
{
	struct trace_writer *w = tracer__writer(t);
	int err = 0;

	for (struct pymon *pm = ctx; pm && !err; pm = pm->next) {
		uint64_t dropped = pm->ring && !pm->dropped
				       ? __atomic_load_n(&pm->ring->dropped, __ATOMIC_RELAXED)
				       : 0;

		if (pm->dropped)
			continue;
		if (dropped)
			err =
			    trace_writer__lost(w, PTG_LOST_PY_INPROC_DROPPED, UINT32_MAX, dropped);
		if (!err && pm->bad)
			err = trace_writer__lost(w, PTG_LOST_PY_INPROC_BAD, UINT32_MAX, pm->bad);
		if (pm->ps)
			err = err ?: pystack__write_losses(pm->ps, w);
	}
	return err;
}

/* A frame event, to the stack engine of its process. */
int pymon_handle(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct pymon *first = ctx, *pm = first->route;

	(void)t;
	if (!pm || (uint32_t)pm->py.pid != e->pid) {
		for (pm = first; pm && (uint32_t)pm->py.pid != e->pid; pm = pm->next)
			;
		if (!pm)
			return 0; /* no process of ours: a frame event of no agent */
		first->route = pm;
	}
	/* it exec'd: the probes' events of its new image (pymon__exec()) */
	if (pm->exec_gone)
		return 0;
	/* handed over from the uprobes: theirs, up to then */
	if (e->ts < pm->since_ts)
		return 0;
	return pystack__handle(pm->ps, e, size);
}
