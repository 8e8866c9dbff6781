// SPDX-License-Identifier: MIT
/* record --in-process: the agent injected, its ring read into the stack engine (pymon.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/trusted.h"
#include "base/u64map.h"
#include "probes/pymon.h"
#include "probes/pystack.h"
#include "probes/torchops.h"
#include "proc/inject.h"
#include "proc/procfs.h"
#include "ptg_pymon_proto.h"
#include "ptrace_gpu/fingerprint.h"
#include "pyinterp/pycode.h"

#define AGENT_NAME  "libptg_pymon.so"
#define WAIT_MS	    10000      /* for the agent to connect, and to get the GIL */
#define MAX_TIDS    65536      /* threads of one target: more is a lying agent */
#define MAX_FPRINTS (1u << 20) /* code objects whose fingerprints are cached */
#define MAX_FOREIGN 64	       /* connections that are not the target's, before giving up */
#define MAX_OPNAMES (1u << 16) /* op names of one recording: more is a lying agent */

struct pymon {
	struct py_interp py;
	struct tracer *t;
	struct pystack *ps;
	uint64_t start_time; /* of py.pid (proc_start_time): injection checks it is the same */
	int agent_fd;	     /* the agent file, checked by trusted_open() */
	char agent[PATH_MAX];
	int lfd;  /* listening socket (abstract name) */
	int sock; /* the agent's connection */
	char name[64];
	int memfd;
	struct ptg_pymon_ring *ring;
	struct ptg_pymon_rec *recs;
	size_t map_len;
	uint64_t nrecs;
	uint64_t tail;	       /* our copy: the shared one is only written */
	uint64_t ahead;	       /* records up to here had their code objects read */
	struct u64map depths;  /* tid -> frames on its stack as we know it */
	struct u64map fprints; /* code -> fingerprint << 1 | 1 */
	int memfd_target;      /* /proc/PID/mem, for fingerprints */
	struct ptg_stack_event snap;
	uint64_t bad;
	int tool_id;
	unsigned int ring_mb;
	struct torchops *ops;  /* where op records go; NULL: none asked for */
	bool ops_on;	       /* the agent's RecordFunction callback is in */
	char ops_msg[256];     /* why not, from the agent */
	struct u64map opnames; /* name id -> symbol << 1 | 1 */
	/* record -p A,B --in-process: the other processes, each its own agent (pymon__add()) */
	struct pymon *next;
	struct pymon *route; /* of the first: the process of the previous frame event */
};

int pymon__check(const struct py_interp *py, char *err, size_t errlen)
{
	struct proc_ns_ids ids;

	if (!py->info) {
		snprintf(err, errlen, "record --in-process: pid %d runs no Python", py->pid);
		return -ENOEXEC;
	}
	/* the agent's thread ids are its namespace's: ours only when the same */
	if (!proc_ns_ids(py->pid, py->pid, &ids) && ids.levels > 1) {
		snprintf(err, errlen,
			 "record --in-process: pid %d is in another pid namespace (a container); "
			 "record it without --in-process",
			 py->pid);
		return -EOPNOTSUPP;
	}
	return 0;
}

/* $PTG_PYMON_AGENT, else libptg_pymon.so next to this executable (trusted_open_own()). */
static int find_agent(struct pymon *pm, char *err, size_t errlen)
{
	return trusted_open_own("PTG_PYMON_AGENT", AGENT_NAME, pm->agent, sizeof(pm->agent), err,
				errlen);
}

