/* SPDX-License-Identifier: MIT */
/*
 * What the two halves of libptg_pymon.so share: the callbacks that run in
 * the application's threads (ptg_pymon_callbacks.c) and the session on the
 * agent's own thread (ptg_pymon_agent.c). Nothing here is exported.
 */
#ifndef PTG_PYMON_SHARED_H
#define PTG_PYMON_SHARED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptg_pymon_proto.h"

#define MIN_CODES 1024
/*
 * The code objects one generation of the code set keeps alive (GIL builds):
 * a new one past this retires the set (retire()), whose references are
 * dropped once the loader has read past the ring's head at that moment. A
 * program's working set of functions fits (a few thousand in a training
 * loop); one that makes functions without end (exec in a loop, generated
 * code) has at most this many kept per generation, about 0.5 KiB each, and
 * at most MAX_RETIRED generations wait for the loader besides the current
 * one: a new code object past that (a loader some 100,000 new functions
 * behind) loses its event, counted, as a full ring does.
 */
#define MAX_KEPT    32768u
#define MAX_RETIRED 3
/* references a callback drops at most, of a retired generation the loader read */
#define RELEASE_BATCH 256u
/* enum ptg_snapshot_reason (include/ptrace_gpu/events.h) */
#define SNAP_FIRST  1
#define SNAP_RESYNC 2

typedef struct _object PyObject;

/* PyMethodDef, as every CPython since 3.0 lays it out */
struct method_def {
	const char *name;
	void *meth;
	int flags;
	const char *doc;
};

/* The C API the agent calls, looked up once (api_resolve()). */
struct pymon_api {
	bool ok;
	int (*IsInitialized)(void);
	int (*IsFinalizing)(void);
	int (*GILState_Ensure)(void);
	void (*GILState_Release)(int);
	PyObject *(*ImportModule)(const char *);
	PyObject *(*GetAttrString)(PyObject *, const char *);
	PyObject *(*CallMethod)(PyObject *, const char *, const char *, ...);
	PyObject *(*CFunction_NewEx)(struct method_def *, PyObject *, PyObject *);
	long (*Long_AsLong)(PyObject *);
	void (*IncRef)(PyObject *);
	void (*DecRef)(PyObject *);
	void (*Err_Clear)(void);
	PyObject *(*Eval_GetFrame)(void);
	PyObject *(*Frame_GetBack)(PyObject *);
	PyObject *(*Frame_GetCode)(PyObject *);
	void *(*ThreadState_Get)(void);
	int (*AtExit)(void (*)(void));
	PyObject *none;
	/* 3.11's profile function: the thread states, and the threading module's hook */
	const char *(*GetVersion)(void);
	int (*SetProfileOf)(void *, int (*)(PyObject *, PyObject *, int, PyObject *), PyObject *);
	void *(*InterpHead)(void);
	void *(*InterpNext)(void *);
	void *(*ThreadHead)(void *);
	void *(*ThreadNext)(void *);
	const char *(*Unicode_AsUTF8)(PyObject *);
	PyObject *(*GetModule)(PyObject *);
	PyObject *(*Unicode_FromString)(const char *);
	/* ptg_pymon_let_in(): the thread the loader holds gives its GIL up while the session
	 * installs */
	PyObject *(*ThreadState_GetFrame)(void *);
	int (*GILState_Check)(void);
	void *(*UncheckedGet)(void); /* this thread's state, NULL if it has none attached */
	void *(*SaveThread)(void);
	void (*RestoreThread)(void *);
};
extern struct pymon_api api;

enum session_state { S_IDLE, S_BUSY };

/* The code objects kept alive: open addressing, read without the lock (see keep()). */
struct codeset {
	PyObject **slots;
	size_t cap;
	/* retired: the ring's head then, the next slot to release, the next retired set */
	uint64_t head;
	size_t at;
	struct codeset *next;
};

