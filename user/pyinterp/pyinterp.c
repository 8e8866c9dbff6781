// SPDX-License-Identifier: MIT
/* Locating a CPython interpreter and the addresses its probes need. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/u64map.h"
#include "proc/elf_file.h"
#include "proc/probesite.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "pyinterp/pydebugoffsets.h"
#include "pyinterp/pyinterp.h"
#include "pyinterp/pyopcodes.h"

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static void format_version(uint32_t hex, char *buf, size_t len)
{
	static const char *levels[] = {[0xa] = "a", [0xb] = "b", [0xc] = "rc"};
	uint32_t level = (hex >> 4) & 0xf;

	snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
	if (level >= 0xa && level <= 0xc)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%u", levels[level], hex & 0xf);
}

/* The most common entry is the "unknown opcode" label; real handlers differ from it. */
static uint64_t table_default(const uint64_t table[256])
{
	uint64_t best = table[0];
	int best_n = 0;

	for (int i = 0; i < 256; i += 17) {
		int n = 0;

		for (int j = 0; j < 256; j++)
			n += table[j] == table[i];
		if (n > best_n) {
			best_n = n;
			best = table[i];
		}
	}
	return best;
}

/* A handler the table sends its opcode to; optional ones may be missing from a build. */
/*
 * The register that holds the frame at a handler's site: its own frame
 * (disp: frame->prev_instr), or, past the point where a return handler made
 * the caller current, the thread state's frame (cur: tstate->current_frame,
 * 3.13+; -1 before). -1 when none does.
 */
static int8_t site_reg(const struct probesite_code *code, uint64_t start, uint64_t site,
		       int32_t disp, int32_t cur)
{
	int r;

	if (!code)
		return -1;
	r = probesite_frame_reg(code, start, site, disp);
	if (r < 0 && cur >= 0 && (r = probesite_current_reg(code, start, site, cur)) >= 0)
		r |= PY_REG_TSTATE;
	return (int8_t)r;
}

static int handler_offsets(const struct elf_file *ef, const uint64_t table[256],
			   const struct probesite_code *code, const int32_t disp[2],
			   const uint8_t *ops, uint64_t *offs, int8_t *regs, int *n)
{
	uint64_t dflt = table_default(table);

	*n = 0;
	for (int i = 0; i < PY_MAX_HANDLERS && ops[i]; i++) {
		uint64_t site;

		if (table[ops[i]] == dflt) {
			/* the first one (RESUME, RETURN_VALUE, YIELD_VALUE) must be there */
			if (i == 0)
				return -ENOENT;
			continue;
		}
		site = code ? probesite_refine(code, table[ops[i]]) : table[ops[i]];
		if (elf_file__vaddr_to_offset(ef, site, &offs[*n]))
			return -ENOENT;
		/* the frame's register there: the probe reads it instead of the thread state */
		regs[*n] = site_reg(code, table[ops[i]], site, disp[0], disp[1]);
		/* two opcodes may share one handler: one probe is enough */
		bool dup = false;
		for (int k = 0; k < *n; k++)
			dup |= offs[k] == offs[*n];
		if (!dup)
			(*n)++;
	}
	return 0;
}

struct table_ctx {
	const struct elf_file *ef;
	uint64_t lo, hi;     /* the eval function */
	const uint8_t *code; /* its bytes, to see which table it indexes */
	bool slow;	     /* second pass: look into the handlers' code too */
	int best;	     /* the best score given */
	struct u64map refs;  /* what references() finds in code, once made */
	unsigned int asked;  /* candidates that asked code_references() */
};

/*
 * Does code (at link-time address addr) hold the table's address: as an
 * absolute 32-bit displacement (non-PIE: jmp *table(,%rax,8)) or RIP-relative
 * (lea table(%rip))? A byte scan, not a disassembly: a false match needs the
 * exact 32-bit address at some offset, and the score below asks for more.
 */
static bool references(const uint8_t *code, uint64_t addr, uint64_t len, uint64_t table_addr)
{
	for (uint64_t i = 0; code && i + 4 <= len; i++) {
		int32_t d;

		memcpy(&d, code + i, sizeof(d));
		if ((uint64_t)(uint32_t)d == table_addr || addr + i + 4 + (int64_t)d == table_addr)
			return true;
	}
	return false;
}

