// SPDX-License-Identifier: MIT
/*
 * Stacks counted by bpf/sample.bpf.c -> frames with names: Python code
 * objects read once per process through /proc/PID/mem (with their line
 * tables, so each frame gets the line it was executing), native addresses
 * through the object files' symbols, and the merge of both.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/array.h"
#include "proc/procfs.h"
#include "pyinterp/pycode.h"
#include "sample/sample_resolve.h"

#define MAX_LINETABLE (1 << 20)
#define NATIVE_DEPTH  127
#define EVAL_FUNC     "_PyEval_EvalFrameDefault"

const char *tables_str(struct sample_tables *t, const char *s)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, s, strlen(s)), *idx;
	char *copy;

	for (;; h++) {
		idx = u64map__get(&t->str_idx, u64map_key(h));
		if (!idx)
			break;
		if (!strcmp(t->strs[*idx - 1], s))
			return t->strs[*idx - 1];
	}
	if (array_grow((void **)&t->strs, &t->strs_cap, t->nstrs + 1, sizeof(*t->strs)))
		return NULL;
	copy = strdup(s);
	if (!copy || u64map__put(&t->str_idx, u64map_key(h), t->nstrs + 1)) {
		free(copy);
		return NULL;
	}
	t->strs[t->nstrs++] = copy;
	return copy;
}

/* Functions and frames hold interned strings: equal pointers are equal strings. */
static uint32_t tables_func(struct sample_tables *t, const struct sample_func *f)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, f, sizeof(*f)), *idx;

	for (;; h++) {
		idx = u64map__get(&t->func_idx, u64map_key(h));
		if (!idx)
			break;
		if (!memcmp(&t->funcs[*idx - 1], f, sizeof(*f)))
			return (uint32_t)*idx - 1;
	}
	if (array_grow((void **)&t->funcs, &t->funcs_cap, t->nfuncs + 1, sizeof(*f)) ||
	    u64map__put(&t->func_idx, u64map_key(h), t->nfuncs + 1))
		return UINT32_MAX;
	t->funcs[t->nfuncs++] = *f;
	return (uint32_t)t->nfuncs - 1;
}

uint32_t tables_frame(struct sample_tables *t, const struct sample_frame *f)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, f, sizeof(*f)), *idx;

	for (;; h++) {
		idx = u64map__get(&t->frame_idx, u64map_key(h));
		if (!idx)
			break;
		if (!memcmp(&t->frames[*idx - 1], f, sizeof(*f)))
			return (uint32_t)*idx - 1;
	}
	if (array_grow((void **)&t->frames, &t->frames_cap, t->nframes + 1, sizeof(*f)) ||
	    u64map__put(&t->frame_idx, u64map_key(h), t->nframes + 1))
		return UINT32_MAX;
	t->frames[t->nframes++] = *f;
	return (uint32_t)t->nframes - 1;
}

uint32_t tables_simple_frame(struct sample_tables *t, const char *name, const char *file,
			     uint32_t start_line, uint32_t kind, uint32_t line)
{
	struct sample_func fn = {tables_str(t, name), tables_str(t, file), start_line, kind};
	struct sample_frame fr = {.line = line};

	if (!fn.name || !fn.file)
		return UINT32_MAX;
	fr.func = tables_func(t, &fn);
	return fr.func == UINT32_MAX ? UINT32_MAX : tables_frame(t, &fr);
}

void tables_free(struct sample_tables *t)
{
	for (size_t i = 0; i < t->nstrs; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->funcs);
	free(t->frames);
	u64map__free(&t->str_idx);
	u64map__free(&t->func_idx);
	u64map__free(&t->frame_idx);
	memset(t, 0, sizeof(*t));
}

static uint64_t centry_key(uint32_t tgid, uint32_t id32, uint64_t id64)
{
	return u64map_key(((uint64_t)tgid << 32 | id32) * 0x9e3779b97f4a7c15ull ^ id64);
}

