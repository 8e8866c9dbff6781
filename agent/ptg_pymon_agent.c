// SPDX-License-Identifier: MIT
/*
 * libptg_pymon.so: the agent of `record --in-process`. Loaded into a Python
 * 3.11+ process by the loader (user/python/pymon.c) through ptrace, it
 * registers C callables as a sys.monitoring tool for the frame events
 * (PY_START, PY_RESUME, PY_RETURN, PY_YIELD, PY_UNWIND, PY_THROW) -- on 3.11,
 * which has no sys.monitoring, a C profile function on every thread that
 * tells the same events apart -- and writes one 32-byte record per event into
 * a ring the loader shares with it (agent/ptg_pymon_proto.h). For record's
 * default it registers PyTorch's RecordFunction callback alone
 * (PTG_PYMON_OPS_ONLY: the loader's uprobes record the frames). Rules it keeps:
 *  - the application never waits for the loader: a full ring drops (and
 *    counts) records, and the thread whose record was dropped sends its
 *    stack again with the next one;
 *  - a code object's names go into the ring ahead of its first record (a
 *    CODE group) and it is kept alive from then on, so that an address
 *    means one code object until the loader reads a new group for it;
 *    under a GIL the kept set is retired every MAX_KEPT code objects and
 *    its references dropped once the loader has read past it, so that a
 *    program that makes functions without end grows by a bounded amount;
 *  - when the loader closes the socket or dies, the agent's own thread takes
 *    the GIL and takes everything out (events, callbacks, tool id, code
 *    references, the ring) and stays loaded, idle, for a next session;
 *  - signals go to the application's threads, never to the agent's.
 * This file is the session, on the agent's own thread; the callbacks are
 * ptg_pymon_callbacks.c. It is built without Python's headers, for every
 * 3.11+ at once: the few
 * C-API functions it calls are looked up at attach (dlsym), and references
 * are counted with Py_IncRef / Py_DecRef, never the macros (immortal objects
 * of 3.12+, the free-threaded builds' split counts).
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ptg_agent_fd.h"
#include "ptg_pymon_shared.h"

#define PTG_EXPORT __attribute__((visibility("default")))

#define TOOL_NAME     "ptrace-gpu"
#define FIRST_TOOL    2 /* cProfile's PROFILER_ID is 2 on 3.12+: it wins if it got there first */
#define LAST_TOOL     5
#define SETUP_WAIT_S  10
#define LET_IN_WAIT_S 5	   /* under the loader's 10 s for a call it makes through ptrace */
#define CONSTANT_NONE 0	   /* Py_CONSTANT_NONE of Py_GetConstantBorrowed() (3.13+) */
#define EXIT_WAIT_MS  2000 /* longest the interpreter's exit waits for the loader to read */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool exit_hooked;
static bool hung_up; /* the session's loader closed the socket */

/*
 * How far the session's start has come, for ptg_pymon_let_in(): the C API
 * resolved (its GIL can be given up), then its one status sent. Under
 * phase_lock; back to P_NONE at each ptg_pymon_attach().
 */
enum start_phase { P_NONE, P_RESOLVED, P_ANSWERED };
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_cond = PTHREAD_COND_INITIALIZER;
static enum start_phase phase;
/* ptg_pymon_ops_in(): the op callback went in after the session started */
static bool ops_late;

/* --- the session: the agent's own thread --- */

static void *lookup(void *lib, const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);

	return p || !lib ? p : dlsym(lib, name);
}

/*
 * The process's interpreter: exported to everyone by a static build or a
 * libpython the executable links; an embedder's dlopen(RTLD_LOCAL) is
 * reached through its path (only if already loaded: RTLD_NOLOAD).
 */