/* The ring: a memfd of ours, its size sealed, so the agent can neither shrink nor grow it. */
static int make_ring(struct pymon *pm, unsigned int ring_mb)
{
	uint64_t bytes = (uint64_t)(ring_mb ? ring_mb : 8) << 20;

	pm->nrecs = bytes / sizeof(struct ptg_pymon_rec);
	pm->map_len = PTG_PYMON_RECS_OFF + pm->nrecs * sizeof(struct ptg_pymon_rec);
	pm->memfd = memfd_create("ptg-pymon-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (pm->memfd < 0 || ftruncate(pm->memfd, (off_t)pm->map_len))
		return -errno;
	pm->ring = mmap(NULL, pm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, pm->memfd, 0);
	if (pm->ring == MAP_FAILED) {
		pm->ring = NULL;
		return -errno;
	}
	pm->recs = (struct ptg_pymon_rec *)((char *)pm->ring + PTG_PYMON_RECS_OFF);
	pm->ring->magic = PTG_PYMON_MAGIC;
	pm->ring->version = PTG_PYMON_PROTO_VERSION;
	pm->ring->rec_size = sizeof(struct ptg_pymon_rec);
	pm->ring->nrecs = pm->nrecs;
	if (fcntl(pm->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -errno;
	return 0;
}

static int listen_socket(struct pymon *pm)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint32_t rnd = 0;
	size_t n;

	/* unguessable, so that no other local process takes the name first */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)now_ns(CLOCK_MONOTONIC) ^ (uint32_t)getpid() << 16;
	snprintf(pm->name, sizeof(pm->name), "ptrace-gpu-pymon-%d-%08x", getpid(), rnd);
	n = strlen(pm->name);
	memcpy(a.sun_path + 1, pm->name, n);
	pm->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (pm->lfd < 0)
		return -errno;
	if (bind(pm->lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(pm->lfd, 8))
		return -errno;
	return 0;
}

/* --- the agent's records into frame events --- */

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
	if (v)
		return (uint32_t)(*v >> 1);
	if (pm->memfd_target >= 0 && !py_read_code(pm->memfd_target, pm->py.info, code, &ci)) {
		fp = ci.fingerprint;
		if (pystack__learn(pm->ps, (uint32_t)pm->py.pid, code, &ci))
			return fp; /* out of memory: read again next time */
	}
	if (pm->fprints.len < MAX_FPRINTS)
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
	if (!r->tid || depth_of(pm, r->tid, &d)) {
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

	if (q > PTG_PYMON_MAX_QUALNAME || f > PTG_PYMON_MAX_FILENAME || !q || !f)
		return UINT32_MAX;
	return 1 + group_size(q + f, PTG_PYMON_MAX_QUALNAME + PTG_PYMON_MAX_FILENAME, 16);
}

/*
 * CODE at `at` and its n NAME_BYTES, all published: the code object's
 * names, learnt for good (no read of the target's memory then), unless
 * known already. -EPROTO for names that break the protocol.
 */
static int learn_code(struct pymon *pm, uint64_t at, const struct rec *r, uint32_t n)
{
	char b[16 + PTG_PYMON_MAX_QUALNAME + PTG_PYMON_MAX_FILENAME + 17];
	size_t q = r->arg >> 32 & 0xffff, f = r->arg >> 48;
	struct py_code_info ci = {.firstlineno = (uint32_t)r->arg};
	uint64_t objs[2];

	if (!r->code || u64map__get(&pm->fprints, r->code))
		return 0;
	group_bytes(pm, at, n, b);
	if (memchr(b + 16, '\0', q + f))
		return -EPROTO;
	memcpy(objs, b, 16);
	memcpy(ci.qualname, b + 16, q);
	memcpy(ci.filename, b + 16 + q, f);
	/* as of the object read from memory: steps and module paths check it so */
	ci.fingerprint = ptg_code_fingerprint(objs[0], objs[1], ci.firstlineno);
	if (pystack__learn(pm->ps, (uint32_t)pm->py.pid, r->code, &ci))
		return 0; /* out of memory: read from memory later */
	if (pm->fprints.len < MAX_FPRINTS)
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
				learn_code(pm, pm->ahead, &r, n);
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
static int drain_proc(struct pymon *pm, uint64_t upto_ts)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC), mask = pm->nrecs - 1;
	struct rec r;
	uint32_t n;
	int err = 0, ready;

	if (!pm->ring)
		return 0;
	while (!err) {
		const struct ptg_pymon_rec *p = &pm->recs[pm->tail & mask];

		if (__atomic_load_n(&p->seq, __ATOMIC_ACQUIRE) != (uint32_t)(pm->tail + 1))
			break;
		decode(p, &r);
		/* no time beyond now: a lying clock cannot push the trace's end out */
		if (r.ts > now)
			r.ts = now;
		if (r.ts > upto_ts)
			break;
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
		if (ready == 0 && upto_ts != UINT64_MAX)
			break; /* the rest of the group is being written */
		if (ready > 0 && r.kind == PTG_PYMON_CODE)
			ready = learn_code(pm, pm->tail, &r, n) ? -EPROTO : 1;
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
	return err;
}

/*
 * tracer.h's source: every agent's records up to upto_ts. The processes'
 * threads are apart, so one process's records may go before another's
 * older ones; each thread's stay in order with the ring buffer's.
 */
static int drain(struct tracer *t, void *ctx, uint64_t upto_ts)
{
	int err = 0;

	(void)t;
	for (struct pymon *pm = ctx; pm && !err; pm = pm->next)
		err = drain_proc(pm, upto_ts);
	return err;
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct trace_writer *w = tracer__writer(t);
	int err = 0;

	for (struct pymon *pm = ctx; pm && !err; pm = pm->next) {
		uint64_t dropped =
		    pm->ring ? __atomic_load_n(&pm->ring->dropped, __ATOMIC_RELAXED) : 0;

		if (dropped)
			err =
			    trace_writer__lost(w, PTG_LOST_PY_INPROC_DROPPED, UINT32_MAX, dropped);
		if (!err && pm->bad)
			err = trace_writer__lost(w, PTG_LOST_PY_INPROC_BAD, UINT32_MAX, pm->bad);
		err = err ?: pystack__write_losses(pm->ps, w);
	}
	return err;
}

/* A frame event, to the stack engine of its process. */
static int handle(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
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
	return pystack__handle(pm->ps, e, size);
}

/* The resolver of the stack engine: code objects read from /proc/PID/mem. */
static int read_code(void *ctx, int fd, uint64_t code, struct py_code_info *out)
{
	const struct pymon *pm = ctx;

	return py_read_code(fd, pm->py.info, code, out);
}

/* One process's agent, ring, socket and stack engine: not yet known to the tracer. */
static int open_proc(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		     uint64_t start_time, struct pymon **out)
{
	struct pystack_resolver res;
	char why[PATH_MAX + 128];
	struct pymon *pm;
	int err;

	*out = NULL;
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	pm->lfd = pm->sock = pm->memfd = pm->memfd_target = -1;
	pm->tool_id = -1;
	pm->py = *py;
	pm->t = t;
	pm->start_time = start_time;
	pm->ring_mb = ring_mb;
	pm->agent_fd = find_agent(pm, why, sizeof(why));
	if (pm->agent_fd < 0) {
		pr_err("record --in-process: refusing the agent %s: %s", pm->agent, why);
		err = -EPERM;
		goto cleanup;
	}
	err = make_ring(pm, ring_mb);
	if (err) {
		pr_err("record --in-process: cannot make the shared ring: %s", strerror(-err));
		goto cleanup;
	}
	err = listen_socket(pm);
	if (err) {
		pr_err("record --in-process: cannot open the agent's socket: %s", strerror(-err));
		goto cleanup;
	}
	pm->memfd_target = py_mem_open(NULL, (uint32_t)py->pid);
	res = (struct pystack_resolver){.ctx = pm,
					.open_proc = py_mem_open,
					.close_proc = py_mem_close,
					.read_code = read_code};
	err = pystack__new(t, &res, &pm->ps);
	if (!err && (err = pystack__add_proc(pm->ps, (uint32_t)py->pid)))
		pr_err("record --in-process: cannot open /proc/%d/mem: %s", py->pid,
		       strerror(-err));
	if (err)
		goto cleanup;
	*out = pm;
	return 0;
cleanup:
	pymon__destroy(pm);
	return err;
}

int pymon__open(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		uint64_t start_time, struct pymon **out)
{
	struct pymon *pm;
	int err = open_proc(py, t, ring_mb, start_time, &pm);

	if (err)
		return err;
	err = tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle, write_losses, pm);
	if (err) {
		pymon__destroy(pm);
		return err;
	}
	tracer__set_source(t, drain, pm);
	*out = pm;
	return 0;
}

int pymon__add(struct pymon *pm, const struct py_interp *py, uint64_t start_time)
{
	struct pymon *last = pm, *n;
	int err;

	for (; last->next; last = last->next) {
		if (last->py.pid == py->pid)
			return -EEXIST;
	}
	if (last->py.pid == py->pid)
		return -EEXIST;
	err = open_proc(py, pm->t, pm->ring_mb, start_time, &n);
	if (!err)
		last->next = n;
	return err;
}

/* The target's connection (SO_PEERCRED: its pid and uid), others closed. */
static int accept_agent(struct pymon *pm, char *err, size_t errlen)
{
	uint64_t end = now_ns(CLOCK_MONOTONIC) + WAIT_MS * 1000000ull, now;
	struct pollfd p = {.fd = pm->lfd, .events = POLLIN};
	int foreign = 0;
	uid_t uid;

	if (proc_euid(pm->py.pid, &uid)) {
		snprintf(err, errlen, "cannot read the uid of pid %d", pm->py.pid);
		return -ESRCH;
	}
	while ((now = now_ns(CLOCK_MONOTONIC)) < end && foreign < MAX_FOREIGN) {
		struct ucred cred = {};
		socklen_t len = sizeof(cred);
		int fd;

		if (poll(&p, 1, (int)((end - now) / 1000000 + 1)) <= 0)
			continue;
		fd = accept4(pm->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) &&
		    cred.pid == pm->py.pid && cred.uid == uid) {
			pm->sock = fd;
			return 0;
		}
		foreign++;
		pr_warn("pid %d (uid %u) connected to the in-process agent's socket and is not "
			"the target: closed",
			cred.pid, (unsigned int)cred.uid);
		close(fd);
	}
	snprintf(err, errlen, "the agent in pid %d did not connect within %d s", pm->py.pid,
		 WAIT_MS / 1000);
	return -ETIMEDOUT;
}