/*
 * Every address references() could find in code, as a set: each 4-byte
 * window read both ways. Made once, it answers for each candidate table at
 * once; a static interpreter (Debian's) offers hundreds of candidates, and a
 * byte scan of the eval function for each took half a second.
 */
static int reference_set(const uint8_t *code, uint64_t addr, uint64_t len, struct u64map *out)
{
	for (uint64_t i = 0; i + 4 <= len; i++) {
		uint64_t abs, rel;
		int32_t d;

		memcpy(&d, code + i, sizeof(d));
		abs = (uint32_t)d;
		rel = addr + i + 4 + (int64_t)d;
		/* 0 is no table's address, and no key of the set */
		if ((abs && u64map__put(out, abs, 1)) || (rel && u64map__put(out, rel, 1)))
			return -ENOMEM;
	}
	return 0;
}

/* references() of the eval function: the set is made at the 5th candidate to ask. */
static bool code_references(struct table_ctx *c, uint64_t table_addr)
{
	if (!c->refs.len && c->code && ++c->asked > 4 &&
	    reference_set(c->code, c->lo, c->hi - c->lo, &c->refs)) {
		/* no memory for it: each candidate is scanned for, slower, the same answer */
		u64map__free(&c->refs);
		c->refs = (struct u64map){0};
	}
	if (c->refs.len)
		return u64map__get(&c->refs, table_addr) != NULL;
	return references(c->code, c->lo, c->hi - c->lo, table_addr);
}

/* Do the handlers themselves dispatch through the table (the DISPATCH at each one's end)? */
static bool handlers_reference(const struct table_ctx *c, const uint64_t table[256], uint64_t dflt,
			       uint64_t table_addr)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint8_t *bytes;
	bool found;

	for (int i = 0; i < 256; i++) {
		if (table[i] == dflt)
			continue;
		lo = table[i] < lo ? table[i] : lo;
		hi = table[i] > hi ? table[i] : hi;
	}
	/* one function's handlers: a table of pointers all over the text is something else */
	if (hi <= lo || hi - lo > (1u << 20) || !(bytes = malloc(hi - lo)))
		return false;
	found = !elf_file__read(c->ef, lo, bytes, hi - lo) &&
		references(bytes, lo, hi - lo, table_addr);
	free(bytes);
	return found;
}

/*
 * Rates a candidate for the dispatch table. It has many distinct targets
 * (3.15's tracing table sends almost every opcode to one label, switch
 * tables have fewer cases) and one repeated (the unknown-opcode label),
 * and the eval function's code or its handlers
 * index it by its exact address. Handlers inside the eval function: the
 * classic layout; all of them in _PyEval_EvalFrameDefault.cold: Debian's
 * 3.14/3.15, where only the handlers' own DISPATCH may name the table.
 */
static int is_dispatch_table(const uint64_t table[256], uint64_t table_addr, void *arg)
{
	struct table_ctx *c = arg;
	uint64_t dflt = table_default(table);
	int inside = 0, distinct = 0;

	for (int i = 0; i < 256; i++) {
		inside += table[i] >= c->lo && table[i] < c->hi;
		distinct += table[i] != dflt;
	}
	int score = 0;

	/*
	 * Unused opcodes all go to one label: a GOT of -fno-plt calls (Debian's
	 * 3.13) is as long, as referenced and as code-pointing, but has no
	 * repeated entry.
	 */
	if (distinct < 64 || 256 - distinct < 8)
		return 0;
	if (code_references(c, table_addr))
		score = 2000 + distinct;
	else if (c->slow && handlers_reference(c, table, dflt, table_addr))
		score = 1000 + distinct;
	else if (inside >= 128)
		score = distinct;
	if (score > c->best)
		c->best = score;
	return score;
}

/*
 * The machine code the probe-site refiner checks for branches: the eval
 * function, or the span of the handlers when they sit outside it (.cold).
 */