static int api_resolve(const char *libpython, char *msg, size_t len)
{
	void *lib = libpython[0] ? dlopen(libpython, RTLD_NOW | RTLD_NOLOAD) : NULL;
	PyObject *(*constant)(unsigned int);

	if (api.ok)
		return 0;
#define API(field, sym)                                                                            \
	do {                                                                                       \
		*(void **)&api.field = lookup(lib, sym);                                           \
		if (!api.field) {                                                                  \
			snprintf(msg, len, "no %s in the process (not CPython 3.11+?)", sym);      \
			return -ENOENT;                                                            \
		}                                                                                  \
	} while (0)
	API(IsInitialized, "Py_IsInitialized");
	API(GILState_Ensure, "PyGILState_Ensure");
	API(GILState_Release, "PyGILState_Release");
	API(ImportModule, "PyImport_ImportModule");
	API(GetAttrString, "PyObject_GetAttrString");
	API(CallMethod, "PyObject_CallMethod");
	API(CFunction_NewEx, "PyCFunction_NewEx");
	API(Long_AsLong, "PyLong_AsLong");
	API(IncRef, "Py_IncRef");
	API(DecRef, "Py_DecRef");
	API(Err_Clear, "PyErr_Clear");
	API(Eval_GetFrame, "PyEval_GetFrame");
	API(Frame_GetBack, "PyFrame_GetBack");
	API(Frame_GetCode, "PyFrame_GetCode");
	API(ThreadState_Get, "PyThreadState_Get");
#undef API
	*(void **)&api.IsFinalizing = lookup(lib, "Py_IsFinalizing");
	if (!api.IsFinalizing)
		*(void **)&api.IsFinalizing = lookup(lib, "_Py_IsFinalizing");
	*(void **)&api.AtExit = lookup(lib, "Py_AtExit");
	*(void **)&api.GetVersion = lookup(lib, "Py_GetVersion");
	*(void **)&api.SetProfileOf = lookup(lib, "_PyEval_SetProfile");
	*(void **)&api.InterpHead = lookup(lib, "PyInterpreterState_Head");
	*(void **)&api.InterpNext = lookup(lib, "PyInterpreterState_Next");
	*(void **)&api.ThreadHead = lookup(lib, "PyInterpreterState_ThreadHead");
	*(void **)&api.ThreadNext = lookup(lib, "PyThreadState_Next");
	*(void **)&api.Unicode_AsUTF8 = lookup(lib, "PyUnicode_AsUTF8");
	*(void **)&api.GetModule = lookup(lib, "PyImport_GetModule");
	*(void **)&api.Unicode_FromString = lookup(lib, "PyUnicode_FromString");
	*(void **)&api.ThreadState_GetFrame = lookup(lib, "PyThreadState_GetFrame");
	*(void **)&api.GILState_Check = lookup(lib, "PyGILState_Check");
	*(void **)&api.UncheckedGet = lookup(lib, "PyThreadState_GetUnchecked"); /* 3.13+ */
	if (!api.UncheckedGet)
		*(void **)&api.UncheckedGet = lookup(lib, "_PyThreadState_UncheckedGet");
	*(void **)&api.SaveThread = lookup(lib, "PyEval_SaveThread");
	*(void **)&api.RestoreThread = lookup(lib, "PyEval_RestoreThread");
	*(void **)&constant = lookup(lib, "Py_GetConstantBorrowed");
	api.none = constant ? constant(CONSTANT_NONE) : lookup(lib, "_Py_NoneStruct");
	if (!api.none) {
		snprintf(msg, len, "no None object found in the process");
		return -ENOENT;
	}
	api.ok = true;
	return 0;
}

/* One method call of sys.monitoring; false (the exception cleared) when it raised. */
static bool mon_call(PyObject *mon, const char *name, const char *fmt, int a, long b, PyObject *c,
		     PyObject **out)
{
	PyObject *r;

	if (!strcmp(fmt, "i"))
		r = api.CallMethod(mon, name, fmt, a);
	else if (!strcmp(fmt, "is"))
		r = api.CallMethod(mon, name, fmt, a, TOOL_NAME);
	else if (!strcmp(fmt, "il"))
		r = api.CallMethod(mon, name, fmt, a, b);
	else
		r = api.CallMethod(mon, name, fmt, a, (int)b, c);
	if (!r) {
		api.Err_Clear();
		return false;
	}
	if (out)
		*out = r;
	else
		api.DecRef(r);
	return true;
}

static PyObject *import_monitoring(void)
{
	PyObject *sys = api.ImportModule("sys"), *mon;

	if (!sys) {
		api.Err_Clear();
		return NULL;
	}
	mon = api.GetAttrString(sys, "monitoring");
	api.DecRef(sys);
	if (!mon)
		api.Err_Clear();
	return mon;
}

