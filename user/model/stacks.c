// SPDX-License-Identifier: MIT
/*
 * Stack counts: a trie of (parent node, frame) nodes, so identical stacks
 * merge as they are added and memory follows the number of distinct stacks.
 * No node is deeper than max_stack + 1: deeper frames fold into one
 * STACKS_CUT node. Names are made once per frame, for the writers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/buf.h"
#include "model/stacks.h"

static const char *stacks_name(struct stacks *st, uint32_t frame);

/* the top bit is never part of a node index */
static uint64_t node_key(uint32_t parent, uint32_t frame)
{
	return u64map_key((uint64_t)parent << 32 | frame);
}

static int new_node(struct stacks *st, uint32_t parent, uint32_t frame, uint32_t *out)
{
	struct stacks_node *n;

	if (st->n >= INT32_MAX ||
	    array_grow((void **)&st->nodes, &st->cap, st->n + 1, sizeof(*st->nodes)))
		return -ENOMEM;
	n = &st->nodes[st->n];
	memset(n, 0, sizeof(*n));
	n->parent = parent;
	n->frame = frame;
	n->child = STACKS_NONE;
	n->sibling = STACKS_NONE;
	n->depth = st->n == STACKS_ROOT ? 0 : st->nodes[parent].depth + 1;
	if (st->n != STACKS_ROOT) {
		n->sibling = st->nodes[parent].child;
		st->nodes[parent].child = st->n;
	}
	*out = st->n++;
	return 0;
}

/*
 * The child of parent for frame, created on first use. Past max_stack
 * frames it is the parent's STACKS_CUT child, and the STACKS_CUT node itself below.
 */
int stacks__child(struct stacks *st, uint32_t parent, uint32_t frame, uint32_t *out)
{
	uint64_t *idx;
	int err;

	if (st->nodes[parent].frame == STACKS_CUT && parent != STACKS_ROOT) {
		*out = parent;
		return 0;
	}
	if (st->nodes[parent].depth >= st->max_stack)
		frame = STACKS_CUT;
	idx = u64map__get(&st->index, node_key(parent, frame));

	if (idx) {
		*out = (uint32_t)*idx;
		return 0;
	}
	err = new_node(st, parent, frame, out);
	if (!err)
		err = u64map__put(&st->index, node_key(parent, frame), *out);
	return err;
}

/* A stack of nframes frames ended in node: an STACKS_CUT node notes how many it cut. */
int stacks__note_cut(struct stacks *st, uint32_t node, uint64_t nframes)
{
	uint64_t cut = nframes > st->max_stack ? nframes - st->max_stack : 0, *v, lo, hi;

	if (node == STACKS_ROOT || st->nodes[node].frame != STACKS_CUT || !cut)
		return 0;
	cut = cut > UINT32_MAX ? UINT32_MAX : cut;
	v = u64map__get(&st->cuts, u64map_key(node));
	if (!v)
		return u64map__put(&st->cuts, u64map_key(node), cut << 32 | cut);
	lo = *v >> 32 < cut ? *v >> 32 : cut;
	hi = (*v & UINT32_MAX) > cut ? (*v & UINT32_MAX) : cut;
	*v = lo << 32 | hi;
	return 0;
}

/* ';' separates frames and a newline ends a stack in the folded format: replaces them in name. */
static char *folded_name(char *name)
{
	for (char *p = name; *p; p++) {
		if (*p == ';')
			*p = ':';
		else if (*p == '\n' || *p == '\r')
			*p = ' ';
	}
	return name;
}

/* The frame id of name: ids index names[] + 1, as stacks_name() looks them up. */
static int named_frame(struct stacks *st, const char *name, uint32_t *out)
{
	char *copy = strdup(name);
	uint64_t h, *idx;

	if (!copy)
		return -ENOMEM;
	folded_name(copy);
	h = u64map_hash(U64MAP_HASH_SEED, copy, strlen(copy));
	/* probe on: two names may share a hash */
	for (;; h++) {
		idx = u64map__get(&st->named, u64map_key(h));
		if (!idx)
			break;
		if (!strcmp(st->names[*idx - 1], copy)) {
			free(copy);
			*out = (uint32_t)*idx;
			return 0;
		}
	}
	if (array_grow((void **)&st->names, &st->names_cap, st->nnames + 1, sizeof(*st->names))) {
		free(copy);
		return -ENOMEM;
	}
	st->names[st->nnames++] = copy;
	*out = (uint32_t)st->nnames;
	if (u64map__put(&st->named, u64map_key(h), *out) ||
	    u64map__put(&st->name_idx, u64map_key(*out), *out - 1))
		return -ENOMEM;
	return 0;
}

