// SPDX-License-Identifier: MIT
/*
 * Module paths. Each thread keeps the module calls (Module._call_impl
 * frames) that are open on its tracer stack, with their tracer stack index
 * and module object. Any frame that starts at index i ends every call at
 * index >= i, so the list stays exact without a RETURN of its own.
 *
 * A path is built once per (parent path, module object, method) and cached;
 * the memory of the target is read only then: the parent's _modules dict for
 * the attribute name, the module's type name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "proc/procfs.h"
#include "pyinterp/pycode.h"
#include "torch/modpath.h"
#include "torch/modpath_int.h"

#define CALL_FILE    "/torch/nn/modules/module.py"
#define PATH_MAX_LEN 4096
#define LABEL_LEN    256

struct mod_call {
	uint32_t idx; /* index of the _call_impl frame on the tracer stack */
	uint64_t frame;
	uint64_t code;
	uint64_t self;
	uint64_t alt;	 /* first local of the method frame, if self turns out no module */
	bool trusted;	 /* self is the module */
	uint32_t path;	 /* index + 1 in modpath.paths, 0 until an op needs it */
	uint64_t method; /* code of the method frame when path was made */
};

/* The last Module._wrapped_call_impl frame started on a thread. */
struct wrapped_call {
	uint32_t idx;
	uint64_t frame;
	uint64_t self;
};

struct mod_thread {
	struct mod_call *calls;
	uint32_t n, cap;
	struct wrapped_call wrapped;
};

/* The functions of torch/nn/modules/module.py that a module call runs in. */
enum code_role {
	ROLE_NONE,
	ROLE_CALL_IMPL, /* Module._call_impl: a module call */
	ROLE_WRAPPED,	/* Module._wrapped_call_impl (torch 2.1+), which calls it */
	ROLE_INNER,	/* Module._call_impl.<locals>.inner (2.1+), which runs hooks and forward */
};

/* What a code object is to us: read once per (address, fingerprint). */
struct code_kind {
	uint32_t fingerprint;
	uint8_t role;	 /* enum code_role */
	char method[64]; /* last part of the qualified name */
};

struct path {
	uint32_t parent; /* index + 1, 0 for a top module */
	uint64_t self;
	uint64_t method;
	uint32_t sym;
	char *str;
};

struct modpath {
	struct tracer *t;
	struct threads threads; /* of struct mod_thread */
	struct mod_proc *one;	/* modpath__open(): the target's */
	/* modpath__open_set(): a mod_proc per process, made at its first event */
	modpath_interp_fn interp_of;
	void *interp_ctx;
	struct u64map by_pid; /* pid -> index + 1 in procs (NULL there: it exec()'d since) */
	struct mod_proc **procs;
	size_t nprocs, procs_cap;
	struct modpath_stats st;
};

static enum code_role code_role(const struct py_code_info *ci)
{
	size_t n = strlen(ci->filename), m = strlen(CALL_FILE);

	if (n < m || strcmp(ci->filename + n - m, CALL_FILE))
		return ROLE_NONE;
	if (!strcmp(ci->qualname, "Module._call_impl"))
		return ROLE_CALL_IMPL;
	if (!strcmp(ci->qualname, "Module._wrapped_call_impl"))
		return ROLE_WRAPPED;
	if (!strcmp(ci->qualname, "Module._call_impl.<locals>.inner"))
		return ROLE_INNER;
	return ROLE_NONE;
}

/* The entry of (code, fingerprint), made anew (zeroed) if it was not that. */
static struct code_kind *code_slot(struct mod_proc *pp, uint64_t code, uint32_t fingerprint,
				   bool *found)
{
	uint64_t *idx = u64map__get(&pp->code_idx, code);
	struct code_kind *k;

	*found = idx && pp->kinds[*idx - 1].fingerprint == fingerprint;
	if (*found)
		return &pp->kinds[*idx - 1];
	if (!idx) {
		if (array_grow((void **)&pp->kinds, &pp->kinds_cap, pp->nkinds + 1,
			       sizeof(*pp->kinds)))
			return NULL;
		if (u64map__put(&pp->code_idx, code, pp->nkinds + 1))
			return NULL;
		k = &pp->kinds[pp->nkinds++];
	} else {
		k = &pp->kinds[*idx - 1];
	}
	memset(k, 0, sizeof(*k));
	k->fingerprint = fingerprint;
	return k;
}

