// SPDX-License-Identifier: MIT
/*
 * libptg_pymon.so's callbacks (ptg_pymon_agent.c has the rest): what runs
 * in the application's threads at each frame event. One record per event
 * into the ring, never a wait for the loader; each code object named in a
 * CODE group and kept alive at its first sight in a generation of the code
 * set; the thread's stack sent with its first event and after a drop.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ptg_pymon_shared.h"

#define METH_FASTCALL_ 0x0080

struct pymon_api api;
struct pymon_agent ag = {.lock = PTHREAD_MUTEX_INITIALIZER, .sock = -1, .tool = -1};

/* What the callbacks read: the ring of the active session, or NULL. */
struct ptg_pymon_ring *cb_ring;
struct ptg_pymon_rec *cb_recs;
uint64_t cb_mask;
uint32_t cb_gen;	     /* +1 per session: a thread's first event in it sends its stack */
uint64_t cb_tail;	     /* the loader's tail as last read */
struct ptg_pymon_layout lay; /* where a frame's first local is */
int lay_ok;		     /* lay checked: 1 good, -1 not, 0 not yet */
bool cb_gil;		     /* the interpreter has a GIL: one callback at a time */

/* one thread-local block: one TLS lookup per callback in a dlopen()ed library */
static __thread struct rec_thread t_rec;

uint64_t rec_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct rec_thread *rec_thread(void)
{
	struct rec_thread *th = &t_rec;
	uint32_t gen = __atomic_load_n(&cb_gen, __ATOMIC_RELAXED);

	if (th->gen != gen) {
		*th = (struct rec_thread){
		    .gen = gen, .tid = (uint32_t)syscall(SYS_gettid), .snap = SNAP_FIRST};
	}
	return th;
}

static size_t code_hash(const PyObject *code, size_t cap)
{
	return ((uintptr_t)code >> 4) * 0x9e3779b97f4a7c15ull & (cap - 1);
}

static bool codeset_has(const struct codeset *cs, const PyObject *code)
{
	for (size_t h = code_hash(code, cs->cap);; h = (h + 1) & (cs->cap - 1)) {
		PyObject *s = __atomic_load_n(&cs->slots[h], __ATOMIC_ACQUIRE);

		if (s == code)
			return true;
		if (!s)
			return false;
	}
}

static void codeset_put(struct codeset *cs, PyObject *code)
{
	size_t h = code_hash(code, cs->cap);

	while (cs->slots[h])
		h = (h + 1) & (cs->cap - 1);
	__atomic_store_n(&cs->slots[h], code, __ATOMIC_RELEASE);
}

struct codeset *codeset_new(size_t cap)
{
	struct codeset *cs = malloc(sizeof(*cs));

	if (cs && !(cs->slots = calloc(cap, sizeof(*cs->slots)))) {
		free(cs);
		cs = NULL;
	}
	if (cs)
		cs->cap = cap;
	return cs;
}

static void codeset_free(struct codeset *cs)
{
	if (cs)
		free(cs->slots);
	free(cs);
}

/*
 * A larger table, published once full: readers without the lock may still
 * look in the old one where callbacks run at once (a free-threaded build),
 * so there old tables are freed only when the session ends; under a GIL
 * every reader is a callback that holds it, and the old one goes at once.
 */
static struct codeset *codeset_grow(struct codeset *cs)
{
	struct codeset *n;

	if (!cb_gil && ag.nold == (int)(sizeof(ag.old) / sizeof(ag.old[0])))
		return NULL;
	n = codeset_new(cs->cap * 2);
	if (!n)
		return NULL;
	for (size_t i = 0; i < cs->cap; i++) {
		if (cs->slots[i])
			codeset_put(n, cs->slots[i]);
	}
	__atomic_store_n(&ag.codes, n, __ATOMIC_RELEASE);
	if (cb_gil)
		codeset_free(cs);
	else
		ag.old[ag.nold++] = cs;
	return n;
}