int stacks__add_named(struct stacks *st, const char *const *frames, unsigned int depth,
		      uint64_t weight)
{
	uint32_t node = STACKS_ROOT, frame;
	int err;

	for (unsigned int i = 0; i < depth; i++) {
		err = named_frame(st, frames[i], &frame);
		if (!err)
			err = stacks__child(st, node, frame, &node);
		if (err)
			return err;
	}
	st->nodes[node].self += weight;
	st->sorted = false;
	return stacks__note_cut(st, node, depth);
}

struct named {
	const char *name;
	uint32_t node;
};

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const struct named *)a)->name, ((const struct named *)b)->name);
}

/* Orders every node's children by name, as flamegraph.pl draws them. */
int stacks__sort(struct stacks *st)
{
	struct named *tmp = NULL;
	size_t cap = 0, n;
	int err = 0;

	for (size_t p = 0; p < st->n && !st->sorted; p++) {
		n = 0;
		for (uint32_t c = st->nodes[p].child; c != STACKS_NONE; c = st->nodes[c].sibling) {
			err = array_grow((void **)&tmp, &cap, n + 1, sizeof(*tmp));
			if (err)
				goto cleanup;
			tmp[n].node = c;
			/* a node has at most one STACKS_CUT child: any name sorts it */
			tmp[n++].name = st->nodes[c].frame == STACKS_CUT
					    ? "[... frames cut]"
					    : stacks_name(st, st->nodes[c].frame);
			if (!tmp[n - 1].name) {
				err = -ENOMEM;
				goto cleanup;
			}
		}
		array_sort(tmp, n, sizeof(*tmp), cmp_named);
		st->nodes[p].child = n ? tmp[0].node : STACKS_NONE;
		for (size_t i = 0; i < n; i++)
			st->nodes[tmp[i].node].sibling = i + 1 < n ? tmp[i + 1].node : STACKS_NONE;
	}
	st->sorted = true;
cleanup:
	free(tmp);
	return err;
}

struct stack_walk {
	const struct stacks *st;
	int (*fn)(void *ctx, const uint32_t *frames, unsigned int depth, uint64_t weight);
	void *ctx;
	uint32_t *frames;
	size_t cap;
};

static int foreach_node(struct stack_walk *w, uint32_t node, unsigned int depth)
{
	const struct stacks_node *n = &w->st->nodes[node];
	int err;

	if (array_grow((void **)&w->frames, &w->cap, depth + 1, sizeof(*w->frames)))
		return -ENOMEM;
	w->frames[depth] = n->frame;
	if (n->self && (err = w->fn(w->ctx, w->frames, depth + 1, n->self)))
		return err;
	for (uint32_t c = n->child; c != STACKS_NONE; c = w->st->nodes[c].sibling) {
		if ((err = foreach_node(w, c, depth + 1)))
			return err;
	}
	return 0;
}

int stacks__foreach_stack(const struct stacks *st,
			  int (*fn)(void *ctx, const uint32_t *frames, unsigned int depth,
				    uint64_t weight),
			  void *ctx)
{
	struct stack_walk w = {.st = st, .fn = fn, .ctx = ctx};
	int err = 0;

	for (uint32_t c = st->nodes[STACKS_ROOT].child; c != STACKS_NONE && !err;
	     c = st->nodes[c].sibling)
		err = foreach_node(&w, c, 0);
	free(w.frames);
	return err;
}
int stacks__init(struct stacks *st)
{
	uint32_t root;

	memset(st, 0, sizeof(*st));
	st->max_stack = STACKS_MAX_STACK;
	return new_node(st, STACKS_ROOT, 0, &root);
}

void stacks__fini(struct stacks *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->nnames; i++)
		free(st->names[i]);
	free(st->names);
	u64map__free(&st->name_idx);
	u64map__free(&st->named);
	u64map__free(&st->index);
	u64map__free(&st->cuts);
	free(st->nodes);
	memset(st, 0, sizeof(*st));
}

void stacks__set_max_stack(struct stacks *st, unsigned int max_stack)
{
	st->max_stack = max_stack;
}