/* An offset of pyoffsets.h for the agent: -1 for none (or one no struct has). */
static int32_t layout_off(uint32_t off)
{
	return off == PTG_OFF_NONE || off > 4096 ? -1 : (int32_t)off;
}

static int send_setup(struct pymon *pm)
{
	const struct ptg_py_offsets *o = &pm->py.info->off;
	static struct ptg_pymon_setup s; /* 4 KiB */
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = {};
	struct iovec iov = {.iov_base = &s, .iov_len = sizeof(s)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memset(&s, 0, sizeof(s));
	s.version = PTG_PYMON_PROTO_VERSION;
	s.flags = pm->ops ? PTG_PYMON_WANT_OPS : 0;
	s.layout = (struct ptg_pymon_layout){
	    .tstate_cframe = layout_off(o->tstate_cframe),
	    .current_frame = layout_off(o->cframe_current_frame),
	    .frame_code = layout_off(o->frame_code),
	    .frame_localsplus = layout_off(o->frame_localsplus),
	    .frameobj_frame = layout_off(o->frameobj_frame),
	    .frame_prev_instr = -1,
	    .ref_mask = PTG_PY_REF_MASK,
	    .tstate_profilefunc = -1,
	    .resume_where_mask = pm->py.info->resume_where_mask,
	};
	/*
	 * 3.11's PyThreadState: c_profilefunc right after the cframe pointer
	 * (Include/cpython/pystate.h); the agent checks it on its own thread state
	 */
	if (pm->py.version_hex < 0x030c0000 && s.layout.tstate_cframe >= 0) {
		s.layout.tstate_profilefunc = s.layout.tstate_cframe + 8;
		s.layout.frame_prev_instr = layout_off(o->frame_prev_instr);
	}
	for (int i = 0; i < PY_MAX_HANDLERS && i < (int)sizeof(s.layout.resume_ops) - 1; i++)
		s.layout.resume_ops[i] = pm->py.ops.resume[i];
	for (int i = 0; i < PY_MAX_HANDLERS && i < (int)sizeof(s.layout.yield_ops) - 1; i++)
		s.layout.yield_ops[i] = pm->py.ops.yield[i];
	snprintf(s.libpython, sizeof(s.libpython), "%s", pm->py.path);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pm->memfd, sizeof(int));
	return sendmsg(pm->sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(s) ? 0 : -EPIPE;
}

/* The target's text for our terminal: NUL-ended, no control characters. */
static void printable(char *s, size_t size)
{
	s[size - 1] = '\0';
	for (; *s; s++)
		*s = *s < 0x20 || *s == 0x7f ? '?' : *s;
}

/* The agent's one answer, within WAIT_MS: it needs the GIL first. */
static int read_status(struct pymon *pm, struct ptg_pymon_status *st, char *err, size_t errlen)
{
	uint64_t end = now_ns(CLOCK_MONOTONIC) + WAIT_MS * 1000000ull, now;
	struct pollfd p = {.fd = pm->sock, .events = POLLIN};
	size_t got = 0;

	while (got < sizeof(*st) && (now = now_ns(CLOCK_MONOTONIC)) < end) {
		ssize_t n;

		if (poll(&p, 1, (int)((end - now) / 1000000 + 1)) <= 0)
			continue;
		n = recv(pm->sock, (char *)st + got, sizeof(*st) - got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
			snprintf(err, errlen, "the agent in pid %d hung up before it started",
				 pm->py.pid);
			return -EPIPE;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	if (got < sizeof(*st)) {
		snprintf(err, errlen,
			 "the agent in pid %d did not get the GIL within %d s (a thread holds "
			 "it without running Python?); nothing was changed in it",
			 pm->py.pid, WAIT_MS / 1000);
		return -ETIMEDOUT;
	}
	printable(st->msg, sizeof(st->msg));
	printable(st->ops_msg, sizeof(st->ops_msg));
	if (st->version != PTG_PYMON_PROTO_VERSION) {
		snprintf(err, errlen, "the agent in pid %d is of another build (protocol %u)",
			 pm->py.pid, st->version);
		return -EPROTO;
	}
	if (st->state != PTG_PYMON_ACTIVE) {
		snprintf(err, errlen, "pid %d: %s", pm->py.pid, st->msg);
		return -EBUSY;
	}
	return 0;
}

/* One process's agent injected and started. After a message on error. */
static int attach_proc(struct pymon *pm)
{
	struct inject_opts o = {
	    .entry = PTG_PYMON_ATTACH_SYM, .arg = pm->name, .start_time = pm->start_time};
	struct inject_result res;
	struct ptg_pymon_status st;
	char err[PATH_MAX + 640];
	int ret;

	ret = inject_library_fd(pm->py.pid, pm->agent_fd, AGENT_NAME, &o, &res, err, sizeof(err));
	if (!ret && res.entry_ret == 1) {
		snprintf(err, sizeof(err), "the agent in pid %d is busy with another recording",
			 pm->py.pid);
		ret = -EBUSY;
	} else if (!ret && res.entry_ret < 0) {
		snprintf(err, sizeof(err), "the agent in pid %d did not start: %s", pm->py.pid,
			 strerror(-res.entry_ret));
		ret = res.entry_ret;
	}
	ret = ret ?: accept_agent(pm, err, sizeof(err));
	if (!ret && send_setup(pm)) {
		snprintf(err, sizeof(err), "the agent in pid %d hung up", pm->py.pid);
		ret = -EPIPE;
	}
	ret = ret ?: read_status(pm, &st, err, sizeof(err));
	if (ret) {
		pr_err("record --in-process: %s", err);
		return ret;
	}
	pm->tool_id = st.tool_id;
	pm->ops_on = pm->ops && st.ops == 1;
	snprintf(pm->ops_msg, sizeof(pm->ops_msg), "%s", pm->ops_on ? "" : st.ops_msg);
	/* this process's ops come from its agent: its libraries are not probed */
	if (pm->ops_on)
		torchops__in_process(pm->ops, pm->py.pid);
	return 0;
}

int pymon__attach(struct pymon *pm)
{
	int ret = 0;

	for (struct pymon *p = pm; p && !ret; p = p->next)
		ret = attach_proc(p);
	/* all or none: the agents already in take their callbacks out */
	if (ret)
		pymon__stop(pm);
	return ret;
}

void pymon__set_ops(struct pymon *pm, struct torchops *ops)
{
	for (; pm; pm = pm->next)
		pm->ops = ops;
}

void pymon__stop(struct pymon *pm)
{
	for (; pm; pm = pm->next) {
		if (pm->sock >= 0)
			close(pm->sock);
		if (pm->lfd >= 0)
			close(pm->lfd);
		pm->sock = pm->lfd = -1;
	}
}

void pymon__stats(const struct pymon *pm, struct pymon_stats *st)
{
	struct pystack_stats ps;

	*st = (struct pymon_stats){.tool_id = -1};
	for (; pm; pm = pm->next) {
		pystack__stats(pm->ps, &ps);
		st->dropped += pm->ring ? __atomic_load_n(&pm->ring->dropped, __ATOMIC_RELAXED) : 0;
		st->bad += pm->bad;
		st->unresolved += ps.unresolved;
		st->unmatched += ps.unmatched;
		if (!st->procs++)
			st->tool_id = pm->tool_id;
		st->ops_procs += pm->ops_on;
		if (!pm->ops_on && !st->ops_msg) {
			st->ops_msg = pm->ops_msg;
			st->ops_msg_pid = pm->py.pid;
		}
	}
	st->ops = st->procs && st->ops_procs == st->procs;
}

/* What the agent took in one process: its sys.monitoring tool id or 3.11's hook, and ops. */
static size_t describe_proc(const struct pymon *pm, char *buf, size_t len)
{
	int n;

	if (pm->tool_id >= 0)
		n = snprintf(buf, len, "sys.monitoring tool id %d%s", pm->tool_id,
			     pm->ops_on ? ", ops by RecordFunction" : "");
	else
		n = snprintf(buf, len, "a C profile function%s",
			     pm->ops_on ? ", ops by RecordFunction" : "");
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void pymon__describe(const struct pymon *pm, char *buf, size_t len)
{
	size_t at = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (pm && !pm->next) {
		describe_proc(pm, buf, len);
		return;
	}
	for (; pm && at + 1 < len; pm = pm->next) {
		int n = snprintf(buf + at, len - at, "%spid %d: ", at ? "; " : "", pm->py.pid);

		at += n < 0 ? 0 : (size_t)n;
		if (at + 1 < len)
			at += describe_proc(pm, buf + at, len - at);
	}
}

void pymon__destroy(struct pymon *pm)
{
	struct pymon *next;

	for (; pm; pm = next) {
		next = pm->next;
		pymon__stop(pm);
		if (pm->ring)
			munmap(pm->ring, pm->map_len);
		if (pm->memfd >= 0)
			close(pm->memfd);
		if (pm->memfd_target >= 0)
			close(pm->memfd_target);
		if (pm->agent_fd >= 0)
			close(pm->agent_fd);
		u64map__free(&pm->depths);
		u64map__free(&pm->fprints);
		u64map__free(&pm->opnames);
		pystack__free(pm->ps);
		free(pm);
	}
}