/*
 * Under a GIL, a full generation (MAX_KEPT) is retired with the ring's head
 * now, which is past every record that names its code objects (callbacks
 * take turns, and each reserves its records before the next runs), and an
 * empty one takes its place: a code object still in use is seen anew, and
 * its CODE group sent again, at its next record. The loader applies CODE
 * groups in ring order, so an address that a later code object takes is
 * named anew at its turn. NULL: no room for another retired generation.
 * Under ag.lock.
 */
static struct codeset *retire(struct ptg_pymon_ring *r, struct codeset *cs)
{
	struct codeset *n, **last = &ag.retired;

	if (ag.nretired >= MAX_RETIRED)
		return NULL;
	n = codeset_new(MIN_CODES);
	if (!n)
		return cs; /* out of memory: this one grows */
	cs->head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
	cs->at = 0;
	cs->next = NULL;
	while (*last)
		last = &(*last)->next;
	*last = cs;
	ag.nretired++;
	ag.ncodes = 0;
	__atomic_store_n(&ag.codes, n, __ATOMIC_RELEASE);
	return n;
}

/*
 * Drops the references of the oldest retired generation, RELEASE_BATCH at
 * a time, once the loader has read past its head: no record it has yet to
 * read names them, and it has their names. A callback, under the GIL. A
 * reference dropped may run code (a weakref's callback) that lets other
 * threads run, and this one's callbacks too: the batch is taken out of the
 * set, and the set out of the list once empty, before any is dropped.
 */
static void release_retired(struct ptg_pymon_ring *r)
{
	struct codeset *cs = ag.retired;
	PyObject *batch[RELEASE_BATCH];
	uint32_t n = 0;

	if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) < cs->head)
		return;
	while (cs->at < cs->cap && n < RELEASE_BATCH) {
		batch[n] = cs->slots[cs->at];
		cs->slots[cs->at++] = NULL;
		n += batch[n] != NULL;
	}
	if (cs->at == cs->cap) {
		pthread_mutex_lock(&ag.lock);
		ag.retired = cs->next;
		ag.nretired--;
		pthread_mutex_unlock(&ag.lock);
		codeset_free(cs);
	}
	for (uint32_t i = 0; i < n; i++)
		api.DecRef(batch[i]);
}

/*
 * The code object kept alive, its CODE group just sent: one reference, in
 * the current generation. False when there is no room for it (see retire()).
 */
static bool keep(struct ptg_pymon_ring *r, PyObject *code)
{
	struct codeset *cs;
	bool ok = true;

	pthread_mutex_lock(&ag.lock);
	cs = ag.codes;
	if (cs && cb_gil && ag.ncodes >= MAX_KEPT && !codeset_has(cs, code)) {
		cs = retire(r, cs);
		ok = cs != NULL;
	}
	if (cs && !codeset_has(cs, code) && (ag.ncodes + 1) * 2 > cs->cap)
		cs = codeset_grow(cs);
	/* no room (cannot be short of memory): unkept, its CODE group is sent again */
	if (cs && !codeset_has(cs, code)) {
		api.IncRef(code);
		codeset_put(cs, code);
		ag.ncodes++;
	}
	pthread_mutex_unlock(&ag.lock);
	return ok;
}

/*
 * UTF-8 of the str attribute attr of code into out, at most max bytes (cut
 * at a character's start): its length, or SIZE_MAX when it cannot be had.
 * The callbacks are called with no exception set (the interpreter keeps
 * an unwinding one aside), so one of ours is cleared, not someone else's.
 */
static size_t code_str(PyObject *code, const char *attr, char *out, size_t max, uint64_t *obj)
{
	PyObject *s = api.GetAttrString(code, attr);
	const char *u = s && api.Unicode_AsUTF8 ? api.Unicode_AsUTF8(s) : NULL;
	size_t n = SIZE_MAX;

	*obj = (uintptr_t)s; /* the code object's own reference: the same object */
	if (u) {
		n = strnlen(u, max + 1);
		if (n > max)
			for (n = max; n && ((uint8_t)u[n] & 0xc0) == 0x80; n--)
				;
		memcpy(out, u, n);
	} else {
		api.Err_Clear();
	}
	if (s)
		api.DecRef(s);
	return n;
}