/*
 * The first of tool ids 2..5 that nobody uses, or one named ours: this
 * agent's in a process forked while it recorded (the child inherits the
 * registration, and its callbacks are quiet there; see fork_child()).
 */
static int take_tool(PyObject *mon)
{
	for (int id = FIRST_TOOL; id <= LAST_TOOL; id++) {
		PyObject *name = NULL;
		bool free_ = false, ours = false;

		if (!mon_call(mon, "get_tool", "i", id, 0, NULL, &name))
			continue;
		free_ = name == api.none;
		if (!free_) {
			PyObject *eq = api.CallMethod(name, "__eq__", "s", TOOL_NAME);

			ours = eq && api.Long_AsLong(eq) == 1;
			if (eq)
				api.DecRef(eq);
			api.Err_Clear();
		}
		api.DecRef(name);
		if (ours && mon_call(mon, "free_tool_id", "i", id, 0, NULL, NULL))
			free_ = true;
		if (free_ && mon_call(mon, "use_tool_id", "is", id, 0, NULL, NULL))
			return id;
	}
	return -1;
}

/* Events off, callbacks out, the tool id free: the target as it was. Under the GIL. */
static void uninstall(PyObject *mon)
{
	if (ag.tool < 0)
		return;
	mon_call(mon, "set_events", "il", ag.tool, 0, NULL, NULL);
	for (int i = 0; i < 6; i++) {
		if (ag.events[i])
			mon_call(mon, "register_callback", "iiO", ag.tool, ag.events[i], api.none,
				 NULL);
	}
	mon_call(mon, "free_tool_id", "i", ag.tool, 0, NULL, NULL);
	ag.tool = -1;
}

/*
 * Whether callbacks run one at a time: no sys._is_gil_enabled() (before
 * 3.13), or it says so (a free-threaded build that re-enabled its GIL keeps
 * it for the rest of the process).
 */
static bool gil_enabled(void)
{
	PyObject *sys = api.ImportModule("sys"), *r;
	bool on = true;

	if (!sys) {
		api.Err_Clear();
		return false; /* cannot tell: the safe way */
	}
	r = api.CallMethod(sys, "_is_gil_enabled", NULL);
	if (r) {
		on = r != api.none && api.Long_AsLong(r) == 1;
		api.DecRef(r);
	}
	api.Err_Clear();
	api.DecRef(sys);
	return on;
}

/*
 * PTG_PYMON_ALONE: whether a thread other than this one is inside Python
 * code (has a frame). Under the GIL. The thread the loader holds has none.
 */
static bool others_in_python(void)
{
	void *own = api.ThreadState_Get();
	bool found = !api.ThreadState_GetFrame || !api.InterpHead || !api.ThreadHead ||
		     !api.InterpNext || !api.ThreadNext; /* cannot tell: the safe way */

	for (void *in = api.InterpHead ? api.InterpHead() : NULL; in && !found;
	     in = api.InterpNext(in)) {
		for (void *ts = api.ThreadHead(in); ts && !found; ts = api.ThreadNext(ts)) {
			PyObject *f = ts == own ? NULL : api.ThreadState_GetFrame(ts);

			found = f != NULL;
			if (f)
				api.DecRef(f);
		}
	}
	return found;
}

