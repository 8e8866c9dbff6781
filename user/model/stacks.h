/* SPDX-License-Identifier: MIT */
/*
 * Stack counts: a trie of frames weighted in nanoseconds, where identical
 * stacks merge as they are added, so memory follows the number of distinct
 * stacks. It aggregates and names, and writes nothing: the flame graph of a
 * trace (flamegraph.c) and the sampler's writer (sample_write.c) both fill
 * one, and the folded and SVG writers read it.
 */
#ifndef PTG_STACKS_H
#define PTG_STACKS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/u64map.h"

/*
 * Stacks deeper than this many frames keep their outermost ones; what is
 * deeper folds into one "[... N frames cut]" frame, as perf's --max-stack
 * does, so that folded output stays bounded by stacks x max_stack.
 */
#define STACKS_MAX_STACK     1024
#define STACKS_MAX_STACK_MAX 8192

#define STACKS_ROOT 0
#define STACKS_NONE UINT32_MAX
/* the frame of a node that stands for every frame past max_stack */
#define STACKS_CUT (UINT32_MAX - 1)
/* room for the name of a STACKS_CUT node */
#define STACKS_CUT_NAME_LEN 48

struct stacks_node {
	uint32_t parent;
	uint32_t frame;	  /* frame id; 0 = [unknown] */
	uint32_t child;	  /* first child, STACKS_NONE = none */
	uint32_t sibling; /* next child of parent */
	uint32_t depth;	  /* 0 for the root */
	uint64_t self;	  /* weight of this exact stack, ns */
	uint64_t total;	  /* self + children, after stacks__totals() */
};

/* What kind of code a frame is: the SVG's palette tells them apart. */
enum stacks_kind {
	STACKS_KIND_UNRESOLVED, /* a frame id with no symbol */
	STACKS_KIND_PYTHON,
	STACKS_KIND_OP,
	STACKS_KIND_KERNEL,
	STACKS_KIND_OTHER,
};

/*
 * How frame ids that stacks__add_named() did not create are named (the
 * symbol ids of a trace). format returns a malloc'd name, NULL when out of
 * memory. Without a namer such ids read "[unknown]" (0) and "[symbol N]",
 * and every frame is of kind STACKS_KIND_PYTHON.
 */
struct stacks_namer {
	char *(*format)(const void *ctx, uint32_t frame);
	enum stacks_kind (*kind)(const void *ctx, uint32_t frame);
	const void *ctx;
};

struct stacks {
	struct stacks_node *nodes; /* nodes[STACKS_ROOT] is "all" */
	size_t n, cap;
	struct u64map index; /* (parent, frame) -> node */
	bool sorted;
	unsigned int max_stack;
	struct u64map cuts; /* STACKS_CUT node -> fewest << 32 | most frames it stands for */
	/* frame names, by frame id */
	struct u64map name_idx;
	char **names;
	size_t nnames, names_cap;
	struct u64map named; /* stacks__add_named(): name hash -> frame */
	const struct stacks_namer *namer;
};

/* An empty trie that keeps STACKS_MAX_STACK frames per stack. Returns 0 or -ENOMEM. */
int stacks__init(struct stacks *st);
void stacks__fini(struct stacks *st);
/* Frames kept per stack from now on (1 to STACKS_MAX_STACK_MAX). */
void stacks__set_max_stack(struct stacks *st, unsigned int max_stack);
/* namer (NULL: none) must outlive every naming call. */
void stacks__set_namer(struct stacks *st, const struct stacks_namer *namer);
/*
 * The child of parent for frame, created on first use. Past max_stack
 * frames it is the parent's STACKS_CUT child, and the STACKS_CUT node itself below.
 */
int stacks__child(struct stacks *st, uint32_t parent, uint32_t frame, uint32_t *out);
/* A stack of nframes frames ended in node: a STACKS_CUT node notes how many it cut. */
int stacks__note_cut(struct stacks *st, uint32_t node, uint64_t nframes);
/* Sum of all weights, in ns. */
uint64_t stacks__total(const struct stacks *st);
/* A stack of frame names, outermost first, weighing weight ns. */
int stacks__add_named(struct stacks *st, const char *const *frames, unsigned int depth,
		      uint64_t weight);
/* The printed name of node: its frame's, or what a STACKS_CUT node stands for. */
const char *stacks__node_name(struct stacks *st, uint32_t node, char buf[STACKS_CUT_NAME_LEN]);
enum stacks_kind stacks__kind(const struct stacks *st, uint32_t frame);
/* Orders every node's children by name, as flamegraph.pl draws them. */
int stacks__sort(struct stacks *st);
/* Sets each node's total: its self plus its children's totals. */
void stacks__totals(struct stacks *st);
/*
 * Calls fn once per distinct stack with weight: frames are the frame ids
 * of the stack, outermost first. Stops at, and returns, the first non-zero
 * return of fn; -ENOMEM when out of memory.
 */
int stacks__foreach_stack(const struct stacks *st,
			  int (*fn)(void *ctx, const uint32_t *frames, unsigned int depth,
				    uint64_t weight),
			  void *ctx);
/*
 * Sorts, then calls fn once per distinct stack with weight, in order, with
 * its folded form "frame;frame;frame". Stops at, and returns, the first
 * non-zero return of fn; -ENOMEM when out of memory.
 */
int stacks__foreach_folded(struct stacks *st,
			   int (*fn)(void *ctx, const char *folded, uint64_t weight), void *ctx);

#endif /* PTG_STACKS_H */