/*
 * A code object new to the generation: its names and first line as a CODE
 * group (agent/ptg_pymon_proto.h), ahead of its first record, so that the
 * loader has them even when an exec replaces our memory before it reads
 * it, and names its address anew from there. Names that cannot be had (a
 * filename that is no UTF-8) go as an empty group: the loader reads the
 * object from memory. False when the group found no room: then no record
 * may name the code object (the loader would take the address for an
 * older one's).
 */
static bool send_code(struct ptg_pymon_ring *r, const struct rec_thread *th, PyObject *code,
		      uint64_t ts)
{
	char b[16 + PTG_PYMON_MAX_QUALNAME + PTG_PYMON_MAX_FILENAME + 16];
	uint64_t idx, arg, objs[2] = {0, 0};
	size_t q, f = SIZE_MAX;
	PyObject *line;
	uint32_t n;
	long ln = -1;

	q = code_str(code, "co_qualname", b + 16, PTG_PYMON_MAX_QUALNAME, &objs[0]);
	if (q != SIZE_MAX)
		f = code_str(code, "co_filename", b + 16 + q, PTG_PYMON_MAX_FILENAME, &objs[1]);
	if (f != SIZE_MAX) {
		line = api.GetAttrString(code, "co_firstlineno");
		ln = line ? api.Long_AsLong(line) : -1;
		if (line)
			api.DecRef(line);
	}
	if (ln < 0 || ln > UINT32_MAX || (!q && !f)) {
		api.Err_Clear();
		q = f = 0;
		ln = 0;
		objs[0] = objs[1] = 0;
	}
	/* 3.11, waiting for threading: its module's body is about to run */
	if (__atomic_load_n(&threading_wait, __ATOMIC_RELAXED) && q == 8 && f >= 13 &&
	    !memcmp(b + 16, "<module>", 8) && !memcmp(b + 16 + q + f - 13, "/threading.py", 13))
		threading_code = code;
	memcpy(b, objs, 16);
	memset(b + 16 + q + f, 0, 16);
	n = (uint32_t)(1 + (q + f + 15) / 16);
	if (!rec_reserve(r, n + 1, &idx))
		return false;
	arg = (uint64_t)ln | (uint64_t)q << 32 | (uint64_t)f << 48;
	rec_put(th, idx++, PTG_PYMON_CODE, arg, (uintptr_t)code, ts);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w[2];

		memcpy(w, b + i * 16, 16);
		rec_put(th, idx++, PTG_PYMON_NAME_BYTES, w[1], 0, w[0]);
	}
	return true;
}

/*
 * Whether a record may name code now: it is in the current generation, or
 * its CODE group went into the ring just now and it is kept from here on.
 * False (an event lost, counted): no room for either.
 */
static bool see(struct ptg_pymon_ring *r, const struct rec_thread *th, PyObject *code, uint64_t ts)
{
	struct codeset *cs = __atomic_load_n(&ag.codes, __ATOMIC_ACQUIRE);

	if (!cs || codeset_has(cs, code))
		return true;
	if (!send_code(r, th, code, ts))
		return false;
	if (keep(r, code))
		return true;
	__atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
	return false;
}

/*
 * Room for n records, from the loader's tail as last seen: its cache line
 * is read again only when the ring looks full, not at every call.
 */
static bool room(struct ptg_pymon_ring *r, uint64_t h, uint64_t n)
{
	uint64_t t = __atomic_load_n(&cb_tail, __ATOMIC_RELAXED);

	if (h - t + n <= cb_mask + 1)
		return true;
	t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	__atomic_store_n(&cb_tail, t, __ATOMIC_RELAXED);
	return h - t + n <= cb_mask + 1;
}