struct centry *ccache_get(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64)
{
	uint64_t k = centry_key(tgid, id32, id64), *idx;
	struct centry *e;

	for (;; k = u64map_key(k + 1)) {
		idx = u64map__get(&c->idx, k);
		if (!idx)
			return NULL;
		e = &c->e[*idx - 1];
		if (e->tgid == tgid && e->id32 == id32 && e->id64 == id64)
			return e;
	}
}

struct centry *ccache_add(struct ccache *c, uint32_t tgid, uint32_t id32, uint64_t id64)
{
	uint64_t k = centry_key(tgid, id32, id64);
	struct centry *e;

	while (u64map__get(&c->idx, k))
		k = u64map_key(k + 1);
	if (array_grow((void **)&c->e, &c->cap, c->n + 1, sizeof(*c->e)) ||
	    u64map__put(&c->idx, k, c->n + 1))
		return NULL;
	e = &c->e[c->n++];
	*e = (struct centry){.tgid = tgid, .id32 = id32, .id64 = id64};
	return e;
}

int ccache_prune(struct ccache *c, uint32_t min_gen, void (*drop)(void *ctx, struct centry *e),
		 void *ctx)
{
	size_t kept = 0;
	int err = 0;

	for (size_t i = 0; i < c->n; i++) {
		if ((int32_t)(c->e[i].last_gen - min_gen) < 0) {
			if (drop)
				drop(ctx, &c->e[i]);
			free(c->e[i].frames);
			continue;
		}
		c->e[kept++] = c->e[i];
	}
	c->n = kept;
	/* rebuilt: open addressing has no delete */
	u64map__free(&c->idx);
	for (size_t i = 0; i < c->n && !err; i++) {
		uint64_t k = centry_key(c->e[i].tgid, c->e[i].id32, c->e[i].id64);

		while (u64map__get(&c->idx, k))
			k = u64map_key(k + 1);
		err = u64map__put(&c->idx, k, i + 1);
	}
	return err;
}

void ccache_free(struct ccache *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->e[i].frames);
	free(c->e);
	u64map__free(&c->idx);
	memset(c, 0, sizeof(*c));
}

/*
 * CPython's location table (Objects/locations.md, unchanged from 3.11 to
 * 3.15): entries of one header byte (bit 7 set, code in bits 3-6, length - 1
 * in code units in bits 0-2) and varint operands. Codes 0-9: same line;
 * 10-12: line delta code - 10; 13, 14: a signed varint line delta first; 15:
 * no location.
 */