/* The agent: its session, its code set. */
struct pymon_agent {
	pthread_mutex_t lock; /* state, and the code set's writers */
	enum session_state state;
	int sock; /* the loader's socketpair (ptg_agent_fd.h) */
	struct ptg_pymon_ring *ring;
	size_t map_len;
	int tool;
	bool profiling;	    /* 3.11: the C profile function is in, threading's hook is ours */
	PyObject *hook;	    /* 3.11: the C callable of threading's hook, and the profile object */
	PyObject *old_hook; /* threading._profile_hook before ours (None) */
	PyObject *fns[6];
	long events[6];
	struct codeset *codes; /* the current table (atomic), older ones in old[] */
	struct codeset *old[48];
	int nold;
	size_t ncodes;
	/* generations retired, oldest first, their references dropped once read (GIL builds) */
	struct codeset *retired;
	int nretired;
};
extern struct pymon_agent ag;

/* What the callbacks read: the ring of the active session, or NULL. */
extern struct ptg_pymon_ring *cb_ring;
extern struct ptg_pymon_rec *cb_recs;
extern uint64_t cb_mask;
extern uint32_t cb_gen;	 /* +1 per session: a thread's first event in it sends its stack */
extern uint64_t cb_tail; /* the loader's tail as last read */
extern struct ptg_pymon_layout lay; /* where a frame's first local is */
extern int lay_ok;		    /* lay checked: 1 good, -1 not, 0 not yet */
extern bool cb_gil;		    /* the interpreter has a GIL: one callback at a time */

extern bool cb_ops; /* op callbacks write records too (ptg_pymon_ops.c) */

/* A thread's state in the session cb_gen counts. */
struct rec_thread {
	uint32_t gen;	   /* the session it is for */
	uint32_t tid;	   /* gettid() */
	uint16_t snap;	   /* enum ptg_snapshot_reason owed by its next Python event, 0 if none */
	uint32_t op_depth; /* its ops open since its first op of the session */
};

/* The calling thread's, set up for the current session. */
struct rec_thread *rec_thread(void);
uint64_t rec_now(void); /* CLOCK_MONOTONIC ns */
/* n consecutive records at *idx, or false (one event counted as dropped). */
bool rec_reserve(struct ptg_pymon_ring *r, uint64_t n, uint64_t *idx);
/* The same, with nothing counted: for what the loader can do without. */
bool rec_try_reserve(struct ptg_pymon_ring *r, uint64_t n, uint64_t *idx);
/* Writes and publishes record idx of thread th (the caller). */
void rec_put(const struct rec_thread *th, uint64_t idx, uint16_t kind, uint64_t arg, uint64_t code,
	     uint64_t ts);

/*
 * PyTorch's ops (ptg_pymon_ops.c). ops_resolve: libtorch_cpu's callback API
 * found (0), or why not in msg (-1). ops_install: the RecordFunction
 * callback in (0), or why not. ops_uninstall: quiet, and removed if remove.
 */
int ops_resolve(char *msg, size_t len);
int ops_install(char *msg, size_t len);
void ops_uninstall(bool remove);
void ops_fork_child(void);

/* The sys.monitoring events, by name, and the callbacks for them, in the same order. */
extern const char *const event_names[6];
extern struct method_def defs[6];

/* 3.11: the C profile function, and threading's hook that puts it on a new thread */
int on_profile(PyObject *obj, PyObject *fo, int what, PyObject *arg);
extern struct method_def hook_def;
/*
 * 3.11 with threading not imported at the start: the hook goes in once its
 * module's body has run (on_profile()), before the program can start a
 * thread with it. threading_wait: set by profile_install(); threading_code:
 * the code object of threading.py's <module>, once seen (under the GIL).
 */
extern bool threading_wait;
extern PyObject *threading_code;
/* 3.11 (ptg_pymon_profile.c): whether this Python takes the profile function, not sys.monitoring */
bool profile_api(void);
/* Puts it on every thread but the caller's, or says why not in msg (-errno). Under the GIL. */
int profile_install(char *msg, size_t len);
/* Takes it off every thread that has ours, threading's hook as it was. Under the GIL. */
void profile_uninstall(void);
/* threading's hook ours (the module imported), the old kept for profile_uninstall(): 0, or -1 */
int hook_threading(PyObject *threading);

/* An empty code set of cap slots (a power of two), or NULL. */
struct codeset *codeset_new(size_t cap);
/* The code references dropped and the tables freed. Under the GIL, the callbacks out. */
void drop_codes(void);

#endif /* PTG_PYMON_SHARED_H */