static void handler_code(const struct elf_file *ef, const struct elf_sym_info *eval,
			 const uint8_t *evalbytes, const uint64_t table[256],
			 struct probesite_code *code)
{
	uint64_t lo = eval->addr, hi = eval->addr + eval->size, dflt = table_default(table);
	int inside = 0;
	uint8_t *bytes;

	for (int i = 0; i < 256; i++)
		inside += table[i] >= lo && table[i] < hi;
	if (inside < 128) {
		lo = UINT64_MAX;
		hi = 0;
		for (int i = 0; i < 256; i++) {
			if (table[i] == dflt)
				continue;
			lo = table[i] < lo ? table[i] : lo;
			hi = table[i] > hi ? table[i] : hi;
		}
		hi += 4096; /* the last handler's body */
	}
	memset(code, 0, sizeof(*code));
	if (hi <= lo || hi - lo > (64u << 20) || !(bytes = malloc(hi - lo)))
		return;
	if (elf_file__read(ef, lo, bytes, hi - lo)) {
		free(bytes);
		return;
	}
	code->bytes = bytes;
	code->addr = lo;
	code->size = hi - lo;
	code->entries = table;
	code->nentries = 256;
	/* handlers apart from the eval function: its own jumps may land in them too */
	if (lo != eval->addr && evalbytes) {
		code->more_bytes = evalbytes;
		code->more_addr = eval->addr;
		code->more_size = eval->size;
	}
}

/*
 * PyTypeObject's tp_dealloc: after the variable-size object head (refcount,
 * type, size) and tp_name, tp_basicsize, tp_itemsize, in every build we
 * read (64-bit, neither free-threaded nor Py_TRACE_REFS).
 */
#define TP_DEALLOC_AT 48

/*
 * The file offset of code_dealloc, a static function: the pointer in
 * PyCode_Type, which every build exports. 0 when it cannot be found; the
 * probes then check each code object they meet.
 */
static uint64_t code_free_off(const struct elf_file *ef)
{
	struct elf_sym_info type;
	uint64_t fn, off;

	if (elf_file__find_sym(ef, "PyCode_Type", false, &type) || type.size < TP_DEALLOC_AT + 8 ||
	    elf_file__code_ptr(ef, type.addr + TP_DEALLOC_AT, &fn) ||
	    elf_file__vaddr_to_offset(ef, fn, &off))
		return 0;
	return off;
}

static int find_handlers(const struct elf_file *ef, struct py_interp *py, char *err, size_t errlen)
{
	struct probesite_code code = {};
	struct elf_sym_info eval, tb;
	struct table_ctx tctx = {.ef = ef};
	uint64_t table[256];
	uint8_t *evalbytes;
	int32_t disp[2];
	int ret;

	if (elf_file__find_sym(ef, "_PyEval_EvalFrameDefault", false, &eval) || !eval.size)
		return fail(err, errlen, -ENOENT, "%s: no _PyEval_EvalFrameDefault symbol",
			    py->path);
	/* some 100 KiB in every CPython: a size from a damaged symbol table is not allocated */
	if (eval.size > (64u << 20))
		return fail(err, errlen, -ENOEXEC, "%s: _PyEval_EvalFrameDefault of %llu bytes",
			    py->path, (unsigned long long)eval.size);
	if (elf_file__find_sym(ef, "PyTraceBack_Here", false, &tb))
		return fail(err, errlen, -ENOENT, "%s: no PyTraceBack_Here symbol", py->path);
	tctx.lo = eval.addr;
	tctx.hi = eval.addr + eval.size;
	tctx.code = evalbytes = malloc(eval.size);
	if (evalbytes && elf_file__read(ef, eval.addr, evalbytes, eval.size))
		tctx.code = NULL;
	/*
	 * The computed-goto dispatch table: 256 pointers to opcode handlers.
	 * Debian's executables have no local symbols, so it is found by shape.
	 */
	ret = elf_file__find_ptr_table(ef, is_dispatch_table, &tctx, table);
	/* no table that the eval function indexes itself: its handlers live elsewhere (.cold) */
	if (tctx.best < 2000) {
		tctx.slow = true;
		ret = elf_file__find_ptr_table(ef, is_dispatch_table, &tctx, table);
	}
	u64map__free(&tctx.refs);
	if (ret) {
		free(evalbytes);
		return fail(err, errlen, -ENOENT,
			    "%s: no opcode dispatch table found (built without computed gotos?)",
			    py->path);
	}
	/* the handlers' code, to move probes onto instructions the kernel emulates */
	handler_code(ef, &eval, tctx.code, table, &code);
	if (code.bytes && code.addr != eval.addr) {
		py->handlers_lo = code.addr;
		py->handlers_hi = code.addr + code.size;
	}
	disp[0] = (int32_t)py->info->off.frame_prev_instr;
	disp[1] = py->info->off.tstate_cframe == PTG_OFF_NONE
		      ? (int32_t)py->info->off.cframe_current_frame
		      : -1;
	ret = handler_offsets(ef, table, code.bytes ? &code : NULL, disp, py->ops.resume,
			      py->resume_offs, py->resume_regs, &py->nresume) ||
	      handler_offsets(ef, table, code.bytes ? &code : NULL, disp, py->ops.ret,
			      py->return_offs, py->return_regs, &py->nreturn) ||
	      handler_offsets(ef, table, code.bytes ? &code : NULL, disp, py->ops.yield,
			      py->yield_offs, py->yield_regs, &py->nyield);
	free((void *)code.bytes);
	free(evalbytes);
	if (ret)
		return fail(err, errlen, -ENOENT, "%s: opcode handlers not found in dispatch table",
			    py->path);
	if (elf_file__vaddr_to_offset(ef, eval.addr, &py->eval_off) ||
	    elf_file__vaddr_to_offset(ef, tb.addr, &py->traceback_off))
		return fail(err, errlen, -ENOENT, "%s: bad symbol addresses", py->path);
	py->code_free_off = code_free_off(ef);
	return 0;
}

