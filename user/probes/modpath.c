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
#include "probes/modpath.h"
#include "proc/procfs.h"
#include "pyinterp/pycode.h"

#define CALL_FILE	 "/torch/nn/modules/module.py"
#define MAX_DICT_ENTRIES 4096
#define PATH_MAX_LEN	 4096
#define LABEL_LEN	 256

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
	const struct py_version_info *vi;
	int memfd;
	struct threads threads; /* of struct mod_thread */
	struct u64map code_idx; /* code -> index + 1 in kinds */
	struct code_kind *kinds;
	size_t nkinds, kinds_cap;
	struct u64map path_idx; /* hash of (parent, self, method name) -> index + 1 */
	struct path *paths;
	size_t npaths, paths_cap;
	struct u64map instance;	   /* unnamed module object -> its number + 1 in its class */
	struct u64map class_count; /* type object -> modules of it numbered so far */
	struct u64map modules;	   /* objects found to hold a _modules attribute -> 1 */
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
static struct code_kind *code_slot(struct modpath *mp, uint64_t code, uint32_t fingerprint,
				   bool *found)
{
	uint64_t *idx = u64map__get(&mp->code_idx, code);
	struct code_kind *k;

	*found = idx && mp->kinds[*idx - 1].fingerprint == fingerprint;
	if (*found)
		return &mp->kinds[*idx - 1];
	if (!idx) {
		if (array_grow((void **)&mp->kinds, &mp->kinds_cap, mp->nkinds + 1,
			       sizeof(*mp->kinds)))
			return NULL;
		if (u64map__put(&mp->code_idx, code, mp->nkinds + 1))
			return NULL;
		k = &mp->kinds[mp->nkinds++];
	} else {
		k = &mp->kinds[*idx - 1];
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
static const struct code_kind *code_kind(struct modpath *mp, uint64_t code, uint32_t fingerprint)
{
	struct py_code_info ci;
	struct code_kind *k;
	bool found;

	k = code_slot(mp, code, fingerprint, &found);
	if (!k || found)
		return k;
	if (py_read_code(mp->memfd, mp->vi, code, &ci) || ci.fingerprint != fingerprint)
		return k; /* freed before we read it: not a module call as far as we know */
	set_kind(k, &ci);
	return k;
}

/* Names sent with a code object's first event: good even once the process is gone. */
static int learn_code(struct modpath *mp, const struct ptg_code_event *c)
{
	struct py_code_info ci;
	struct code_kind *k;
	bool found;

	if (py_code_from_event(c, &ci))
		return 0; /* code_kind() reads it from memory */
	k = code_slot(mp, c->hdr.a, c->hdr.aux, &found);
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
static uint32_t method_slot(struct modpath *mp, const struct tracer_thread *th, uint32_t idx)
{
	const struct tracer_slot *s;
	const struct code_kind *k;

	if (idx + 1 >= th->depth || th->stack[idx + 1].kind != PTG_REC_PY_ENTER)
		return UINT32_MAX;
	s = &th->stack[idx + 1];
	k = code_kind(mp, s->code, s->fingerprint);
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
static int first_local(struct modpath *mp, const struct tracer_slot *s, uint64_t *out)
{
	uint64_t code = 0, local = 0;
	int err;

	if (s->local0) {
		*out = s->local0;
		return 0;
	}
	if ((err = proc_mem_read(mp->memfd, s->key + mp->vi->off.frame_code, &code, 8)) ||
	    (err = proc_mem_read(mp->memfd, s->key + mp->vi->off.frame_localsplus, &local, 8)))
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
static int resync(struct modpath *mp, struct mod_thread *mt, const struct tracer_thread *th)
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
		k = code_kind(mp, s->code, s->fingerprint);
		if (!k || (k->role != ROLE_CALL_IMPL && k->role != ROLE_WRAPPED))
			continue;
		if (first_local(mp, s, &self)) {
			mp->st.unreadable++;
			continue;
		}
		if (k->role == ROLE_WRAPPED) {
			mt->wrapped =
			    (struct wrapped_call){.idx = i, .frame = s->key, .self = self};
			continue;
		}
		err = start_call(mt, th, i, s->key, s->code, self);
		m = err ? UINT32_MAX : method_slot(mp, th, i);
		if (m != UINT32_MAX && !mt->calls[mt->n - 1].trusted)
			first_local(mp, &th->stack[m], &mt->calls[mt->n - 1].alt);
	}
	return err;
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct modpath *mp = ctx;
	const struct tracer_thread *th;
	const struct tracer_slot *top;
	const struct code_kind *k;
	struct mod_thread *mt;

	if (e->kind == PTG_EV_PY_CODE)
		return size >= sizeof(struct ptg_code_event)
			   ? learn_code(mp, (const struct ptg_code_event *)e)
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
		k = code_kind(mp, e->b, e->aux);
		if (!k)
			return -ENOMEM;
		/* the method (forward, a hook) runs on the module: its first local is one */
		if (mt->n && !mt->calls[mt->n - 1].trusted && !mt->calls[mt->n - 1].alt &&
		    method_slot(mp, th, mt->calls[mt->n - 1].idx) == th->depth - 1)
			mt->calls[mt->n - 1].alt = e->c;
		if (k->role == ROLE_WRAPPED)
			mt->wrapped = (struct wrapped_call){
			    .idx = th->depth - 1, .frame = e->a, .self = e->c};
		if (k->role != ROLE_CALL_IMPL)
			return 0;
		return start_call(mt, th, th->depth - 1, e->a, e->b, e->c);
	case PTG_EV_PY_STACK:
		return resync(mp, mt, th);
	default:
		truncate_at(mt, th->depth);
		return 0;
	}
}

/* An entry of d: key and value object addresses. */
struct dict_entries {
	uint64_t keys[MAX_DICT_ENTRIES];
	uint64_t values[MAX_DICT_ENTRIES];
	int64_t n;
};

/* Reads the entries of a dict's keys object; values from a split table when given. */
static int read_entries(struct modpath *mp, uint64_t dk, uint64_t split, struct dict_entries *out)
{
	const struct py_dict_layout *d = &mp->vi->dict;
	uint8_t log2_index_bytes = 0, kind = 0;
	uint32_t esize, koff, voff;
	uint8_t *raw;
	int err;

	if ((err = proc_mem_read(mp->memfd, dk + d->keys_log2_index_bytes, &log2_index_bytes, 1)) ||
	    (err = proc_mem_read(mp->memfd, dk + d->keys_kind, &kind, 1)) ||
	    (err = proc_mem_read(mp->memfd, dk + d->keys_nentries, &out->n, 8)))
		return err;
	if (out->n < 0 || out->n > MAX_DICT_ENTRIES || log2_index_bytes > 40)
		return -EINVAL;
	esize = kind == d->kind_general ? d->entry_size : d->uentry_size;
	koff = kind == d->kind_general ? d->entry_key : d->uentry_key;
	voff = kind == d->kind_general ? d->entry_value : d->uentry_value;
	raw = malloc((size_t)out->n * esize + 1);
	if (!raw)
		return -ENOMEM;
	err = proc_mem_read(mp->memfd, dk + d->keys_indices + (1ull << log2_index_bytes), raw,
			    (size_t)out->n * esize);
	for (int64_t i = 0; !err && i < out->n; i++) {
		memcpy(&out->keys[i], raw + i * esize + koff, 8);
		memcpy(&out->values[i], raw + i * esize + voff, 8);
	}
	free(raw);
	if (!err && split)
		err = proc_mem_read(mp->memfd, split, out->values, (size_t)out->n * 8);
	return err;
}

static int dict_entries_of(struct modpath *mp, uint64_t dict, struct dict_entries *out)
{
	uint64_t keys = 0, values = 0;
	int err;

	if ((err = proc_mem_read(mp->memfd, dict + mp->vi->dict.dict_keys, &keys, 8)) ||
	    (err = proc_mem_read(mp->memfd, dict + mp->vi->dict.dict_values, &values, 8)))
		return err;
	/* a split table keeps its values apart from the shared keys */
	return read_entries(mp, keys, values ? values + mp->vi->dict.values_items : 0, out);
}

/*
 * An instance's managed dict, or (no dict object made yet) its values: the
 * keys are the type's shared ones then. Where each version keeps them is in
 * py_dict_layout.scheme.
 */
static int managed_entries(struct modpath *mp, uint64_t obj, uint64_t type, uint64_t flags,
			   struct dict_entries *out)
{
	const struct py_dict_layout *d = &mp->vi->dict;
	uint64_t word = 0, values = 0, keys = 0, basicsize = 0;
	int err;

	if ((err = proc_mem_read(mp->memfd, obj + d->managed_dict, &word, 8)))
		return err;
	switch (d->scheme) {
	case PY_DICT_SPLIT_311:
		if (word)
			return dict_entries_of(mp, word, out);
		err = proc_mem_read(mp->memfd, obj + d->managed_values, &values, 8);
		break;
	case PY_DICT_TAGGED_312:
		/* PyDictOrValues: a values pointer, plus one, or the dict */
		if (!(word & 1))
			return word ? dict_entries_of(mp, word, out) : -ENOENT;
		values = word - 1;
		break;
	case PY_DICT_INLINE_313:
		if (word)
			return dict_entries_of(mp, word, out);
		if (!(flags & d->flag_inline_values))
			return -ENOENT;
		err = proc_mem_read(mp->memfd, type + d->type_basicsize, &basicsize, 8);
		values = obj + basicsize;
		break;
	}
	if (!err)
		err = proc_mem_read(mp->memfd, type + d->heaptype_cached_keys, &keys, 8);
	if (err)
		return err;
	return values && keys ? read_entries(mp, keys, values + d->values_items, out) : -ENOENT;
}

/* The entries of obj's instance dict, wherever its version keeps them. */
static int instance_entries(struct modpath *mp, uint64_t obj, struct dict_entries *out)
{
	const struct py_dict_layout *d = &mp->vi->dict;
	uint64_t type = 0, flags = 0, dict = 0;
	int64_t dictoffset = 0;
	int err;

	if ((err = proc_mem_read(mp->memfd, obj + mp->vi->object_type, &type, 8)) ||
	    (err = proc_mem_read(mp->memfd, type + d->type_flags, &flags, 8)))
		return err;
	if (d->flag_managed_dict && (flags & d->flag_managed_dict)) {
		return managed_entries(mp, obj, type, flags, out);
	} else {
		if ((err = proc_mem_read(mp->memfd, type + d->type_dictoffset, &dictoffset, 8)))
			return err;
		if (dictoffset <= 0 ||
		    (err = proc_mem_read(mp->memfd, obj + (uint64_t)dictoffset, &dict, 8)))
			return err ?: -ENOENT;
	}
	return dict ? dict_entries_of(mp, dict, out) : -ENOENT;
}

/* obj._modules, from obj's instance attributes; de is scratch space. */
static int modules_dict(struct modpath *mp, uint64_t obj, struct dict_entries *de, uint64_t *out)
{
	char key[64];
	int err;

	*out = 0;
	err = instance_entries(mp, obj, de);
	for (int64_t i = 0; !err && i < de->n; i++) {
		if (de->keys[i] && de->values[i] &&
		    !py_read_str(mp->memfd, mp->vi, de->keys[i], key, sizeof(key)) &&
		    !strcmp(key, "_modules")) {
			*out = de->values[i];
			return 0;
		}
	}
	return err ?: -ENOENT;
}

/* obj is an nn.Module, as far as its attributes say: it has _modules. */
static bool is_module(struct modpath *mp, uint64_t obj)
{
	struct dict_entries *de;
	uint64_t modules;
	bool yes;

	if (!obj)
		return false;
	if (u64map__get(&mp->modules, obj))
		return true;
	de = malloc(sizeof(*de));
	yes = de && !modules_dict(mp, obj, de, &modules);
	free(de);
	if (yes)
		u64map__put(&mp->modules, obj, 1);
	return yes;
}

/*
 * The module of call c. A self taken from _call_impl itself may be the cell
 * of torch 2.1+ (see start_call()): then the first local of the method frame
 * above it is the module, unless that method is a hook bound to some other
 * object. Decided once the module is known.
 */
static uint64_t module_of(struct modpath *mp, struct mod_call *c)
{
	if (c->trusted)
		return c->self;
	if (is_module(mp, c->self)) {
		c->trusted = true;
	} else if (c->alt && is_module(mp, c->alt)) {
		c->self = c->alt;
		c->trusted = true;
	}
	return c->self;
}

/* parent._modules: the name under which it holds child. */
static int attr_name(struct modpath *mp, uint64_t parent, uint64_t child, char *buf, size_t len)
{
	struct dict_entries *de = malloc(sizeof(*de));
	uint64_t modules = 0;
	int err;

	if (!de)
		return -ENOMEM;
	err = modules_dict(mp, parent, de, &modules);
	err = err ?: dict_entries_of(mp, modules, de);
	for (int64_t i = 0; !err && i < de->n; i++) {
		if (de->values[i] == child && de->keys[i]) {
			err = py_read_str(mp->memfd, mp->vi, de->keys[i], buf, len);
			free(de);
			return err;
		}
	}
	free(de);
	return err ?: -ENOENT;
}

/*
 * "fc1", or "Linear#2" for the third Linear not held by its parent's
 * _modules, or "?" when the parent could not be read (the process exited
 * before we got to it).
 */
static void label_of(struct modpath *mp, const struct path *parent, uint64_t self, const char *type,
		     char *buf, size_t len)
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
	err = attr_name(mp, parent->self, self, buf, len);
	if (!err)
		return;
	if (err != -ENOENT) {
		/* the process is gone, or its dict changed under us: no guess */
		mp->st.unreadable++;
		snprintf(buf, len, "?");
		return;
	}
	mp->st.unnamed++;
	no = u64map__get(&mp->instance, self);
	if (!no) {
		proc_mem_read(mp->memfd, self + mp->vi->object_type, &type_obj, 8);
		count = u64map__get(&mp->class_count, type_obj | 1);
		u64map__put(&mp->class_count, type_obj | 1, count ? *count + 1 : 1);
		u64map__put(&mp->instance, self, count ? *count + 1 : 1);
		no = u64map__get(&mp->instance, self);
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
static uint32_t make_path(struct modpath *mp, uint32_t parent, uint64_t self, uint64_t method,
			  const char *method_name)
{
	uint64_t key = path_key(parent, self, method), *idx = u64map__get(&mp->path_idx, key);
	const struct path *pp = parent ? &mp->paths[parent - 1] : NULL;
	char label[LABEL_LEN], type[LABEL_LEN], *str;
	struct path *p;

	if (idx && mp->paths[*idx - 1].parent == parent && mp->paths[*idx - 1].self == self &&
	    mp->paths[*idx - 1].method == method)
		return (uint32_t)*idx;
	if (py_read_type_name(mp->memfd, mp->vi, self, type, sizeof(type)))
		snprintf(type, sizeof(type), "?");
	label_of(mp, pp, self, type, label, sizeof(label));
	str = malloc(PATH_MAX_LEN);
	if (!str ||
	    array_grow((void **)&mp->paths, &mp->paths_cap, mp->npaths + 1, sizeof(*mp->paths))) {
		free(str);
		return 0;
	}
	snprintf(str, PATH_MAX_LEN, "%s%s%s(%s)::%s", pp ? pp->str : "", pp ? "." : "", label, type,
		 method_name);
	p = &mp->paths[mp->npaths++];
	*p = (struct path){.parent = parent, .self = self, .method = method, .str = str};
	p->sym = trace_writer__sym(tracer__writer(mp->t), PTG_SYM_STRING, str, "", 0);
	mp->st.paths++;
	/* on a hash collision the older path stays cached and this one is made again */
	if (!idx)
		u64map__put(&mp->path_idx, key, mp->npaths);
	return (uint32_t)mp->npaths;
}

/* The method a module call runs (forward, a hook): see method_slot(). */
static uint64_t method_of(struct modpath *mp, const struct tracer_thread *th,
			  const struct mod_call *c, const char **name)
{
	uint32_t m = method_slot(mp, th, c->idx);
	const struct tracer_slot *s;
	const struct code_kind *k;

	*name = "__call__";
	if (m == UINT32_MAX)
		return 0;
	s = &th->stack[m];
	k = code_kind(mp, s->code, s->fingerprint);
	if (k && k->method[0])
		*name = k->method;
	return s->code;
}

uint32_t modpath__current(struct modpath *mp, const struct tracer_thread *th)
{
	struct mod_thread *mt = mod_thread(mp, th->pid, th->tid, false);
	uint32_t parent = 0;

	if (!mt)
		return 0;
	while (mt->n && !call_open(&mt->calls[mt->n - 1], th))
		mt->n--;
	for (uint32_t i = 0; i < mt->n; i++) {
		struct mod_call *c = &mt->calls[i];
		const char *name;
		uint64_t method = method_of(mp, th, c, &name);

		if (!c->path || c->method != method || mp->paths[c->path - 1].parent != parent) {
			c->path = make_path(mp, parent, module_of(mp, c), method, name);
			c->method = method;
			if (!c->path)
				return 0;
		}
		parent = c->path;
	}
	return parent ? mp->paths[parent - 1].sym : 0;
}

int modpath__open(struct tracer *t, const struct py_interp *py, struct modpath **out)
{
	struct modpath *mp;
	char path[64];
	int err;

	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return -ENOMEM;
	mp->t = t;
	mp->threads = THREADS_INIT(struct mod_thread);
	mp->memfd = -1;
	mp->vi = py->info;
	snprintf(path, sizeof(path), "/proc/%d/mem", py->pid);
	mp->memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (mp->memfd < 0) {
		err = -errno;
		pr_err("modpath: cannot open %s: %s", path, strerror(-err));
		goto cleanup;
	}
	err = tracer__on(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, NULL, mp);
	if (err)
		goto cleanup;
	*out = mp;
	return 0;
cleanup:
	modpath__destroy(mp);
	return err;
}

void modpath__stats(const struct modpath *mp, struct modpath_stats *st)
{
	*st = mp->st;
}

void modpath__destroy(struct modpath *mp)
{
	if (!mp)
		return;
	if (mp->memfd >= 0)
		close(mp->memfd);
	threads__free(&mp->threads, mod_thread_fini);
	for (size_t i = 0; i < mp->npaths; i++)
		free(mp->paths[i].str);
	free(mp->kinds);
	free(mp->paths);
	u64map__free(&mp->code_idx);
	u64map__free(&mp->path_idx);
	u64map__free(&mp->instance);
	u64map__free(&mp->class_count);
	u64map__free(&mp->modules);
	free(mp);
}