static int signed_varint(const uint8_t *p, const uint8_t *end)
{
	unsigned int v, shift = 0, b;

	if (p >= end)
		return 0;
	b = *p++;
	v = b & 63;
	while ((b & 64) && p < end && shift < 24) {
		b = *p++;
		shift += 6;
		v |= (b & 63) << shift;
	}
	return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

int py_linetable_line(const uint8_t *table, size_t len, int firstlineno, int addr)
{
	const uint8_t *p = table, *end = table + len;
	int line = firstlineno, start = 0;

	if (addr < 0)
		return firstlineno;
	while (p < end) {
		int code = (*p >> 3) & 15, units = (*p & 7) + 1, delta = 0;

		if (code == 13 || code == 14)
			delta = signed_varint(p + 1, end);
		else if (code >= 10 && code <= 12)
			delta = code - 10;
		line += delta;
		if (addr >= start && addr < start + units * 2)
			return code == 15 ? -1 : line;
		start += units * 2;
		do
			p++;
		while (p < end && !(*p & 128));
	}
	return -1;
}

static void read_linetable(struct sproc *sp, struct scode *c)
{
	const struct py_version_info *lay = sp->py.info;
	uint64_t bytes = 0;
	int64_t size = 0;

	if (proc_mem_read(sp->memfd, c->code + lay->code_linetable, &bytes, 8) ||
	    proc_mem_read(sp->memfd, bytes + lay->bytes_size, &size, 8) || size <= 0 ||
	    size > MAX_LINETABLE)
		return;
	c->linetable = malloc((size_t)size);
	if (c->linetable &&
	    proc_mem_read(sp->memfd, bytes + lay->bytes_data, c->linetable, (size_t)size)) {
		free(c->linetable);
		c->linetable = NULL;
		return;
	}
	c->ltlen = (uint32_t)size;
}

/* Reads code into c; c->func stays UINT32_MAX when it cannot be read as that code object. */
static void read_code(struct sampler *s, struct sproc *sp, struct scode *c)
{
	struct py_code_info ci;
	struct sample_func fn = {.kind = SAMPLE_FUNC_PYTHON};

	c->func = UINT32_MAX;
	if (sp->memfd < 0 || py_read_code(sp->memfd, sp->py.info, c->code, &ci))
		return;
	/* another code object at the address of a freed one */
	if (ci.fingerprint != c->fingerprint)
		return;
	fn.name = tables_str(&s->t, ci.qualname);
	fn.file = tables_str(&s->t, ci.filename);
	fn.start_line = ci.firstlineno;
	if (!fn.name || !fn.file)
		return;
	c->func = tables_func(&s->t, &fn);
	c->firstlineno = (int32_t)ci.firstlineno;
	read_linetable(sp, c);
}

static struct scode *proc_code(struct sampler *s, struct sproc *sp, uint64_t code, uint32_t fp)
{
	uint64_t *idx = u64map__get(&sp->code_idx, code);
	struct scode *c;

	if (idx) {
		c = &sp->codes[*idx - 1];
		if (c->fingerprint == fp && (c->func != UINT32_MAX || !sp->alive))
			return c;
	} else {
		if (array_grow((void **)&sp->codes, &sp->codes_cap, sp->ncodes + 1, sizeof(*c)) ||
		    u64map__put(&sp->code_idx, code, sp->ncodes + 1))
			return NULL;
		c = &sp->codes[sp->ncodes++];
		memset(c, 0, sizeof(*c));
	}
	free(c->linetable);
	*c = (struct scode){.code = code, .fingerprint = fp};
	read_code(s, sp, c);
	return c;
}

/* The frame of one sampled Python frame; UINT32_MAX when out of memory. */
static uint32_t py_frame(struct sampler *s, struct sproc *sp, const struct ptg_sample_frame *f)
{
	struct scode *c = proc_code(s, sp, f->code, f->fingerprint);
	uint32_t instr = f->instr & ~PTG_SAMPLE_FRAME_ENTRY;
	struct sample_frame fr = {};
	int line;

	if (!c)
		return UINT32_MAX;
	if (c->func == UINT32_MAX) {
		s->unresolved_code++;
		return tables_simple_frame(&s->t, "[unknown code]", "", 0, SAMPLE_FUNC_SPECIAL, 0);
	}
	line = c->firstlineno;
	/*
	 * prev_instr (3.11, 3.12: the instruction last started, or the last
	 * cache entry of the CALL in progress, which shares its location) and
	 * instr_ptr (3.13+: the instruction executing, or the CALL) both give
	 * the line as PyFrame_GetLineNumber() does.
	 */
	if (instr != PTG_SAMPLE_INSTR_NONE && c->linetable)
		line = py_linetable_line(c->linetable, c->ltlen, c->firstlineno,
					 (int)instr - (int)sp->py.info->code_adaptive);
	fr.func = c->func;
	fr.line = line > 0 ? (uint32_t)line : (uint32_t)c->firstlineno;
	return tables_frame(&s->t, &fr);
}

int resolve_py_stack(struct sampler *s, struct sproc *sp, uint64_t hash, struct centry **out)
{
	struct ptg_sample_stack st;
	struct centry *e = ccache_get(&s->py, sp->pid, 0, hash);
	uint32_t *frames, n = 0;

	if (e) {
		*out = e;
		return 0;
	}
	if (bpf_map_lookup_elem(s->py_stacks_fd, &hash, &st) || st.depth > PTG_SAMPLE_MAX_DEPTH) {
		*out = NULL;
		return -ENOENT;
	}
	frames = calloc(st.depth + 1, sizeof(*frames));
	if (!frames)
		return -ENOMEM;
	if (st.truncated)
		frames[n++] =
		    tables_simple_frame(&s->t, "[truncated]", "", 0, SAMPLE_FUNC_SPECIAL, 0);
	for (uint32_t i = st.depth; i-- > 0;) {
		frames[n] = py_frame(s, sp, &st.frames[i]);
		if (frames[n] == UINT32_MAX)
			goto nomem;
		if (st.frames[i].instr & PTG_SAMPLE_FRAME_ENTRY)
			frames[n] |= FRAME_FLAG;
		n++;
	}
	e = ccache_add(&s->py, sp->pid, 0, hash);
	if (!e)
		goto nomem;
	e->frames = frames;
	e->depth = n;
	e->last_gen = s->gen;
	*out = e;
	return 0;
nomem:
	free(frames);
	return -ENOMEM;
}

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* Is r in the interpreter's opcode handlers, where they sit apart from the eval function? */
static bool in_cold_handlers(const struct sproc *sp, const struct sym_result *r)
{
	return sp->py.handlers_hi && r->vaddr >= sp->py.handlers_lo &&
	       r->vaddr < sp->py.handlers_hi && !strcmp(r->obj, sp->py.path);
}

/* ip: a return address except for the leaf; the call is the byte before it. */
static uint32_t native_frame(struct sampler *s, struct sproc *sp, uint64_t ip, bool leaf,
			     bool *eval)
{
	struct sample_frame fr = {.addr = ip};
	struct sample_func fn = {.kind = SAMPLE_FUNC_NATIVE};
	struct sym_result r;
	char buf[PATH_MAX + 2];

	*eval = false;
	if (!sp->syms || proc_syms__resolve(sp->syms, leaf ? ip : ip - 1, &r))
		return tables_simple_frame(&s->t, "[unknown]", "", 0, SAMPLE_FUNC_NATIVE, 0);
	fr.addr = r.vaddr + (leaf ? 0 : 1);
	fr.obj_start = r.obj_start;
	fr.obj_limit = r.obj_limit;
	fr.obj_offset = r.obj_offset;
	if (r.name && !in_cold_handlers(sp, &r)) {
		fn.name = tables_str(&s->t, r.name);
		*eval = !strcmp(r.name, EVAL_FUNC);
	} else if (in_cold_handlers(sp, &r)) {
		/* the eval loop's handlers, moved out of the named function (Debian's 3.14+) */
		fn.name = tables_str(&s->t, EVAL_FUNC ".cold");
		*eval = true;
	} else {
		snprintf(buf, sizeof(buf), "[%s]", basename_of(r.obj));
		fn.name = tables_str(&s->t, buf);
	}
	fn.file = tables_str(&s->t, r.obj);
	if (!fn.name || !fn.file)
		return UINT32_MAX;
	fr.func = tables_func(&s->t, &fn);
	return fr.func == UINT32_MAX ? UINT32_MAX : tables_frame(&s->t, &fr);
}

int resolve_native_stack(struct sampler *s, struct sproc *sp, int32_t id, struct centry **out)
{
	struct centry *e = ccache_get(&s->native, sp->pid, (uint32_t)id, 0);
	uint64_t ips[NATIVE_DEPTH] = {};
	uint32_t *frames, n = 0, depth = 0;
	bool eval;

	if (e) {
		*out = e;
		return 0;
	}
	*out = NULL;
	if (bpf_map_lookup_elem(s->native_fd, &id, ips))
		return -ENOENT;
	if (!sp->syms && sp->alive)
		proc_syms__load(s->syms, sp->pid, &sp->syms);
	while (depth < NATIVE_DEPTH && ips[depth])
		depth++;
	frames = calloc(depth ? depth : 1, sizeof(*frames));
	if (!frames)
		return -ENOMEM;
	/* the kernel gives the leaf first */
	for (uint32_t i = depth; i-- > 0;) {
		frames[n] = native_frame(s, sp, ips[i], i == 0, &eval);
		if (frames[n] == UINT32_MAX) {
			free(frames);
			return -ENOMEM;
		}
		if (eval)
			frames[n] |= FRAME_FLAG;
		n++;
	}
	e = ccache_add(&s->native, sp->pid, (uint32_t)id, 0);
	if (!e) {
		free(frames);
		return -ENOMEM;
	}
	e->frames = frames;
	e->depth = n;
	e->last_gen = s->gen;
	*out = e;
	return 0;
}

static int put(uint32_t *out, uint32_t *n, uint32_t max, uint32_t frame)
{
	if (*n >= max)
		return -E2BIG;
	out[(*n)++] = frame & ~FRAME_FLAG;
	return 0;
}

/* Python frames in segments, one per eval-loop invocation: a segment starts at an entry frame. */
static uint32_t count_segments(const struct centry *py)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < py->depth; i++)
		n += (py->frames[i] & FRAME_FLAG) || i == 0;
	return n;
}