void stacks__set_namer(struct stacks *st, const struct stacks_namer *namer)
{
	st->namer = namer;
}

uint64_t stacks__total(const struct stacks *st)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < st->n; i++)
		sum += st->nodes[i].self;
	return sum;
}

static char *default_format(uint32_t frame)
{
	char *name = NULL;

	if (!frame)
		return strdup("[unknown]");
	return asprintf(&name, "[symbol %u]", frame) < 0 ? NULL : name;
}

/* The printed name of frame, formatted once per frame; NULL when out of memory. */
static const char *stacks_name(struct stacks *st, uint32_t frame)
{
	uint64_t key = u64map_key(frame);
	uint64_t *idx = u64map__get(&st->name_idx, key);
	char *name;

	if (idx)
		return st->names[*idx];
	if (array_grow((void **)&st->names, &st->names_cap, st->nnames + 1, sizeof(*st->names)))
		return NULL;
	name = st->namer ? st->namer->format(st->namer->ctx, frame) : default_format(frame);
	if (!name)
		return NULL;
	folded_name(name);
	if (u64map__put(&st->name_idx, key, st->nnames)) {
		free(name);
		return NULL;
	}
	st->names[st->nnames++] = name;
	return name;
}

const char *stacks__node_name(struct stacks *st, uint32_t node, char buf[STACKS_CUT_NAME_LEN])
{
	uint64_t *cut;

	if (node == STACKS_ROOT || st->nodes[node].frame != STACKS_CUT)
		return stacks_name(st, st->nodes[node].frame);
	cut = u64map__get(&st->cuts, u64map_key(node));
	if (!cut)
		snprintf(buf, STACKS_CUT_NAME_LEN, "[... frames cut]");
	else if (*cut >> 32 == (*cut & UINT32_MAX))
		snprintf(buf, STACKS_CUT_NAME_LEN, "[... %u frames cut]", (uint32_t)*cut);
	else
		snprintf(buf, STACKS_CUT_NAME_LEN, "[... %u to %u frames cut]",
			 (uint32_t)(*cut >> 32), (uint32_t)*cut);
	return buf;
}

enum stacks_kind stacks__kind(const struct stacks *st, uint32_t frame)
{
	return st->namer ? st->namer->kind(st->namer->ctx, frame) : STACKS_KIND_PYTHON;
}

void stacks__totals(struct stacks *st)
{
	for (size_t i = 0; i < st->n; i++)
		st->nodes[i].total = st->nodes[i].self;
	/* a child always comes after its parent in nodes[] */
	for (size_t i = st->n; i-- > 1;)
		st->nodes[st->nodes[i].parent].total += st->nodes[i].total;
}

/* Depth-first from the root, in a loop: a trie as deep as the input must not be C recursion. */
int stacks__foreach_folded(struct stacks *st,
			   int (*fn)(void *ctx, const char *folded, uint64_t weight), void *ctx)
{
	char cut[STACKS_CUT_NAME_LEN];
	struct buf path = {};
	size_t *lens = NULL, lens_cap = 0; /* path length before each level */
	const struct stacks_node *n;
	uint32_t node;
	const char *name;
	unsigned int d = 0;
	int err;

	err = stacks__sort(st);
	node = err ? STACKS_NONE : st->nodes[STACKS_ROOT].child;
	while (node != STACKS_NONE && !err) {
		n = &st->nodes[node];
		name = stacks__node_name(st, node, cut);
		err = array_grow((void **)&lens, &lens_cap, d + 1, sizeof(*lens));
		if (err)
			break;
		lens[d] = path.len;
		if (d)
			buf__puts(&path, ";");
		err = name ? buf__puts(&path, name) : -ENOMEM;
		if (err)
			break;
		if (n->self && (err = fn(ctx, path.text, n->self)))
			break;
		if (n->child != STACKS_NONE) {
			node = n->child;
			d++;
			continue;
		}
		/* up to the nearest level with a next sibling */
		for (;;) {
			path.len = lens[d];
			path.text[path.len] = '\0';
			if (st->nodes[node].sibling != STACKS_NONE) {
				node = st->nodes[node].sibling;
				break;
			}
			node = st->nodes[node].parent;
			if (node == STACKS_ROOT) {
				node = STACKS_NONE;
				break;
			}
			d--;
		}
	}
	free(lens);
	buf__free(&path);
	return err;
}