/*
 * n consecutive records, or false (the event counted as dropped) when the
 * loader has not made room for them. Under a GIL the callbacks take turns: a plain add; a
 * free-threaded build's run at once, and so do op callbacks (ptg_pymon_ops.c), which
 * need no GIL: a compare-and-swap.
 */
bool rec_try_reserve(struct ptg_pymon_ring *r, uint64_t n, uint64_t *idx)
{
	uint64_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);

	do {
		if (!room(r, h, n))
			return false;
		if (cb_gil && !cb_ops) {
			__atomic_store_n(&r->head, h + n, __ATOMIC_RELAXED);
			break;
		}
	} while (!__atomic_compare_exchange_n(&r->head, &h, h + n, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	*idx = h;
	return true;
}

bool rec_reserve(struct ptg_pymon_ring *r, uint64_t n, uint64_t *idx)
{
	if (rec_try_reserve(r, n, idx))
		return true;
	/* one event lost (a stack that came with it is sent again) */
	__atomic_fetch_add(&r->dropped, 1, __ATOMIC_RELAXED);
	return false;
}

void rec_put(const struct rec_thread *th, uint64_t idx, uint16_t kind, uint64_t arg, uint64_t code,
	     uint64_t ts)
{
	struct ptg_pymon_rec *p = &cb_recs[idx & cb_mask];

	p->ts = ts;
	p->code_kind = code | (uint64_t)kind << PTG_PYMON_KIND_SHIFT;
	p->tid = th->tid;
	p->arg = arg;
	__atomic_store_n(&p->seq, (uint32_t)(idx + 1), __ATOMIC_RELEASE);
}

/* A read that cannot fault: for checking the layout once, before plain reads trust it. */
static bool safe_read(uintptr_t addr, void *out, size_t n)
{
	struct iovec l = {.iov_base = out, .iov_len = n},
		     r = {.iov_base = (void *)addr, .iov_len = n};

	return addr && process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}

/* The current frame from the thread state, as the layout says; 0 when unreadable. */
static uintptr_t current_frame(bool safe)
{
	uintptr_t t = (uintptr_t)api.ThreadState_Get(), f = 0;

	if (lay.tstate_cframe >= 0) {
		if (safe ? !safe_read(t + (uint32_t)lay.tstate_cframe, &t, sizeof(t))
			 : !(t = *(uintptr_t *)(t + (uint32_t)lay.tstate_cframe)))
			return 0;
	}
	if (safe)
		return safe_read(t + (uint32_t)lay.current_frame, &f, sizeof(f)) ? f : 0;
	return *(uintptr_t *)(t + (uint32_t)lay.current_frame);
}

/*
 * The loader's layout, checked once against the interpreter itself: the
 * frame the thread state leads to is the one PyEval_GetFrame()'s frame
 * object holds, and runs its code. Read without a fault on the way; if it
 * does not hold, no first local is read at all (ops then get no module names).
 */
static void check_layout(void)
{
	PyObject *fo = api.Eval_GetFrame(), *code;
	uintptr_t f, via_obj = 0;
	uint64_t c = 0;
	int ok = -1;

	if (!fo)
		return; /* no Python frame to check against: next time */
	f = lay.current_frame >= 0 && lay.frame_code >= 0 && lay.frame_localsplus >= 0 &&
		    lay.frameobj_frame >= 0
		? current_frame(true)
		: 0;
	code = api.Frame_GetCode(fo);
	if (f && safe_read((uintptr_t)fo + (uint32_t)lay.frameobj_frame, &via_obj, 8) &&
	    via_obj == f && safe_read(f + (uint32_t)lay.frame_code, &c, 8) &&
	    (c & lay.ref_mask) == (uintptr_t)code)
		ok = 1;
	/* 3.11: the instruction the frame is at is read too */
	if (ok == 1 && lay.frame_prev_instr >= 0 &&
	    (!safe_read(f + (uint32_t)lay.frame_prev_instr, &c, 8) || !safe_read(c, &c, 2)))
		ok = -1;
	if (code)
		api.DecRef(code);
	__atomic_store_n(&lay_ok, ok, __ATOMIC_RELAXED);
}

/* The first local of the frame that runs code now (self of a method), 0 if unknown. */
static uint64_t first_local(PyObject *code)
{
	uintptr_t f;

	if (__atomic_load_n(&lay_ok, __ATOMIC_RELAXED) <= 0)
		return 0;
	f = current_frame(false);
	if (!f || (*(uint64_t *)(f + (uint32_t)lay.frame_code) & lay.ref_mask) != (uintptr_t)code)
		return 0;
	return *(uint64_t *)(f + (uint32_t)lay.frame_localsplus) & lay.ref_mask;
}

/* The same for a frame object of the stack. */
static uint64_t object_local(PyObject *fo)
{
	uintptr_t f;

	if (__atomic_load_n(&lay_ok, __ATOMIC_RELAXED) <= 0)
		return 0;
	f = *(uintptr_t *)((uintptr_t)fo + (uint32_t)lay.frameobj_frame);
	return f ? *(uint64_t *)(f + (uint32_t)lay.frame_localsplus) & lay.ref_mask : 0;
}

/* What a START record carries: its frame's first local, 0 if unknown or not a START. */
static uint64_t start_local(uint16_t kind, PyObject *code, PyObject *fo)
{
	if (kind != PTG_PYMON_START)
		return 0;
	return fo ? object_local(fo) : first_local(code);
}

static bool is_entry(uint16_t kind)
{
	return kind == PTG_PYMON_START || kind == PTG_PYMON_RESUME || kind == PTG_PYMON_THROW;
}

/*
 * The thread's stack before this event, then the event, in one group. In
 * an entry's callback the new frame is already current: it is the event's,
 * not the stack's. Frame objects made on the way are the interpreter's own
 * (as sys._getframe() makes them).
 */
static bool put_with_stack(struct ptg_pymon_ring *r, const struct rec_thread *th, uint16_t kind,
			   PyObject *code, PyObject *fo, uint64_t ts)
{
	PyObject *codes[PTG_PYMON_MAX_DEPTH + 1], *f = api.Eval_GetFrame(), *b;
	uint64_t locals[PTG_PYMON_MAX_DEPTH + 1], idx;
	uint32_t n = 0, skip = 0;
	bool named = true;

	if (f)
		api.IncRef(f);
	while (f && n < PTG_PYMON_MAX_DEPTH + 1) {
		PyObject *c = api.Frame_GetCode(f);

		locals[n] = object_local(f);
		codes[n++] = c;
		if (c) {
			/* a frame that cannot be named: the group waits for the next event */
			if (named && !see(r, th, c, ts))
				named = false;
			api.DecRef(c); /* kept alive by keep(), or a frame of the stack */
		}
		b = api.Frame_GetBack(f);
		api.DecRef(f);
		f = b;
	}
	if (f)
		api.DecRef(f); /* deeper than a snapshot holds: the innermost frames are sent */
	if (is_entry(kind) && n && codes[0] == code)
		skip = 1;
	if (n - skip > PTG_PYMON_MAX_DEPTH)
		n = PTG_PYMON_MAX_DEPTH + skip;
	if (!named || !rec_reserve(r, n - skip + 2, &idx))
		return false;
	rec_put(th, idx++, PTG_PYMON_STACK, th->snap, n - skip, ts);
	for (uint32_t i = skip; i < n; i++)
		rec_put(th, idx++, PTG_PYMON_FRAME, locals[i], (uintptr_t)codes[i], ts);
	rec_put(th, idx, kind, start_local(kind, code, fo), (uintptr_t)code, ts);
	return true;
}

/* One frame event; fo: its frame object (3.11's profile function), or NULL. */
static void on_code(uint16_t kind, PyObject *code, PyObject *fo)
{
	struct ptg_pymon_ring *r = __atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE);
	struct rec_thread *th;
	uint64_t ts, idx;

	if (!r || !code)
		return;
	th = rec_thread();
	ts = rec_now();
	if (__atomic_load_n(&ag.retired, __ATOMIC_RELAXED) && cb_gil)
		release_retired(r);
	if (!__atomic_load_n(&lay_ok, __ATOMIC_RELAXED))
		check_layout();
	if (is_entry(kind) && !see(r, th, code, ts)) {
		/* lost (counted): the loader's idea of this stack is wrong now */
		th->snap = th->snap ?: SNAP_RESYNC;
	} else if (th->snap) {
		if (put_with_stack(r, th, kind, code, fo, ts))
			th->snap = 0;
	} else if (rec_reserve(r, 1, &idx)) {
		rec_put(th, idx, kind, start_local(kind, code, fo), (uintptr_t)code, ts);
	} else {
		/* the loader's idea of this stack is wrong now */
		th->snap = SNAP_RESYNC;
	}
}