/* The version row for hex, or a one-line reason why there is none. */
static int lookup_version(struct py_interp *py, const char *path, char *err, size_t errlen)
{
	const struct py_version_info *newest = py_version_newest();

	py->info = py_version_lookup(py->version_hex);
	if (py->info)
		return 0;
	if (py->version_hex > newest->hex_max)
		return fail(
		    err, errlen, -EPROTONOSUPPORT,
		    "Python %s in %s is newer than any version ptrace-gpu knows (%s): its "
		    "structure layouts are unknown, refusing rather than recording wrong data",
		    py->version, path, py_supported_versions());
	return fail(err, errlen, -EPROTONOSUPPORT,
		    "unsupported Python version %s in %s; supported: %s", py->version, path,
		    py_supported_versions());
}

/* 3.13+: the row must agree with the interpreter's own _Py_DebugOffsets. */
static int check_debug_offsets(const struct elf_file *ef, struct py_interp *py, uint64_t runtime,
			       const char *path, char *err, size_t errlen)
{
	uint16_t size = py->info->debug.size;
	uint8_t raw[1024];
	char why[256];
	int ret;

	if (!size)
		return 0;
	if (size > sizeof(raw) || elf_file__read(ef, runtime, raw, size))
		return fail(err, errlen, -EIO, "%s: cannot read _Py_DebugOffsets", path);
	ret = py_debug_offsets__check(py->info, py->version_hex, raw, size, why, sizeof(why));
	if (ret)
		return fail(err, errlen, ret, "Python %s in %s: %s", py->version, path, why);
	return 0;
}

/*
 * The install prefix of the interpreter at path: <prefix>/bin/python3.X,
 * <prefix>/lib/libpython, or Debian's multiarch <prefix>/lib/<triplet>/libpython.
 */
static void install_prefix(const char *path, char *prefix, size_t len)
{
	char *slash;

	snprintf(prefix, len, "%s", path);
	for (int i = 0; i < 2; i++) {
		slash = strrchr(prefix, '/');
		if (slash)
			*slash = '\0';
		/* lib/x86_64-linux-gnu: the triplet's folder is one level more */
		slash = i ? NULL : strrchr(prefix, '/');
		if (slash && strstr(slash, "-linux-gnu"))
			*slash = '\0';
	}
	if (!prefix[0])
		snprintf(prefix, len, "/");
}