/*
 * Native frames with each _PyEval_EvalFrameDefault replaced by the Python
 * frames it ran. When the counts disagree (an unwind cut short without
 * frame pointers), the native frames outside the outermost eval loop, then
 * the whole Python stack, then the native frames above the innermost eval
 * loop (all of them as leaves when there is no eval loop).
 */
static int merge(const struct centry *py, const struct centry *nat, uint32_t *out, uint32_t *n,
		 uint32_t max)
{
	uint32_t nseg = count_segments(py), neval = 0, first = 0, post = 0, p = 0;
	int err = 0;

	for (uint32_t i = 0; i < nat->depth; i++) {
		if (!(nat->frames[i] & FRAME_FLAG))
			continue;
		if (!neval++)
			first = i;
		post = i + 1;
	}
	if (neval && neval == nseg) {
		for (uint32_t i = 0; i < nat->depth && !err; i++) {
			if (!(nat->frames[i] & FRAME_FLAG)) {
				err = put(out, n, max, nat->frames[i]);
				continue;
			}
			/* this invocation's segment: up to the next entry frame */
			do
				err = put(out, n, max, py->frames[p++]);
			while (!err && p < py->depth && !(py->frames[p] & FRAME_FLAG));
		}
		return err;
	}
	for (uint32_t i = 0; i < first && !err; i++)
		err = put(out, n, max, nat->frames[i]);
	for (uint32_t i = 0; i < py->depth && !err; i++)
		err = put(out, n, max, py->frames[i]);
	for (uint32_t i = post; i < nat->depth && !err; i++)
		err = put(out, n, max, nat->frames[i]);
	return err;
}

int build_frames(struct sampler *s, const struct centry *py, const struct centry *nat,
		 uint32_t *out, uint32_t *depth, uint32_t max)
{
	uint32_t n = 0, f;
	int err = 0;

	if (py && nat)
		err = merge(py, nat, out, &n, max);
	else if (py || nat)
		for (uint32_t i = 0; i < (py ? py : nat)->depth && !err; i++)
			err = put(out, &n, max, (py ? py : nat)->frames[i]);
	if (!err && !n) {
		f = tables_simple_frame(&s->t, "[no Python stack]", "", 0, SAMPLE_FUNC_SPECIAL, 0);
		err = f == UINT32_MAX ? -ENOMEM : put(out, &n, max, f);
	}
	*depth = n;
	return err == -E2BIG ? 0 : err;
}

void sproc_free(struct sproc *sp)
{
	if (!sp)
		return;
	for (size_t i = 0; i < sp->ncodes; i++)
		free(sp->codes[i].linetable);
	free(sp->codes);
	u64map__free(&sp->code_idx);
	proc_syms__free(sp->syms);
	if (sp->memfd >= 0)
		close(sp->memfd);
	free(sp);
}
