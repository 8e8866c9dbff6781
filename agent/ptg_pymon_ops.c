// SPDX-License-Identifier: MIT
/*
 * libptg_pymon.so's PyTorch ops: a global RecordFunction callback, the hook
 * torch.profiler itself uses, registered through libtorch_cpu's exported C++
 * functions (no PyTorch headers: the three symbols below, the same mangled
 * names from 1.13 to 2.x). Each range of FUNCTION scope (the dispatcher's
 * aten::*, the autograd engine's "autograd::engine::evaluate_function: ..."
 * and autograd's detach: what torch.profiler lists) writes an OP_ENTER and an OP_EXIT
 * record into the session's ring, with a thread-local nesting depth as its
 * key and (at the entry) a hash of its name as its id; a name new to the session goes
 * first, in the same reservation, as a NAME group, so the loader never
 * reads an op's name from our memory (RecordFunction may own it only while
 * the op runs).
 *
 * Ops run on threads that may not hold the GIL (PyTorch releases it around
 * each op; autograd's and the intra-op pool's threads never take it), so
 * every record is reserved with a compare-and-swap while ops are recorded,
 * and the ring's address stays mapped after the session (drop_loader()).
 * The callback is removed when the session ends; an op that began before
 * that still calls its end callback, which finds no session and returns.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ptg_pymon_shared.h"

#define SYM_ADD	       "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"
#define SYM_REMOVE     "_ZN2at14removeCallbackEm"
#define SYM_NAME       "_ZNK2at14RecordFunction4nameEv"
#define NAMES_CAP      4096u /* ids sent this session: open addressing, never removed */
#define SCOPE_FUNCTION 0     /* at::RecordScope::FUNCTION */

/*
 * at::RecordFunctionCallback as PyTorch 1.13 and 2.x lay it out (run here
 * on 1.13, 2.6 and 2.14): two function pointers, the sampling probability,
 * a bool per RecordScope (NUM_SCOPES, 10 today) and three bools. It is trivially
 * copyable, so it is passed by value in memory like this struct; the room
 * past the callee's size is never read, and zeroes there would mean "no
 * such scope, no inputs, no outputs, no ids" if a version had more scopes.
 */
struct rf_callback {
	void *start;
	void *end;
	double sampling_prob;
	uint8_t scopes_and_needs[64];
};

static uint64_t (*add_global)(struct rf_callback);
static void (*remove_cb)(uint64_t);
static const char *(*rf_name)(const void *);
static uint64_t handle;		  /* the registered callback, 0 if none */
static uint64_t names[NAMES_CAP]; /* ids sent this session (0: empty) */
static bool live;		  /* this session records ops */

bool cb_ops; /* ops may write records: every reservation is a compare-and-swap */

static int find_torch(struct dl_phdr_info *info, size_t size, void *data)
{
	const char *base = strrchr(info->dlpi_name, '/');

	(void)size;
	if (base && !strncmp(base + 1, "libtorch_cpu.so", 15)) {
		*(const char **)data = info->dlpi_name;
		return 1;
	}
	return 0;
}

int ops_resolve(char *msg, size_t len)
{
	const char *path = NULL;
	void *lib;

	if (add_global)
		return 0;
	dl_iterate_phdr(find_torch, &path);
	if (!path) {
		snprintf(msg, len, "PyTorch (libtorch_cpu) was not loaded at the attach");
		return -1;
	}
	/* already loaded, by torch's own RTLD_LOCAL import: this reference only finds it */
	lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!lib) {
		snprintf(msg, len, "cannot reach %s", path);
		return -1;
	}
	*(void **)&remove_cb = dlsym(lib, SYM_REMOVE);
	*(void **)&rf_name = dlsym(lib, SYM_NAME);
	*(void **)&add_global = remove_cb && rf_name ? dlsym(lib, SYM_ADD) : NULL;
	if (!add_global) {
		snprintf(msg, len,
			 "%s exports no at::addGlobalCallback / at::removeCallback / "
			 "at::RecordFunction::name",
			 path);
		return -1;
	}
	return 0;
}

/* FNV-1a of the name, never 0 (0 marks an empty slot) */
static uint64_t name_id(const char *name, size_t *len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n = 0;

	for (; name[n] && n < PTG_PYMON_MAX_NAME; n++)
		h = (h ^ (uint8_t)name[n]) * 0x100000001b3ull;
	*len = n;
	return h ? h : 1;
}

static bool name_sent(uint64_t id)
{
	for (uint32_t i = (uint32_t)id & (NAMES_CAP - 1), k = 0; k < NAMES_CAP;
	     i = (i + 1) & (NAMES_CAP - 1), k++) {
		uint64_t s = __atomic_load_n(&names[i], __ATOMIC_ACQUIRE);

		if (s == id)
			return true;
		if (!s)
			return false;
	}
	return false;
}