static void set_kind(struct code_kind *k, const struct py_code_info *ci)
{
	const char *dot = strrchr(ci->qualname, '.');

	k->role = code_role(ci);
	snprintf(k->method, sizeof(k->method), "%.63s", dot ? dot + 1 : ci->qualname);
}

/*
 * What a code object is, from the names the BPF side sent at its first
 * sight (learn_code()), else read from the target's memory now.
 */
static const struct code_kind *code_kind(struct mod_proc *pp, uint64_t code, uint32_t fingerprint)
{
	struct py_code_info ci;
	struct code_kind *k;
	bool found;

	k = code_slot(pp, code, fingerprint, &found);
	if (!k || found)
		return k;
	if (py_read_code(pp->memfd, pp->vi, code, &ci) || ci.fingerprint != fingerprint)
		return k; /* freed before we read it: not a module call as far as we know */
	set_kind(k, &ci);
	return k;
}

/* Names sent with a code object's first event: good even once the process is gone. */
static int learn_code(struct mod_proc *pp, const struct ptg_code_event *c)
{
	struct py_code_info ci;
	struct code_kind *k;
	bool found;

	if (py_code_from_event(c, &ci))
		return 0; /* code_kind() reads it from memory */
	k = code_slot(pp, c->hdr.a, c->hdr.aux, &found);
	if (!k)
		return -ENOMEM;
	set_kind(k, &ci);
	return 0;
}

static struct mod_thread *mod_thread(struct modpath *mp, uint32_t pid, uint32_t tid, bool create)
{
	if (!create)
		return threads__find(&mp->threads, pid, tid);
	return threads__get(&mp->threads, pid, tid, NULL);
}

static void mod_thread_fini(void *mt)
{
	free(((struct mod_thread *)mt)->calls);
}

static bool call_open(const struct mod_call *c, const struct tracer_thread *th)
{
	const struct tracer_slot *s;

	if (c->idx >= th->depth)
		return false;
	s = &th->stack[c->idx];
	return s->kind == PTG_REC_PY_ENTER && s->key == c->frame && s->code == c->code;
}

/* Drops the calls at tracer stack index >= idx. */
static void truncate_at(struct mod_thread *mt, uint32_t idx)
{
	while (mt->n && mt->calls[mt->n - 1].idx >= idx)
		mt->n--;
}