/* Takes a tool id, registers the callbacks, turns the events on. Under the GIL. */
static int install(char *msg, size_t len)
{
	PyObject *mon, *events = NULL;
	long mask = 0;
	int err = 0;

	if (profile_api()) {
		cb_gil = true;
		return profile_install(msg, len);
	}
	mon = import_monitoring();
	if (!mon) {
		snprintf(msg, len,
			 "the process has no sys.monitoring (Python 3.12+) and is no 3.11");
		return -ENOENT;
	}
	events = api.GetAttrString(mon, "events");
	for (int i = 0; events && i < 6; i++) {
		PyObject *v = api.GetAttrString(events, event_names[i]);

		ag.events[i] = v ? api.Long_AsLong(v) : 0;
		if (v)
			api.DecRef(v);
		api.Err_Clear();
		if (ag.events[i] <= 0)
			events = NULL;
		mask |= ag.events[i];
	}
	if (!events) {
		snprintf(msg, len, "sys.monitoring.events lacks the frame events");
		err = -ENOENT;
		goto out;
	}
	api.DecRef(events);
	cb_gil = gil_enabled();
	ag.tool = take_tool(mon);
	if (ag.tool < 0) {
		snprintf(msg, len,
			 "sys.monitoring tool ids %d..%d are all in use (a profiler, debugger or "
			 "coverage tool holds them)",
			 FIRST_TOOL, LAST_TOOL);
		err = -EBUSY;
		goto out;
	}
	for (int i = 0; !err && i < 6; i++) {
		if (!ag.fns[i] && !(ag.fns[i] = api.CFunction_NewEx(&defs[i], NULL, NULL)))
			api.Err_Clear();
		if (!ag.fns[i] || !mon_call(mon, "register_callback", "iiO", ag.tool, ag.events[i],
					    ag.fns[i], NULL))
			err = -EINVAL;
	}
	if (!err && !mon_call(mon, "set_events", "il", ag.tool, mask, NULL, NULL))
		err = -EINVAL;
	if (err) {
		snprintf(msg, len, "sys.monitoring refused the callbacks of tool id %d", ag.tool);
		uninstall(mon);
	}
out:
	api.DecRef(mon);
	return err;
}

/* The loader's end never waits for long: it may be gone. */
static void loader_timeouts(void)
{
	struct timeval tv = {SETUP_WAIT_S, 0};

	setsockopt(ag.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(ag.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* The setup message and the ring's memfd; the ring mapped. */
static int receive_ring(struct ptg_pymon_setup *s, char *msg, size_t len)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = s, .iov_len = sizeof(*s)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct ptg_pymon_ring *r;
	struct cmsghdr *c;
	struct stat st;
	ssize_t n;
	int fd = -1;

	n = recvmsg(ag.sock, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	if (n != (ssize_t)sizeof(*s) || fd < 0 || s->version != PTG_PYMON_PROTO_VERSION) {
		if (fd >= 0)
			close(fd);
		snprintf(msg, len, "no valid setup from the loader");
		return -EPROTO;
	}
	s->libpython[sizeof(s->libpython) - 1] = '\0';
	if (fstat(fd, &st) || st.st_size < (off_t)PTG_PYMON_RECS_OFF) {
		close(fd);
		snprintf(msg, len, "the ring's memfd is too small");
		return -EPROTO;
	}
	r = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED) {
		snprintf(msg, len, "cannot map the ring: %s", strerror(errno));
		return -ENOMEM;
	}
	if (r->magic != PTG_PYMON_MAGIC || r->rec_size != sizeof(struct ptg_pymon_rec) ||
	    !r->nrecs || (r->nrecs & (r->nrecs - 1)) ||
	    r->nrecs > ((uint64_t)st.st_size - PTG_PYMON_RECS_OFF) / sizeof(struct ptg_pymon_rec)) {
		munmap(r, (size_t)st.st_size);
		snprintf(msg, len, "the ring's header does not fit its memfd");
		return -EPROTO;
	}
	ag.ring = r;
	ag.map_len = (size_t)st.st_size;
	return 0;
}

static void send_status(int state, const char *msg, bool ops, const char *ops_msg,
			uint64_t since_ns)
{
	struct ptg_pymon_status st = {.version = PTG_PYMON_PROTO_VERSION,
				      .state = state,
				      .tool_id = ag.tool,
				      .pid = (uint32_t)getpid(),
				      .ops = ops,
				      .since_ns = since_ns};

	snprintf(st.msg, sizeof(st.msg), "%s", msg);
	snprintf(st.ops_msg, sizeof(st.ops_msg), "%s", ops ? "" : ops_msg);
	/* MSG_NOSIGNAL: a dead loader must not SIGPIPE the application */
	if (send(ag.sock, &st, sizeof(st), MSG_NOSIGNAL) != (ssize_t)sizeof(st)) {
		/* the loader is gone: the wait for its hang-up ends at once */
	}
}

/* The loader closed the socket, or died: nothing it sends matters, only its end. */
static void wait_hangup(void)
{
	struct pollfd p = {.fd = ag.sock, .events = POLLIN};
	char buf[64];

	for (;;) {
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		ssize_t n = recv(ag.sock, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return;
	}
}

/*
 * The end of Py_Finalize: the loader reads a code object's names from our
 * memory when it reads the record, a few milliseconds later; a process that
 * exits at once would take the names of its last calls with it. Waits,
 * at most EXIT_WAIT_MS, until the loader has read every record (as the CUPTI
 * agent waits for its last flush at exit).
 */
static void exit_wait(void)
{
	struct ptg_pymon_ring *r = __atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE);
	struct timespec ms = {0, 1000000};

	/* a loader that hung up (or died) reads nothing more */
	for (int i = 0; r && !__atomic_load_n(&hung_up, __ATOMIC_ACQUIRE) && i < EXIT_WAIT_MS;
	     i++) {
		if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >=
		    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE))
			return;
		nanosleep(&ms, NULL);
		r = __atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE);
	}
}