/*
 * path: the object as /proc/PID/maps shows it to us; root and inner: the
 * same file as the target sees it, inner resolved inside root (for reading
 * its standard library the way the target would).
 */
static int inspect_object(const char *path, const char *root, const char *inner,
			  struct py_interp *py, char *err, size_t errlen)
{
	struct elf_sym_info runtime, ver;
	struct elf_file *ef = NULL;
	uint64_t version = 0;
	char prefix[PATH_MAX], why[512];
	int ret;

	ret = elf_file__open(py->attach_path, &ef);
	if (ret)
		return fail(err, errlen, ret, "%s: cannot read ELF file: %s", path, strerror(-ret));
	if (elf_file__find_sym(ef, "_PyRuntime", false, &runtime)) {
		ret = fail(err, errlen, -ENOEXEC, "%s: not a CPython interpreter", path);
		goto cleanup;
	}
	/* Py_Version (3.11+) holds PY_VERSION_HEX; older versions lack it */
	if (elf_file__find_sym(ef, "Py_Version", false, &ver) ||
	    elf_file__read(ef, ver.addr, &version, sizeof(version))) {
		ret = fail(err, errlen, -EPROTONOSUPPORT,
			   "unsupported Python version (older than 3.11) in %s; supported: %s",
			   path, py_supported_versions());
		goto cleanup;
	}
	py->version_hex = (uint32_t)version;
	format_version(py->version_hex, py->version, sizeof(py->version));
	ret = lookup_version(py, path, err, errlen);
	if (!ret)
		ret = check_debug_offsets(ef, py, runtime.addr, path, err, errlen);
	if (ret)
		goto cleanup;
	py->runtime_addr = runtime.addr;
	install_prefix(inner, prefix, sizeof(prefix));
	ret = py_opcodes__read(root, prefix, py->version_hex, &py->ops, py->stdlib,
			       sizeof(py->stdlib), why, sizeof(why));
	if (ret) {
		fail(err, errlen, ret, "%s", why);
		goto cleanup;
	}
	ret = find_handlers(ef, py, err, errlen);
cleanup:
	elf_file__close(ef);
	return ret;
}

int py_interp__from_file(const char *path, struct py_interp *py, char *err, size_t errlen)
{
	memset(py, 0, sizeof(*py));
	snprintf(py->path, sizeof(py->path), "%s", path);
	snprintf(py->attach_path, sizeof(py->attach_path), "%s", path);
	return inspect_object(path, "/", path, py, err, errlen);
}

struct find_ctx {
	struct py_interp *py;
	char exe[PATH_MAX];
	char *err;
	size_t errlen;
	int last_err;
	char tried[8][PATH_MAX];
	int ntried;
};

/*
 * /proc/PID/maps names files as seen from our root: for a chrooted target
 * the host path (/srv/chroot/usr/bin/python3), for one in another mount
 * namespace its own. Returns path as the target sees it, with root set to
 * where that resolves: its root directory, or ours.
 */