static int push_call(struct mod_thread *mt, uint32_t idx, uint64_t frame, uint64_t code,
		     uint64_t self, bool trusted)
{
	if (mt->n == mt->cap) {
		uint32_t cap = mt->cap ? mt->cap * 2 : 16;
		struct mod_call *n = realloc(mt->calls, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		mt->calls = n;
		mt->cap = cap;
	}
	mt->calls[mt->n++] = (struct mod_call){
	    .idx = idx, .frame = frame, .code = code, .self = self, .trusted = trusted};
	return 0;
}

/*
 * Index of the frame a module call at idx runs its method in (forward, a
 * hook): the one right above _call_impl, or above the closure `inner` that
 * torch 2.1+'s _call_impl calls hooks and forward from when there are hooks.
 * UINT32_MAX when none is running.
 */
static uint32_t method_slot(struct mod_proc *pp, const struct tracer_thread *th, uint32_t idx)
{
	const struct tracer_slot *s;
	const struct code_kind *k;

	if (idx + 1 >= th->depth || th->stack[idx + 1].kind != PTG_REC_PY_ENTER)
		return UINT32_MAX;
	s = &th->stack[idx + 1];
	k = code_kind(pp, s->code, s->fingerprint);
	if (!k || k->role != ROLE_INNER)
		return idx + 1;
	return idx + 2 < th->depth && s[1].kind == PTG_REC_PY_ENTER ? idx + 2 : UINT32_MAX;
}

/*
 * The module of a _call_impl frame at idx starting with first local self.
 * torch 2.1+ keeps self in a cell there (a closure of its hook path captures
 * it), freed when the call returns, often before we read it; its caller
 * _wrapped_call_impl has the module itself as first local. Without that
 * caller (torch 1.x, or _call_impl called directly) self is taken as it is
 * and checked when a path is made.
 */
static int start_call(struct mod_thread *mt, const struct tracer_thread *th, uint32_t idx,
		      uint64_t frame, uint64_t code, uint64_t self)
{
	const struct wrapped_call *w = &mt->wrapped;
	const struct tracer_slot *below = idx ? &th->stack[idx - 1] : NULL;

	if (below && w->frame && w->self && w->idx == idx - 1 && below->kind == PTG_REC_PY_ENTER &&
	    below->key == w->frame)
		return push_call(mt, idx, frame, code, w->self, true);
	return push_call(mt, idx, frame, code, self, false);
}

/*
 * The first local of a frame: as BPF read it when the call started or the
 * stack was snapshotted, else read now, if the frame still runs that code
 * (by the time we read it, the frame may have returned and its memory gone
 * to another call).
 */
static int first_local(struct mod_proc *pp, const struct tracer_slot *s, uint64_t *out)
{
	uint64_t code = 0, local = 0;
	int err;

	if (s->local0) {
		*out = s->local0;
		return 0;
	}
	if ((err = proc_mem_read(pp->memfd, s->key + pp->vi->off.frame_code, &code, 8)) ||
	    (err = proc_mem_read(pp->memfd, s->key + pp->vi->off.frame_localsplus, &local, 8)))
		return err;
	if ((code & PTG_PY_REF_MASK) != s->code)
		return -ESRCH;
	*out = local & PTG_PY_REF_MASK;
	return 0;
}

/*
 * Frames on the stack before recording came in a snapshot, each with the
 * first local BPF read from it then (see first_local()).
 */
static int resync(struct mod_proc *pp, struct mod_thread *mt, const struct tracer_thread *th)
{
	uint32_t keep = 0;
	int err = 0;

	while (keep < mt->n && call_open(&mt->calls[keep], th))
		keep++;
	mt->n = keep;
	for (uint32_t i = keep ? mt->calls[keep - 1].idx + 1 : 0; !err && i < th->depth; i++) {
		const struct tracer_slot *s = &th->stack[i];
		const struct code_kind *k;
		uint64_t self = 0;
		uint32_t m;

		if (s->kind != PTG_REC_PY_ENTER)
			continue;
		k = code_kind(pp, s->code, s->fingerprint);
		if (!k || (k->role != ROLE_CALL_IMPL && k->role != ROLE_WRAPPED))
			continue;
		if (first_local(pp, s, &self)) {
			pp->mp->st.unreadable++;
			continue;
		}
		if (k->role == ROLE_WRAPPED) {
			mt->wrapped =
			    (struct wrapped_call){.idx = i, .frame = s->key, .self = self};
			continue;
		}
		err = start_call(mt, th, i, s->key, s->code, self);
		m = err ? UINT32_MAX : method_slot(pp, th, i);
		if (m != UINT32_MAX && !mt->calls[mt->n - 1].trusted)
			first_local(pp, &th->stack[m], &mt->calls[mt->n - 1].alt);
	}
	return err;
}

static void proc_free(struct mod_proc *pp)
{
	if (!pp)
		return;
	if (pp->memfd >= 0)
		close(pp->memfd);
	for (size_t i = 0; i < pp->npaths; i++)
		free(pp->paths[i].str);
	free(pp->kinds);
	free(pp->paths);
	u64map__free(&pp->code_idx);
	u64map__free(&pp->path_idx);
	u64map__free(&pp->instance);
	u64map__free(&pp->class_count);
	u64map__free(&pp->modules);
	free(pp);
}

/*
 * NULL when out of memory. A process whose memory cannot be opened (it
 * ended) is kept all the same, with memfd -1 and the reason in *open_err:
 * its names read as "?", and its events do not try again.
 */
static struct mod_proc *proc_new(struct modpath *mp, pid_t pid, const struct py_version_info *vi,
				 int *open_err)
{
	struct mod_proc *pp = calloc(1, sizeof(*pp));
	char path[64];

	if (!pp)
		return NULL;
	pp->mp = mp;
	pp->pid = pid;
	pp->vi = vi;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	pp->memfd = open(path, O_RDONLY | O_CLOEXEC);
	*open_err = pp->memfd < 0 ? -errno : 0;
	return pp;
}

/*
 * The process of an event: the target's, or in a set the one of pid, made
 * at its first event from the interpreter the set found for it. NULL with
 * *err 0 when it runs no interpreter known (yet): its ops then have no
 * module path, as for a process that has none.
 */
static struct mod_proc *proc_of(struct modpath *mp, uint32_t pid, int *err)
{
	const struct py_interp *py;
	struct mod_proc *pp;
	uint64_t *idx;

	*err = 0;
	if (mp->one)
		return mp->one;
	idx = u64map__get(&mp->by_pid, pid);
	if (idx && mp->procs[*idx - 1])
		return mp->procs[*idx - 1];
	py = mp->interp_of(mp->interp_ctx, (pid_t)pid);
	if (!py)
		return NULL;
	pp = proc_new(mp, (pid_t)pid, py->info, err);
	if (!pp) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = array_grow((void **)&mp->procs, &mp->procs_cap, mp->nprocs + 1, sizeof(*mp->procs));
	*err = *err ?: u64map__put(&mp->by_pid, pid, mp->nprocs + 1);
	if (*err) {
		proc_free(pp);
		return NULL;
	}
	mp->procs[mp->nprocs++] = pp;
	return pp;
}

/*
 * A process of the set exec()'d: its addresses mean nothing any more and
 * its threads' open module calls are over; or it ended: its memory is gone.
 */
static int on_proc(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct modpath *mp = ctx;
	uint64_t *idx = u64map__get(&mp->by_pid, e->pid);
	struct mod_proc *pp = idx ? mp->procs[*idx - 1] : NULL;

	(void)t;
	(void)size;
	if (!pp || (e->kind != PTG_EV_PROC_EXEC && e->kind != PTG_EV_PROC_EXIT))
		return 0;
	if (e->kind == PTG_EV_PROC_EXIT) {
		close(pp->memfd);
		pp->memfd = -1;
		return 0;
	}
	for (size_t i = 0; i < mp->threads.len; i++) {
		struct mod_thread *mt = threads__at(&mp->threads, i);

		if (threads__pid(&mp->threads, i) == e->pid) {
			mt->n = 0;
			mt->wrapped = (struct wrapped_call){0};
		}
	}
	proc_free(pp);
	mp->procs[*idx - 1] = NULL;
	return 0;
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct modpath *mp = ctx;
	const struct tracer_thread *th;
	const struct tracer_slot *top;
	const struct code_kind *k;
	struct mod_thread *mt;
	struct mod_proc *pp;
	int err;

	pp = proc_of(mp, e->pid, &err);
	/* a process of the set with no interpreter known: none of its frames is a module call */
	if (!pp)
		return err;
	if (e->kind == PTG_EV_PY_CODE)
		return size >= sizeof(struct ptg_code_event)
			   ? learn_code(pp, (const struct ptg_code_event *)e)
			   : 0;
	th = tracer__thread(t, e->pid, e->tid, e->ts);
	mt = mod_thread(mp, e->pid, e->tid, true);
	if (!th || !mt)
		return -ENOMEM;
	switch (e->kind) {
	case PTG_EV_PY_START:
	case PTG_EV_PY_RESUME:
		top = th->depth ? &th->stack[th->depth - 1] : NULL;
		if (!top || top->kind != PTG_REC_PY_ENTER || top->key != e->a)
			return 0;
		truncate_at(mt, th->depth - 1);
		/* a frame at or below a _wrapped_call_impl's slot: that one has ended */
		if (mt->wrapped.frame && th->depth - 1 <= mt->wrapped.idx)
			mt->wrapped.frame = 0;
		if (e->kind == PTG_EV_PY_RESUME)
			return 0;
		k = code_kind(pp, e->b, e->aux);
		if (!k)
			return -ENOMEM;
		/* the method (forward, a hook) runs on the module: its first local is one */
		if (mt->n && !mt->calls[mt->n - 1].trusted && !mt->calls[mt->n - 1].alt &&
		    method_slot(pp, th, mt->calls[mt->n - 1].idx) == th->depth - 1)
			mt->calls[mt->n - 1].alt = e->c;
		if (k->role == ROLE_WRAPPED)
			mt->wrapped = (struct wrapped_call){
			    .idx = th->depth - 1, .frame = e->a, .self = e->c};
		if (k->role != ROLE_CALL_IMPL)
			return 0;
		return start_call(mt, th, th->depth - 1, e->a, e->b, e->c);
	case PTG_EV_PY_STACK:
		return resync(pp, mt, th);
	default:
		truncate_at(mt, th->depth);
		return 0;
	}
}

/*
 * The module of call c. A self taken from _call_impl itself may be the cell
 * of torch 2.1+ (see start_call()): then the first local of the method frame
 * above it is the module, unless that method is a hook bound to some other
 * object. Decided once the module is known.
 */
static uint64_t module_of(struct mod_proc *pp, struct mod_call *c)
{
	if (c->trusted)
		return c->self;
	if (modpath_is_module(pp, c->self)) {
		c->trusted = true;
	} else if (c->alt && modpath_is_module(pp, c->alt)) {
		c->self = c->alt;
		c->trusted = true;
	}
	return c->self;
}

/*
 * "fc1", or "Linear#2" for the third Linear not held by its parent's
 * _modules, or "?" when the parent could not be read (the process exited
 * before we got to it).
 */
static void label_of(struct mod_proc *pp, const struct path *parent, uint64_t self,
		     const char *type, char *buf, size_t len)
{
	uint64_t type_obj = 0, *no, *count;
	int err;

	if (!parent) {
		snprintf(buf, len, "TOP");
		return;
	}
	if (parent->self == self) {
		snprintf(buf, len, "SELF");
		return;
	}
	err = modpath_attr_name(pp, parent->self, self, buf, len);
	if (!err)
		return;
	if (err != -ENOENT) {
		/* the process is gone, or its dict changed under us: no guess */
		pp->mp->st.unreadable++;
		snprintf(buf, len, "?");
		return;
	}
	pp->mp->st.unnamed++;
	no = u64map__get(&pp->instance, self);
	if (!no) {
		proc_mem_read(pp->memfd, self + pp->vi->object_type, &type_obj, 8);
		count = u64map__get(&pp->class_count, type_obj | 1);
		u64map__put(&pp->class_count, type_obj | 1, count ? *count + 1 : 1);
		u64map__put(&pp->instance, self, count ? *count + 1 : 1);
		no = u64map__get(&pp->instance, self);
	}
	snprintf(buf, len, "%.200s#%llu", type, no ? (unsigned long long)*no - 1 : 0ull);
}

static uint64_t path_key(uint32_t parent, uint64_t self, uint64_t method)
{
	uint64_t h = (parent + 1) * 0x9e3779b97f4a7c15ull ^ self * 0xc2b2ae3d27d4eb4full ^
		     method * 0x165667b19e3779f9ull;

	return h ? h : 1;
}

/* Index + 1 of the path of a module call under parent (index + 1, or 0). */
static uint32_t make_path(struct mod_proc *pp, uint32_t parent, uint64_t self, uint64_t method,
			  const char *method_name)
{
	uint64_t key = path_key(parent, self, method), *idx = u64map__get(&pp->path_idx, key);
	const struct path *up = parent ? &pp->paths[parent - 1] : NULL;
	char label[LABEL_LEN], type[LABEL_LEN], *str;
	struct path *p;

	if (idx && pp->paths[*idx - 1].parent == parent && pp->paths[*idx - 1].self == self &&
	    pp->paths[*idx - 1].method == method)
		return (uint32_t)*idx;
	if (py_read_type_name(pp->memfd, pp->vi, self, type, sizeof(type)))
		snprintf(type, sizeof(type), "?");
	label_of(pp, up, self, type, label, sizeof(label));
	str = malloc(PATH_MAX_LEN);
	if (!str ||
	    array_grow((void **)&pp->paths, &pp->paths_cap, pp->npaths + 1, sizeof(*pp->paths))) {
		free(str);
		return 0;
	}
	snprintf(str, PATH_MAX_LEN, "%s%s%s(%s)::%s", up ? up->str : "", up ? "." : "", label, type,
		 method_name);
	p = &pp->paths[pp->npaths++];
	*p = (struct path){.parent = parent, .self = self, .method = method, .str = str};
	p->sym = trace_writer__sym(tracer__writer(pp->mp->t), PTG_SYM_STRING, str, "", 0);
	pp->mp->st.paths++;
	/* on a hash collision the older path stays cached and this one is made again */
	if (!idx)
		u64map__put(&pp->path_idx, key, pp->npaths);
	return (uint32_t)pp->npaths;
}

/* The method a module call runs (forward, a hook): see method_slot(). */
static uint64_t method_of(struct mod_proc *pp, const struct tracer_thread *th,
			  const struct mod_call *c, const char **name)
{
	uint32_t m = method_slot(pp, th, c->idx);
	const struct tracer_slot *s;
	const struct code_kind *k;

	*name = "__call__";
	if (m == UINT32_MAX)
		return 0;
	s = &th->stack[m];
	k = code_kind(pp, s->code, s->fingerprint);
	if (k && k->method[0])
		*name = k->method;
	return s->code;
}

uint32_t modpath__current(struct modpath *mp, const struct tracer_thread *th)
{
	struct mod_thread *mt = mod_thread(mp, th->pid, th->tid, false);
	struct mod_proc *pp;
	uint32_t parent = 0;
	int err;

	if (!mt || !(pp = proc_of(mp, th->pid, &err)))
		return 0;
	while (mt->n && !call_open(&mt->calls[mt->n - 1], th))
		mt->n--;
	for (uint32_t i = 0; i < mt->n; i++) {
		struct mod_call *c = &mt->calls[i];
		const char *name;
		uint64_t method = method_of(pp, th, c, &name);

		if (!c->path || c->method != method || pp->paths[c->path - 1].parent != parent) {
			c->path = make_path(pp, parent, module_of(pp, c), method, name);
			c->method = method;
			if (!c->path)
				return 0;
		}
		parent = c->path;
	}
	return parent ? pp->paths[parent - 1].sym : 0;
}

static struct modpath *modpath_new(struct tracer *t)
{
	struct modpath *mp = calloc(1, sizeof(*mp));

	if (!mp)
		return NULL;
	mp->t = t;
	mp->threads = THREADS_INIT(struct mod_thread);
	return mp;
}

int modpath__open(struct tracer *t, const struct py_interp *py, struct modpath **out)
{
	struct modpath *mp = modpath_new(t);
	int err;

	if (!mp)
		return -ENOMEM;
	mp->one = proc_new(mp, py->pid, py->info, &err);
	if (!mp->one)
		err = -ENOMEM;
	else if (err)
		pr_err("modpath: cannot open /proc/%d/mem: %s", py->pid, strerror(-err));
	err = err ?: tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, NULL, mp);
	if (err) {
		modpath__destroy(mp);
		return err;
	}
	*out = mp;
	return 0;
}

int modpath__open_set(struct tracer *t, modpath_interp_fn interp_of, void *ctx,
		      struct modpath **out)
{
	struct modpath *mp = modpath_new(t);
	int err;

	if (!mp)
		return -ENOMEM;
	mp->interp_of = interp_of;
	mp->interp_ctx = ctx;
	err = tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, NULL, mp);
	err = err ?: tracer__on(t, PTG_EV_PROC_FORK, PTG_EV_PROC_EXIT, on_proc, NULL, mp);
	if (err) {
		modpath__destroy(mp);
		return err;
	}
	*out = mp;
	return 0;
}

void modpath__stats(const struct modpath *mp, struct modpath_stats *st)
{
	*st = mp->st;
}

void modpath__destroy(struct modpath *mp)
{
	if (!mp)
		return;
	threads__free(&mp->threads, mod_thread_fini);
	proc_free(mp->one);
	for (size_t i = 0; i < mp->nprocs; i++)
		proc_free(mp->procs[i]);
	free(mp->procs);
	u64map__free(&mp->by_pid);
	free(mp);
}