static PyObject *on_event(uint16_t kind, PyObject *const *args, ssize_t nargs)
{
	if (nargs >= 1)
		on_code(kind, args[0], NULL);
	api.IncRef(api.none);
	return api.none;
}

static bool op_in(const uint8_t *list, size_t n, uint8_t op)
{
	for (size_t i = 0; i < n && list[i]; i++) {
		if (list[i] == op)
			return true;
	}
	return false;
}

/*
 * 3.11: what a call or return event is, from the instruction the frame is
 * at (its prev_instr): a call at RESUME with oparg 0 starts the code, at
 * another RESUME resumes a generator or coroutine, anywhere else is a
 * throw() into it (the interpreter's throw entry); a return at YIELD_VALUE
 * suspends it. As sys.monitoring's PY_* events of 3.12. Unknown (the
 * layout did not check out): a start or a return.
 */
static uint16_t frame_kind(PyObject *fo, bool entry)
{
	uint16_t unit, *instr;
	uintptr_t f;
	uint8_t op;

	if (__atomic_load_n(&lay_ok, __ATOMIC_RELAXED) <= 0 || lay.frame_prev_instr < 0)
		return entry ? PTG_PYMON_START : PTG_PYMON_RETURN;
	f = *(uintptr_t *)((uintptr_t)fo + (uint32_t)lay.frameobj_frame);
	instr = f ? *(uint16_t **)(f + (uint32_t)lay.frame_prev_instr) : NULL;
	unit = instr ? *instr : 0;
	op = (uint8_t)(unit & 0xff);
	if (!entry)
		return op_in(lay.yield_ops, sizeof(lay.yield_ops), op) ? PTG_PYMON_YIELD
								       : PTG_PYMON_RETURN;
	if (!op_in(lay.resume_ops, sizeof(lay.resume_ops), op))
		return PTG_PYMON_THROW;
	return (unit >> 8) & lay.resume_where_mask ? PTG_PYMON_RESUME : PTG_PYMON_START;
}

