/* SPDX-License-Identifier: MIT */
/*
 * user/sample/sample_resolve.c: the sampler's interned tables, its caches
 * of resolved stacks, and the resolving of a sampled stack into frames.
 */
#ifndef PTG_SAMPLE_RESOLVE_H
#define PTG_SAMPLE_RESOLVE_H

#include "sample/sample_int.h"

const char *tables_str(struct sample_tables *t, const char *s);
/* Frame of a function with no line or address; UINT32_MAX when out of memory. */
uint32_t tables_simple_frame(struct sample_tables *t, const char *name, const char *file,
			     uint32_t start_line, uint32_t kind, uint32_t line);
uint32_t tables_frame(struct sample_tables *t, const struct sample_frame *f);
void tables_free(struct sample_tables *t);

struct centry *ccache_get(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64);
/* The new entry; pointers to entries are invalid after the next add. */
struct centry *ccache_add(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64);
/* Drops entries last used before min_gen; drop() is called on each first. */
int ccache_prune(struct ccache *c, uint32_t min_gen, void (*drop)(void *ctx, struct centry *e),
		 void *ctx);
void ccache_free(struct ccache *c);

/* Resolve into the caches; 0 or a negative errno (out of memory). */
int resolve_py_stack(struct sampler *s, struct sproc *sp, uint64_t hash, struct centry **out);
int resolve_native_stack(struct sampler *s, struct sproc *sp, int32_t id, struct centry **out);
/* The row's frames: Python frames, merged into the native stack when there is one. */
int build_frames(struct sampler *s, const struct centry *py, const struct centry *nat,
		 uint32_t *out, uint32_t *depth, uint32_t max);
void sproc_free(struct sproc *sp);

#endif /* PTG_SAMPLE_RESOLVE_H */