static const char *target_view(pid_t pid, const char *path, char *root, size_t len)
{
	char link[64], target[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/root", pid);
	snprintf(root, len, "%s", link);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return path;
	target[n] = '\0';
	if (!strcmp(target, "/")) {
		snprintf(root, len, "/");
		return path;
	}
	if (!strncmp(path, target, (size_t)n) && path[n] == '/')
		return path + n;
	return path;
}

static bool looks_like_python(const struct find_ctx *ctx, const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strcmp(path, ctx->exe) || !strncmp(base, "libpython", 9) ||
	       !strncmp(base, "python", 6);
}

static bool already_tried(struct find_ctx *ctx, const char *path)
{
	for (int i = 0; i < ctx->ntried; i++) {
		if (!strcmp(ctx->tried[i], path))
			return true;
	}
	if (ctx->ntried < 8)
		snprintf(ctx->tried[ctx->ntried++], PATH_MAX, "%s", path);
	return false;
}

static int find_in_map(const struct proc_map *m, void *arg)
{
	struct find_ctx *ctx = arg;
	struct py_interp *py = ctx->py;
	const char *inner;
	char root[64];
	int ret;

	if (m->path[0] != '/' || !looks_like_python(ctx, m->path) || already_tried(ctx, m->path))
		return 0;
	snprintf(py->path, sizeof(py->path), "%s", m->path);
	/* opened as mapped, not by its path (procopen.h); kept open for the probes */
	ret = proc_map_path(py->pid, m, py->attach_path, sizeof(py->attach_path));
	if (ret == -ENOENT || ret == -ESRCH || ret == -ENOMEM) {
		ctx->last_err = fail(ctx->err, ctx->errlen, ret, "%s: cannot open: %s", m->path,
				     strerror(-ret));
		return ret;
	}
	if (ret)
		return 0; /* refused, and said why: keep looking */
	inner = target_view(py->pid, m->path, root, sizeof(root));
	ret = inspect_object(m->path, root, inner, py, ctx->err, ctx->errlen);
	if (ret == -ENOEXEC)
		return 0; /* a python-named object without the interpreter: keep looking */
	if (ret) {
		ctx->last_err = ret;
		return ret;
	}
	/* maps lists objects from their first mapping on, at file offset 0 */
	elf_load_bias(py->attach_path, m->start, m->offset, &py->bias);
	py->runtime_addr += py->bias;
	return 1;
}

/*
 * 3.13+ can run hot code as JIT-compiled traces (PYTHON_JIT=1 where the
 * build has the JIT): calls inside a trace never reach the eval loop's
 * handlers, so the trace misses them. Say so rather than under-count quietly.
 */
static void check_jit(struct py_interp *py)
{
	char path[64], *env;
	ssize_t n;
	int fd;

	if (py->version_hex < 0x030d0000)
		return;
	snprintf(path, sizeof(path), "/proc/%d/environ", py->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	env = malloc(65536 + 1);
	n = env ? read(fd, env, 65536) : -1;
	close(fd);
	for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strnlen(env + i, (size_t)(n - i)) + 1) {
		const char *v = env + i;

		env[n] = '\0';
		if (!strncmp(v, "PYTHON_JIT=", 11) && strcmp(v + 11, "0") && v[11])
			snprintf(
			    py->warning, sizeof(py->warning),
			    "process %d runs with PYTHON_JIT=%s: if its build has the JIT, calls "
			    "inside JIT-compiled code bypass the eval loop and are not recorded",
			    py->pid, v + 11);
	}
	free(env);
}

int py_interp__find(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	struct find_ctx ctx = {.py = py, .err = err, .errlen = errlen};
	char link[64];
	ssize_t n;
	int ret;

	memset(py, 0, sizeof(*py));
	py->pid = pid;
	if (!proc_exists(pid))
		return fail(err, errlen, -ESRCH, "no such process: %d", pid);
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, ctx.exe, sizeof(ctx.exe) - 1);
	if (n < 0)
		return fail(err, errlen, -errno, "cannot read /proc/%d/exe: %s", pid,
			    strerror(errno));
	ctx.exe[n] = '\0';
	ret = proc_maps__for_each(pid, find_in_map, &ctx);
	if (ret == 1) {
		check_jit(py);
		return 0;
	}
	if (ret < 0 && ctx.last_err)
		return ret;
	if (ret < 0)
		return fail(err, errlen, ret, "cannot read /proc/%d/maps: %s", pid, strerror(-ret));
	return fail(err, errlen, -ENOEXEC, "process %d (%s) is not a Python process", pid, ctx.exe);
}

int py_interp__from_target_file(pid_t pid, const char *path, const char *open_path,
				struct py_interp *py, char *err, size_t errlen)
{
	char link[64], target[PATH_MAX], root[64];
	ssize_t n;

	memset(py, 0, sizeof(*py));
	py->pid = pid;
	snprintf(py->path, sizeof(py->path), "%s", path);
	snprintf(py->attach_path, sizeof(py->attach_path), "%s", open_path);
	/* its standard library is read the way the target would read it, in its root */
	snprintf(link, sizeof(link), "/proc/%d/root", pid);
	n = readlink(link, target, sizeof(target) - 1);
	if (n > 0)
		target[n] = '\0';
	snprintf(root, sizeof(root), "%s", n == 1 && target[0] == '/' ? "/" : link);
	return inspect_object(path, root, path, py, err, errlen);
}