static bool finalizing(void)
{
	return !api.IsInitialized() || (api.IsFinalizing && api.IsFinalizing());
}

/*
 * The ring unmapped and the loader's socket closed: what a session holds of
 * the loader's. Where callbacks run without the GIL (op callbacks, a
 * free-threaded build), one may have read the ring's address just before it
 * was taken from them and still be writing: the pages are swapped for
 * anonymous ones at the same address instead (MAP_FIXED, in one step), kept
 * for good, so that such a write lands in memory of ours (8 MiB of address
 * space per session; pages only where written).
 */
static void drop_loader(void)
{
	if (ag.ring && (cb_ops || !cb_gil) &&
	    mmap(ag.ring, ag.map_len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED)
		ag.ring = NULL;
	if (ag.ring)
		munmap(ag.ring, ag.map_len);
	ag.ring = NULL;
	if (ag.sock >= 0)
		close(ag.sock);
	ag.sock = -1;
}

static void session_end(void)
{
	drop_loader();
	pthread_mutex_lock(&ag.lock);
	ag.state = S_IDLE;
	pthread_mutex_unlock(&ag.lock);
}

static void set_phase(enum start_phase p)
{
	pthread_mutex_lock(&phase_lock);
	phase = p;
	pthread_cond_broadcast(&phase_cond);
	pthread_mutex_unlock(&phase_lock);
}

/* Until the session's start reached p or the deadline passed: whether it did. */
static bool wait_phase(enum start_phase p, const struct timespec *until)
{
	bool ok;

	pthread_mutex_lock(&phase_lock);
	while (phase < p && pthread_cond_timedwait(&phase_cond, &phase_lock, until) != ETIMEDOUT)
		;
	ok = phase >= p;
	pthread_mutex_unlock(&phase_lock);
	return ok;
}

static void *session_main(void *arg)
{
	static struct ptg_pymon_setup setup; /* 4 KiB: not on this thread's stack */
	char msg[256] = "", ops_msg[256] = "";
	uint64_t since_ns = 0;
	struct timespec now;
	bool ops_on = false;
	PyObject *mon;
	int err, g;

	(void)arg;
	loader_timeouts();
	err = receive_ring(&setup, msg, sizeof(msg))
		  ?: api_resolve(setup.libpython, msg, sizeof(msg));
	if (!err && finalizing()) {
		snprintf(msg, sizeof(msg), "the interpreter is not running (starting or exiting)");
		err = -ESRCH;
	}
	set_phase(err ? P_ANSWERED : P_RESOLVED);
	if (!err && !(ag.codes = codeset_new(MIN_CODES))) {
		snprintf(msg, sizeof(msg), "out of memory");
		err = -ENOMEM;
	}
	if (!err) {
		/* this thread's own GIL turn: no bytecode of the main thread is needed */
		g = api.GILState_Ensure();
		if (!exit_hooked && api.AtExit)
			exit_hooked = !api.AtExit(exit_wait);
		cb_recs = (struct ptg_pymon_rec *)((char *)ag.ring + PTG_PYMON_RECS_OFF);
		cb_mask = ag.ring->nrecs - 1;
		cb_tail = 0;
		lay = setup.layout;
		lay_ok = 0;
		__atomic_store_n(&hung_up, false, __ATOMIC_RELEASE);
		__atomic_fetch_add(&cb_gen, 1, __ATOMIC_RELAXED);
		/* before any callback runs: op callbacks need no GIL, so reservations are CAS */
		ops_msg[0] = '\0';
		cb_ops = false;
		ops_late = false;
		if (setup.flags & PTG_PYMON_WANT_OPS)
			cb_ops = !ops_resolve(ops_msg, sizeof(ops_msg));
		else
			snprintf(ops_msg, sizeof(ops_msg), "not asked for");
		__atomic_store_n(&cb_ring, ag.ring, __ATOMIC_SEQ_CST);
		if ((setup.flags & PTG_PYMON_ALONE) && others_in_python()) {
			snprintf(msg, sizeof(msg),
				 "another thread runs Python (its frames began on the uprobes)");
			err = -EBUSY;
		} else if (!(setup.flags & PTG_PYMON_OPS_ONLY)) {
			err = install(msg, sizeof(msg));
			ops_on = !err && cb_ops && !ops_install(ops_msg, sizeof(ops_msg));
		} else if (!cb_ops || ops_install(ops_msg, sizeof(ops_msg))) {
			/* ops alone were asked for: none is in, the probes take them */
			snprintf(msg, sizeof(msg), "%s", ops_msg);
			err = -ENOENT;
		} else {
			ops_on = true;
		}
		if (err)
			__atomic_store_n(&cb_ring, NULL, __ATOMIC_SEQ_CST);
		clock_gettime(CLOCK_MONOTONIC, &now);
		since_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		api.GILState_Release(g);
	}
	send_status(err ? PTG_PYMON_FAILED : PTG_PYMON_ACTIVE, err ? msg : "recording", ops_on,
		    ops_msg, since_ns);
	set_phase(P_ANSWERED);
	if (!err)
		wait_hangup();
	__atomic_store_n(&hung_up, true, __ATOMIC_RELEASE);
	/* an interpreter that exits takes the callbacks with it; its GIL may never come back */
	if (api.ok && ag.codes && !finalizing()) {
		g = api.GILState_Ensure();
		if (ag.profiling)
			profile_uninstall();
		mon = ag.tool >= 0 ? import_monitoring() : NULL;
		if (mon) {
			uninstall(mon);
			api.DecRef(mon);
		}
		/* under the GIL and with the events off, no Python callback runs any more */
		__atomic_store_n(&cb_ring, NULL, __ATOMIC_SEQ_CST);
		drop_codes();
		api.GILState_Release(g);
	} else {
		__atomic_store_n(&cb_ring, NULL, __ATOMIC_SEQ_CST);
	}
	/*
	 * op callbacks take no GIL (drop_loader() keeps their ring's address
	 * mapped); an exiting interpreter's PyTorch may be torn down already,
	 * so its callback is only made quiet
	 */
	if (ops_on || __atomic_load_n(&ops_late, __ATOMIC_ACQUIRE))
		ops_uninstall(!finalizing());
	session_end();
	return NULL;
}

/*
 * A forked child (multiprocessing, a DataLoader worker) inherits the
 * registered callbacks and a mapping of its parent's ring: its callbacks go
 * quiet and the ring is unmapped (fork() left only this thread, so no
 * callback runs now). Its tool id stays taken until a session of its own
 * finds it by name.
 */
static void fork_child(void)
{
	cb_ring = NULL;
	drop_loader();
	ag.tool = -1;
	ag.profiling = false; /* 3.11: this thread's profile function stays in, quiet */
	ag.state = S_IDLE;
	ag.codes = NULL; /* the references are the child's to keep: a generation or a few */
	ag.nold = 0;
	ag.ncodes = 0;
	ag.retired = NULL;
	ag.nretired = 0;
	ops_fork_child();
	pthread_mutex_init(&ag.lock, NULL);
}

static void agent_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

/*
 * record --in-process: called through ptrace after dlopen, with "fd:N"
 * (ptg_agent_fd.h). 0 started, 1 busy, < 0 -errno.
 */
PTG_EXPORT int ptg_pymon_attach(const char *loader)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err, fd;

	if (!loader || strncmp(loader, "fd:", 3))
		return -EINVAL;
	pthread_once(&init_once, agent_init);
	/*
	 * the last session's thread may be taking its callbacks out just now: a
	 * moment for it (bounded: it may need the GIL this stopped thread holds)
	 */
	for (int i = 0; i < 200 && __atomic_load_n(&hung_up, __ATOMIC_ACQUIRE) &&
			__atomic_load_n(&ag.state, __ATOMIC_ACQUIRE) != S_IDLE;
	     i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	pthread_mutex_lock(&ag.lock);
	if (ag.state != S_IDLE) {
		pthread_mutex_unlock(&ag.lock);
		return 1;
	}
	fd = ptg_agent_take_fd(loader);
	if (fd < 0) {
		pthread_mutex_unlock(&ag.lock);
		return fd;
	}
	ag.sock = fd;
	ag.state = S_BUSY;
	pthread_mutex_unlock(&ag.lock);
	set_phase(P_NONE);
	/* the caller is a thread stopped anywhere: everything happens on the agent's thread */
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, &attr, session_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		close(ag.sock);
		ag.sock = -1;
		pthread_mutex_lock(&ag.lock);
		ag.state = S_IDLE;
		pthread_mutex_unlock(&ag.lock);
		return -err;
	}
	pthread_setname_np(t, "ptg-pymon");
	return 0;
}