/* Marks id sent once its NAME group is reserved (a full table: it is sent again each time). */
static void name_mark(uint64_t id)
{
	for (uint32_t i = (uint32_t)id & (NAMES_CAP - 1), k = 0; k < NAMES_CAP;
	     i = (i + 1) & (NAMES_CAP - 1), k++) {
		uint64_t s = 0;

		if (__atomic_compare_exchange_n(&names[i], &s, id, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED) ||
		    s == id)
			return;
	}
}

/* The session's ring if ops are recorded, or NULL; *th the calling thread's state. */
static struct ptg_pymon_ring *op_ring(struct rec_thread **th)
{
	struct ptg_pymon_ring *r;

	r = __atomic_load_n(&live, __ATOMIC_ACQUIRE) ? __atomic_load_n(&cb_ring, __ATOMIC_ACQUIRE)
						     : NULL;
	if (r)
		*th = rec_thread();
	return r;
}

/*
 * std::unique_ptr<at::ObserverContext> (*)(const at::RecordFunction &),
 * returned in memory: NULL stored there. OP_ENTER, after the name's group
 * the first time the session sees it.
 */
static void **on_op_start(void **ret, const void *fn)
{
	struct rec_thread *th = NULL;
	struct ptg_pymon_ring *r = op_ring(&th);
	uint64_t id, key, idx, ts;
	uint32_t nbytes = 0;
	const char *name;
	size_t len = 0;
	bool fresh;

	*ret = NULL;
	if (!r)
		return ret;
	ts = rec_now();
	name = rf_name(fn);
	id = name_id(name ? name : "", &len);
	fresh = !name_sent(id);
	if (fresh)
		nbytes = (uint32_t)((len + 15) / 16);
	key = PTG_PYMON_OP_KEY_TOP - th->op_depth++;
	/* dropped (counted): its exit finds no entry, a later op at its depth closes nothing */
	if (!rec_reserve(r, fresh ? nbytes + 2 : 1, &idx))
		return ret;
	if (fresh) {
		name_mark(id);
		rec_put(th, idx++, PTG_PYMON_NAME, id, len, ts);
		for (uint32_t i = 0; i < nbytes; i++) {
			uint64_t w[2] = {0, 0};
			size_t n = len - i * 16 < 16 ? len - i * 16 : 16;

			memcpy(w, name + i * 16, n);
			rec_put(th, idx++, PTG_PYMON_NAME_BYTES, w[1], 0, w[0]);
		}
	}
	rec_put(th, idx, PTG_PYMON_OP_ENTER, id, key, ts);
	return ret;
}

/*
 * void (*)(const at::RecordFunction &, at::ObserverContext *): OP_EXIT,
 * known by its depth alone (the loader pairs it by key).
 */
static void on_op_end(const void *fn, void *ctx)
{
	struct rec_thread *th = NULL;
	struct ptg_pymon_ring *r = op_ring(&th);
	uint64_t idx, ts;

	(void)fn;
	(void)ctx;
	/* an op that began before the session: its end is not recorded */
	if (!r || !th->op_depth)
		return;
	ts = rec_now();
	th->op_depth--;
	if (rec_reserve(r, 1, &idx))
		rec_put(th, idx, PTG_PYMON_OP_EXIT, 0, PTG_PYMON_OP_KEY_TOP - th->op_depth, ts);
}

int ops_install(char *msg, size_t len)
{
	struct rf_callback cb = {
	    .start = (void *)on_op_start, .end = (void *)on_op_end, .sampling_prob = 1.0};

	if (!add_global)
		return -1;
	memset(names, 0, sizeof(names));
	cb.scopes_and_needs[SCOPE_FUNCTION] = 1;
	/* a forked child's is still registered: its parent's session put it in */
	if (!handle)
		handle = add_global(cb);
	if (!handle) {
		snprintf(msg, len, "at::addGlobalCallback refused the callback");
		return -1;
	}
	__atomic_store_n(&live, true, __ATOMIC_SEQ_CST);
	return 0;
}

/*
 * Quiet from now on, and removed if remove (not while the process exits:
 * PyTorch may be torn down). A callback still inside the ring may write on:
 * drop_loader() keeps the address mapped.
 */
void ops_uninstall(bool remove)
{
	__atomic_store_n(&live, false, __ATOMIC_RELEASE);
	if (handle && remove) {
		remove_cb(handle);
		handle = 0;
	}
}

/*
 * A forked child keeps its parent's registration, quiet (no ring) until a
 * session of its own takes it over; fork() left one thread, in no callback.
 */
void ops_fork_child(void)
{
	live = false;
}
