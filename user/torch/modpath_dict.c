// SPDX-License-Identifier: MIT
/*
 * Module paths, the part that reads a module's attributes from the target:
 * an object's instance dict (wherever its CPython version keeps it, with
 * the layout of user/pyinterp's table) and its _modules dict in that.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc/procfs.h"
#include "pyinterp/pycode.h"
#include "torch/modpath_int.h"

#define MAX_DICT_ENTRIES 4096

/* An entry of d: key and value object addresses. */
struct dict_entries {
	uint64_t keys[MAX_DICT_ENTRIES];
	uint64_t values[MAX_DICT_ENTRIES];
	int64_t n;
};

/* Reads the entries of a dict's keys object; values from a split table when given. */
static int read_entries(struct mod_proc *pp, uint64_t dk, uint64_t split, struct dict_entries *out)
{
	const struct py_dict_layout *d = &pp->vi->dict;
	uint8_t log2_index_bytes = 0, kind = 0;
	uint32_t esize, koff, voff;
	uint8_t *raw;
	int err;

	if ((err = proc_mem_read(pp->memfd, dk + d->keys_log2_index_bytes, &log2_index_bytes, 1)) ||
	    (err = proc_mem_read(pp->memfd, dk + d->keys_kind, &kind, 1)) ||
	    (err = proc_mem_read(pp->memfd, dk + d->keys_nentries, &out->n, 8)))
		return err;
	if (out->n < 0 || out->n > MAX_DICT_ENTRIES || log2_index_bytes > 40)
		return -EINVAL;
	esize = kind == d->kind_general ? d->entry_size : d->uentry_size;
	koff = kind == d->kind_general ? d->entry_key : d->uentry_key;
	voff = kind == d->kind_general ? d->entry_value : d->uentry_value;
	raw = malloc((size_t)out->n * esize + 1);
	if (!raw)
		return -ENOMEM;
	err = proc_mem_read(pp->memfd, dk + d->keys_indices + (1ull << log2_index_bytes), raw,
			    (size_t)out->n * esize);
	for (int64_t i = 0; !err && i < out->n; i++) {
		memcpy(&out->keys[i], raw + i * esize + koff, 8);
		memcpy(&out->values[i], raw + i * esize + voff, 8);
	}
	free(raw);
	if (!err && split)
		err = proc_mem_read(pp->memfd, split, out->values, (size_t)out->n * 8);
	return err;
}

static int dict_entries_of(struct mod_proc *pp, uint64_t dict, struct dict_entries *out)
{
	uint64_t keys = 0, values = 0;
	int err;

	if ((err = proc_mem_read(pp->memfd, dict + pp->vi->dict.dict_keys, &keys, 8)) ||
	    (err = proc_mem_read(pp->memfd, dict + pp->vi->dict.dict_values, &values, 8)))
		return err;
	/* a split table keeps its values apart from the shared keys */
	return read_entries(pp, keys, values ? values + pp->vi->dict.values_items : 0, out);
}

/*
 * An instance's managed dict, or (no dict object made yet) its values: the
 * keys are the type's shared ones then. Where each version keeps them is in
 * py_dict_layout.scheme.
 */
static int managed_entries(struct mod_proc *pp, uint64_t obj, uint64_t type, uint64_t flags,
			   struct dict_entries *out)
{
	const struct py_dict_layout *d = &pp->vi->dict;
	uint64_t word = 0, values = 0, keys = 0, basicsize = 0;
	int err;

	if ((err = proc_mem_read(pp->memfd, obj + d->managed_dict, &word, 8)))
		return err;
	switch (d->scheme) {
	case PY_DICT_SPLIT_311:
		if (word)
			return dict_entries_of(pp, word, out);
		err = proc_mem_read(pp->memfd, obj + d->managed_values, &values, 8);
		break;
	case PY_DICT_TAGGED_312:
		/* PyDictOrValues: a values pointer, plus one, or the dict */
		if (!(word & 1))
			return word ? dict_entries_of(pp, word, out) : -ENOENT;
		values = word - 1;
		break;
	case PY_DICT_INLINE_313:
		if (word)
			return dict_entries_of(pp, word, out);
		if (!(flags & d->flag_inline_values))
			return -ENOENT;
		err = proc_mem_read(pp->memfd, type + d->type_basicsize, &basicsize, 8);
		values = obj + basicsize;
		break;
	}
	if (!err)
		err = proc_mem_read(pp->memfd, type + d->heaptype_cached_keys, &keys, 8);
	if (err)
		return err;
	return values && keys ? read_entries(pp, keys, values + d->values_items, out) : -ENOENT;
}

/* The entries of obj's instance dict, wherever its version keeps them. */
static int instance_entries(struct mod_proc *pp, uint64_t obj, struct dict_entries *out)
{
	const struct py_dict_layout *d = &pp->vi->dict;
	uint64_t type = 0, flags = 0, dict = 0;
	int64_t dictoffset = 0;
	int err;

	if ((err = proc_mem_read(pp->memfd, obj + pp->vi->object_type, &type, 8)) ||
	    (err = proc_mem_read(pp->memfd, type + d->type_flags, &flags, 8)))
		return err;
	if (d->flag_managed_dict && (flags & d->flag_managed_dict)) {
		return managed_entries(pp, obj, type, flags, out);
	} else {
		if ((err = proc_mem_read(pp->memfd, type + d->type_dictoffset, &dictoffset, 8)))
			return err;
		if (dictoffset <= 0 ||
		    (err = proc_mem_read(pp->memfd, obj + (uint64_t)dictoffset, &dict, 8)))
			return err ?: -ENOENT;
	}
	return dict ? dict_entries_of(pp, dict, out) : -ENOENT;
}

/* obj._modules, from obj's instance attributes; de is scratch space. */
static int modules_dict(struct mod_proc *pp, uint64_t obj, struct dict_entries *de, uint64_t *out)
{
	char key[64];
	int err;

	*out = 0;
	err = instance_entries(pp, obj, de);
	for (int64_t i = 0; !err && i < de->n; i++) {
		if (de->keys[i] && de->values[i] &&
		    !py_read_str(pp->memfd, pp->vi, de->keys[i], key, sizeof(key)) &&
		    !strcmp(key, "_modules")) {
			*out = de->values[i];
			return 0;
		}
	}
	return err ?: -ENOENT;
}

/* obj is an nn.Module, as far as its attributes say: it has _modules. */
bool modpath_is_module(struct mod_proc *pp, uint64_t obj)
{
	struct dict_entries *de;
	uint64_t modules;
	bool yes;

	if (!obj)
		return false;
	if (u64map__get(&pp->modules, obj))
		return true;
	de = malloc(sizeof(*de));
	yes = de && !modules_dict(pp, obj, de, &modules);
	free(de);
	if (yes)
		u64map__put(&pp->modules, obj, 1);
	return yes;
}

/* parent._modules: the name under which it holds child. */
int modpath_attr_name(struct mod_proc *pp, uint64_t parent, uint64_t child, char *buf, size_t len)
{
	struct dict_entries *de = malloc(sizeof(*de));
	uint64_t modules = 0;
	int err;

	if (!de)
		return -ENOMEM;
	err = modules_dict(pp, parent, de, &modules);
	err = err ?: dict_entries_of(pp, modules, de);
	for (int64_t i = 0; !err && i < de->n; i++) {
		if (de->values[i] == child && de->keys[i]) {
			err = py_read_str(pp->memfd, pp->vi, de->keys[i], buf, len);
			free(de);
			return err;
		}
	}
	free(de);
	return err ?: -ENOENT;
}
