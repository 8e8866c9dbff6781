// SPDX-License-Identifier: MIT
/* Locating a CPython interpreter and the addresses its probes need. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_file.h"
#include "probesite.h"
#include "procfs.h"
#include "pyinterp.h"

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
	static const char *levels[] = { [0xa] = "a", [0xb] = "b", [0xc] = "rc" };
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

static int handler_offsets(const struct elf_file *ef, const uint64_t table[256],
			   const struct probesite_code *code, const uint8_t *ops, uint64_t *offs,
			   int *n)
{
	uint64_t dflt = table_default(table);

	*n = 0;
	for (int i = 0; i < PY_MAX_HANDLERS && ops[i]; i++) {
		uint64_t site;

		if (table[ops[i]] == dflt)
			return -ENOENT;
		site = code ? probesite_refine(code, table[ops[i]]) : table[ops[i]];
		if (elf_file__vaddr_to_offset(ef, site, &offs[(*n)++]))
			return -ENOENT;
	}
	return 0;
}

static int find_handlers(const struct elf_file *ef, struct py_interp *py, char *err, size_t errlen)
{
	const struct py_version_info *vi = py->info;
	struct probesite_code code = {};
	struct elf_sym_info eval, tb;
	uint64_t table[256];
	uint8_t *bytes;
	int ret;

	if (elf_file__find_sym(ef, "_PyEval_EvalFrameDefault", false, &eval) || !eval.size)
		return fail(err, errlen, -ENOENT, "%s: no _PyEval_EvalFrameDefault symbol", py->path);
	if (elf_file__find_sym(ef, "PyTraceBack_Here", false, &tb))
		return fail(err, errlen, -ENOENT, "%s: no PyTraceBack_Here symbol", py->path);
	/*
	 * The computed-goto dispatch table: 256 pointers into the eval loop.
	 * Debian's executable has no local symbols, so it is found by shape.
	 */
	if (elf_file__find_ptr_table(ef, eval.addr, eval.addr + eval.size, table))
		return fail(err, errlen, -ENOENT,
			    "%s: no opcode dispatch table found (built without computed gotos?)",
			    py->path);
	/* the eval loop's code, to move probes onto instructions the kernel emulates */
	code.bytes = bytes = malloc(eval.size);
	code.addr = eval.addr;
	code.size = eval.size;
	code.entries = table;
	code.nentries = 256;
	if (bytes && elf_file__read(ef, eval.addr, bytes, eval.size))
		code.bytes = NULL;
	ret = handler_offsets(ef, table, code.bytes ? &code : NULL, vi->op_resume, py->resume_offs,
			      &py->nresume) ||
	      handler_offsets(ef, table, code.bytes ? &code : NULL, vi->op_return, py->return_offs,
			      &py->nreturn) ||
	      handler_offsets(ef, table, code.bytes ? &code : NULL, vi->op_yield, py->yield_offs,
			      &py->nyield);
	free(bytes);
	if (ret)
		return fail(err, errlen, -ENOENT, "%s: opcode handlers not found in dispatch table",
			    py->path);
	if (elf_file__vaddr_to_offset(ef, eval.addr, &py->eval_off) ||
	    elf_file__vaddr_to_offset(ef, tb.addr, &py->traceback_off))
		return fail(err, errlen, -ENOENT, "%s: bad symbol addresses", py->path);
	return 0;
}

static int inspect_object(const char *path, struct py_interp *py, char *err, size_t errlen)
{
	struct elf_sym_info runtime, ver;
	struct elf_file *ef = NULL;
	uint64_t version = 0;
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
	py->info = py_version_lookup(py->version_hex);
	if (!py->info) {
		ret = fail(err, errlen, -EPROTONOSUPPORT,
			   "unsupported Python version %s in %s; supported: %s", py->version, path,
			   py_supported_versions());
		goto cleanup;
	}
	py->runtime_addr = runtime.addr;
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
	return inspect_object(path, py, err, errlen);
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
	int ret;

	if (m->path[0] != '/' || !looks_like_python(ctx, m->path) || already_tried(ctx, m->path))
		return 0;
	snprintf(py->path, sizeof(py->path), "%s", m->path);
	proc_target_path(py->pid, m->path, m->inode, py->attach_path, sizeof(py->attach_path));
	ret = inspect_object(m->path, py, ctx->err, ctx->errlen);
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

int py_interp__find(pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	struct find_ctx ctx = { .py = py, .err = err, .errlen = errlen };
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
	if (ret == 1)
		return 0;
	if (ret < 0 && ctx.last_err)
		return ret;
	if (ret < 0)
		return fail(err, errlen, ret, "cannot read /proc/%d/maps: %s", pid,
			    strerror(-ret));
	return fail(err, errlen, -ENOEXEC, "process %d (%s) is not a Python process", pid,
		    ctx.exe);
}