bool threading_wait;
PyObject *threading_code;

/*
 * threading.py's body has run: its module is in sys.modules, and the hook
 * goes in before anything can start a thread with it. Called from the
 * profile function, so the Python that setprofile() runs is not profiled.
 * Another file of that name (not the module threading) keeps the wait on.
 */
static void threading_imported(void)
{
	PyObject *name = api.Unicode_FromString("threading"), *m;

	threading_code = NULL;
	m = name ? api.GetModule(name) : NULL;
	if (name)
		api.DecRef(name);
	api.Err_Clear();
	if (!m)
		return;
	__atomic_store_n(&threading_wait, false, __ATOMIC_RELAXED);
	hook_threading(m);
	api.DecRef(m);
}

/* 3.11's Py_tracefunc (PyTrace_CALL 0, PyTrace_RETURN 3): C calls are not recorded. */
int on_profile(PyObject *obj, PyObject *fo, int what, PyObject *arg)
{
	PyObject *code;
	uint16_t kind;

	(void)obj;
	if ((what != 0 && what != 3) || !fo || !__atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE))
		return 0;
	if (!__atomic_load_n(&lay_ok, __ATOMIC_RELAXED))
		check_layout();
	/* a return without a value: the frame exits by an exception */
	kind = what == 3 && !arg ? PTG_PYMON_UNWIND : frame_kind(fo, what == 0);
	code = api.Frame_GetCode(fo);
	on_code(kind, code, fo);
	if (threading_code && code == threading_code && kind == PTG_PYMON_RETURN)
		threading_imported();
	if (code)
		api.DecRef(code); /* kept alive by keep(), or by its frame */
	return 0;
}