/*
 * record -- CMD: called through ptrace on the main thread the loader holds
 * where the command's script is about to start (bpf/pyframe.bpf.c,
 * py_audit), after ptg_pymon_attach() and the loader's setup. That thread
 * holds the GIL, which the session needs to install its callbacks: it gives
 * it up (as Py_BEGIN_ALLOW_THREADS does) until the session has answered,
 * and takes it back, so that the script's first frame is the callbacks'
 * first. Bounded: a session that does not answer in LET_IN_WAIT_S is left
 * to answer the loader by itself. 0 the session answered, 1 not in time,
 * -ENOENT no session or no GIL here.
 */
PTG_EXPORT int ptg_pymon_let_in(const char *unused)
{
	struct timespec until;
	bool answered;
	void *ts;

	(void)unused;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += LET_IN_WAIT_S;
	if (!wait_phase(P_RESOLVED, &until) || !api.ok || !api.GILState_Check ||
	    !api.UncheckedGet || !api.SaveThread || !api.RestoreThread)
		return -ENOENT;
	/* a thread with no GIL of its own to give: nothing to wait for here */
	if (!api.UncheckedGet() || !api.GILState_Check())
		return -ENOENT;
	ts = api.SaveThread();
	answered = wait_phase(P_ANSWERED, &until);
	api.RestoreThread(ts);
	return answered ? 0 : 1;
}