/*
 * threading's profile hook (3.11): a thread started while we record calls
 * it, through sys.setprofile's trampoline, from its first event on. It puts
 * the C profile function in its place for the thread; that first event is
 * the call of the thread's run() (Thread._bootstrap_inner), recorded here.
 * Outside a session it takes itself out.
 */
static PyObject *on_thread_start(PyObject *self, PyObject *const *args, ssize_t nargs)
{
	bool on = __atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE) != NULL;
	const char *ev;

	(void)self;
	if (api.SetProfileOf(api.ThreadState_Get(), on ? on_profile : NULL, on ? ag.hook : NULL))
		api.Err_Clear();
	if (on && nargs == 3 && (ev = api.Unicode_AsUTF8(args[1])) && !strcmp(ev, "call"))
		on_profile(NULL, args[0], 0, NULL);
	api.Err_Clear();
	api.IncRef(api.none);
	return api.none;
}

struct method_def hook_def = {"ptg_thread_profile", (void *)on_thread_start, METH_FASTCALL_, NULL};

#define CALLBACK(name, kind)                                                                       \
	static PyObject *name(PyObject *self, PyObject *const *args, ssize_t nargs)                \
	{                                                                                          \
		(void)self;                                                                        \
		return on_event(kind, args, nargs);                                                \
	}

CALLBACK(on_start, PTG_PYMON_START)
CALLBACK(on_resume, PTG_PYMON_RESUME)
CALLBACK(on_return, PTG_PYMON_RETURN)
CALLBACK(on_yield, PTG_PYMON_YIELD)
CALLBACK(on_unwind, PTG_PYMON_UNWIND)
CALLBACK(on_throw, PTG_PYMON_THROW)

const char *const event_names[6] = {"PY_START", "PY_RESUME", "PY_RETURN",
				    "PY_YIELD", "PY_UNWIND", "PY_THROW"};
struct method_def defs[6] = {
    {"ptg_py_start", (void *)on_start, METH_FASTCALL_, NULL},
    {"ptg_py_resume", (void *)on_resume, METH_FASTCALL_, NULL},
    {"ptg_py_return", (void *)on_return, METH_FASTCALL_, NULL},
    {"ptg_py_yield", (void *)on_yield, METH_FASTCALL_, NULL},
    {"ptg_py_unwind", (void *)on_unwind, METH_FASTCALL_, NULL},
    {"ptg_py_throw", (void *)on_throw, METH_FASTCALL_, NULL},
};

static void codeset_drop(struct codeset *cs)
{
	for (size_t i = 0; cs && i < cs->cap; i++) {
		if (cs->slots[i])
			api.DecRef(cs->slots[i]);
	}
	codeset_free(cs);
}

void drop_codes(void)
{
	struct codeset *cs = ag.codes, *next;

	__atomic_store_n(&ag.codes, NULL, __ATOMIC_RELEASE);
	codeset_drop(cs);
	for (cs = ag.retired; cs; cs = next) {
		next = cs->next;
		codeset_drop(cs);
	}
	ag.retired = NULL;
	ag.nretired = 0;
	for (int i = 0; i < ag.nold; i++)
		codeset_free(ag.old[i]);
	ag.nold = 0;
	ag.ncodes = 0;
}