/*
 * record -- CMD whose Python calls this session takes (ptg_pymon_let_in()):
 * called through ptrace on the thread its first PyTorch op stopped
 * (bpf/torchops.bpf.c, op_trigger), which goes on into that op once this
 * returns: the RecordFunction callback goes in, so that op is its first.
 * The ring's reservations turn to compare-and-swap under the GIL, while no
 * frame callback is halfway through one. Bounded: past LET_IN_WAIT_S for
 * the GIL, nothing goes in. 0 in, 1 in already, < 0 -errno.
 */
PTG_EXPORT int ptg_pymon_ops_in(const char *unused)
{
	struct timespec t0, t1;
	char msg[256];
	int g, err;

	(void)unused;
	if (!api.ok || !__atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE))
		return -ENOENT;
	/* the session's start found PyTorch loaded and put it in, or a call before this */
	if (__atomic_load_n(&cb_ops, __ATOMIC_ACQUIRE))
		return 1;
	if (ops_resolve(msg, sizeof(msg)))
		return -ENOENT;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	g = api.GILState_Ensure();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (t1.tv_sec - t0.tv_sec >= LET_IN_WAIT_S ||
	    !__atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE)) {
		err = -ETIMEDOUT;
	} else {
		__atomic_store_n(&cb_ops, true, __ATOMIC_SEQ_CST);
		err = ops_install(msg, sizeof(msg)) ? -EINVAL : 0;
		if (!err)
			__atomic_store_n(&ops_late, true, __ATOMIC_RELEASE);
	}
	api.GILState_Release(g);
	return err;
}
