// SPDX-License-Identifier: MIT
/*
 * Opcode numbers from the interpreter's standard library. These files are
 * Python source that is never run: a small tokenizer reads the literal
 * tables in them, and a table that does not close is refused, not guessed.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pyinterp/pyopcodes.h"

#define PY_313	   0x030d0000
#define MAX_SOURCE (1 << 20) /* the files are ~10 KiB: a bound on memory, not a size guess */
#define MAX_NAME   64
#define MAX_OPS	   1024 /* 3.15 numbers ~ 470 names, pseudo-instructions included */

struct py_opmap {
	int n, nspec;
	struct {
		char name[MAX_NAME];
		int num;
	} ops[MAX_OPS];
	/* specialized instructions in source order, with their family ("" in a flat list) */
	struct {
		char name[MAX_NAME];
		char family[MAX_NAME];
	} spec[MAX_OPS];
};

int py_opmap__get(const struct py_opmap *m, const char *name)
{
	for (int i = 0; i < m->n; i++) {
		if (!strcmp(m->ops[i].name, name))
			return m->ops[i].num;
	}
	return -ENOENT;
}

void py_opmap__free(struct py_opmap *m)
{
	free(m);
}

/* The first number given a name wins, as in the dicts the interpreter builds. */
static int opmap_put(struct py_opmap *m, const char *name, int num)
{
	if (py_opmap__get(m, name) >= 0)
		return 0;
	if (m->n >= MAX_OPS)
		return -E2BIG;
	snprintf(m->ops[m->n].name, MAX_NAME, "%s", name);
	m->ops[m->n++].num = num;
	return 0;
}

static int spec_put(struct py_opmap *m, const char *name, const char *family)
{
	if (m->nspec >= MAX_OPS)
		return -E2BIG;
	snprintf(m->spec[m->nspec].name, MAX_NAME, "%s", name);
	snprintf(m->spec[m->nspec++].family, MAX_NAME, "%s", family);
	return 0;
}

/*
 * Tokens of the literal tables these files hold, in each version's form:
 * { 'NAME': 1 }, frozendict(NAME=1), { "FAMILY": [ "SPEC", ] },
 * frozendict(FAMILY=( "SPEC", )), [ "SPEC", ... ]. Strings and comments are
 * skipped whole, so a bracket inside them does not move the depth.
 */
struct tok {
	const char *p, *end;
	int depth;	     /* brackets open, the table's own included */
	bool closed;	     /* the table's own closing bracket was passed */
	bool quoted;	     /* the token was a string literal */
	int num;	     /* its value when a decimal number, else -1 */
	char word[MAX_NAME]; /* a name or a string's text (truncated), else "" */
};

static void read_word(struct tok *t, char quote)
{
	size_t n = 0;

	for (; t->p < t->end; t->p++) {
		char c = *t->p;

		if (quote ? c == quote || c == '\n' : !isalnum((unsigned char)c) && c != '_')
			break;
		if (quote && c == '\\' && t->p + 1 < t->end)
			c = *++t->p;
		if (n < MAX_NAME - 1)
			t->word[n++] = c;
	}
	if (quote && t->p < t->end && *t->p == quote)
		t->p++;
	t->word[n] = '\0';
	t->quoted = quote;
	t->num = -1;
}

static void read_number(struct tok *t)
{
	int v = 0;

	for (; t->p < t->end && isdigit((unsigned char)*t->p); t->p++) {
		if (v < 1000000)
			v = v * 10 + (*t->p - '0');
	}
	t->num = v;
	t->word[0] = '\0';
	t->quoted = false;
}

/* The next name, string or number; false at the end or past the table's closing bracket. */
static bool next_tok(struct tok *t)
{
	while (t->p < t->end && !t->closed) {
		char c = *t->p++;

		switch (c) {
		case '#':
			while (t->p < t->end && *t->p != '\n')
				t->p++;
			break;
		case '(':
		case '[':
		case '{':
			t->depth++;
			break;
		case ')':
		case ']':
		case '}':
			t->closed = --t->depth <= 0;
			break;
		case '\'':
		case '"':
			read_word(t, c);
			return true;
		default:
			if (isdigit((unsigned char)c)) {
				t->p--;
				read_number(t);
				return true;
			}
			if (isalpha((unsigned char)c) || c == '_') {
				t->p--;
				read_word(t, 0);
				return true;
			}
		}
	}
	return false;
}

/* The character after the token, blanks skipped: ':' or '=' make it a key. */
static char after(const struct tok *t)
{
	const char *q = t->p;

	while (q < t->end && (*q == ' ' || *q == '\t'))
		q++;
	return q < t->end ? *q : '\0';
}

static bool is_key(const struct tok *t)
{
	char c = after(t);

	return t->word[0] && t->depth == 1 && (c == ':' || c == '=');
}

/*
 * The table assigned to key at the top level ("key = {", "key = [",
 * "key = frozendict("): t starts at its opening bracket and ends at its
 * closing one. -ENOENT: no such assignment; -EINVAL: not a bracketed table,
 * or one that never closes (a truncated file).
 */
static int find_table(const char *text, const char *key, struct tok *t)
{
	size_t klen = strlen(key);
	const char *p;
	struct tok probe;

	for (p = strstr(text, key); p; p = strstr(p + 1, key)) {
		if ((p == text || p[-1] == '\n') && !strncmp(p + klen, " = ", 3))
			break;
	}
	if (!p)
		return -ENOENT;
	for (p += klen + 3; isalnum((unsigned char)*p) || *p == '_'; p++)
		;
	if (*p != '(' && *p != '[' && *p != '{')
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->p = p;
	t->end = p + strlen(p);
	probe = *t;
	while (next_tok(&probe))
		;
	if (!probe.closed)
		return -EINVAL;
	t->end = probe.p;
	return 0;
}

/* The NAME: number (or NAME=number) pairs of the table called key. */
static int parse_numbers(struct py_opmap *m, const char *text, const char *key)
{
	char name[MAX_NAME];
	struct tok t;
	int ret;

	ret = find_table(text, key, &t);
	while (!ret && next_tok(&t)) {
		if (!is_key(&t))
			continue;
		snprintf(name, sizeof(name), "%s", t.word);
		if (next_tok(&t) && t.num >= 0)
			ret = opmap_put(m, name, t.num);
	}
	return ret;
}

/* _specializations: each family's specialized forms, in source order. */
static int parse_families(struct py_opmap *m, const char *text)
{
	char family[MAX_NAME] = "";
	struct tok t;
	int ret;

	ret = find_table(text, "_specializations", &t);
	while (!ret && next_tok(&t)) {
		if (is_key(&t))
			snprintf(family, sizeof(family), "%s", t.word);
		else if (t.depth == 2 && t.quoted && t.word[0])
			ret = spec_put(m, t.word, family);
	}
	return ret;
}

/*
 * A flat _specialized_instructions = [ "SPEC", ... ], which some 3.11
 * releases have instead of _specializations. Only a list of strings will
 * do: the later form, a comprehension over _specializations, is code.
 */
static int parse_flat_list(struct py_opmap *m, const char *text)
{
	struct tok t;
	int ret;

	ret = find_table(text, "_specialized_instructions", &t);
	while (!ret && next_tok(&t)) {
		if (!t.quoted || t.depth != 1)
			return -EINVAL;
		ret = spec_put(m, t.word, "");
	}
	return ret;
}

static const char *next_line(const char *line)
{
	const char *nl = strchr(line, '\n');

	return nl ? nl + 1 : line + strlen(line);
}

/* Before 3.13: lines def_op('NAME', N), name_op(...), jrel_op(...), pseudo_op(...). */
static int parse_def_ops(struct py_opmap *m, const char *text)
{
	char name[MAX_NAME];
	struct tok t;
	int ret = 0;

	for (const char *line = text; *line && !ret; line = next_line(line)) {
		const char *q = line;

		while (isalnum((unsigned char)*q) || *q == '_')
			q++;
		if (q - line < 3 || strncmp(q - 3, "_op(", 4))
			continue;
		memset(&t, 0, sizeof(t));
		t.p = q;
		t.end = q + strcspn(q, "\n");
		if (!next_tok(&t) || !t.quoted || !t.word[0] || after(&t) != ',')
			continue;
		snprintf(name, sizeof(name), "%s", t.word);
		if (next_tok(&t) && t.num >= 0)
			ret = opmap_put(m, name, t.num);
	}
	return ret;
}

/*
 * Before 3.13 the build numbers the specialized instructions
 * (generate_opcode_h.py, in Tools/scripts on 3.11, Tools/build on 3.12):
 * each in turn takes the lowest number from 1 up that no opcode uses yet.
 * Same rule, same order.
 */
static int number_specialized(struct py_opmap *m, const char **bad)
{
	bool used[256] = {false};
	int next = 1, ret = 0;

	for (int i = 0; i < m->n; i++) {
		if (m->ops[i].num < 256)
			used[m->ops[i].num] = true;
	}
	for (int i = 0; i < m->nspec && !ret; i++) {
		while (next < 256 && used[next])
			next++;
		if (next >= 256) {
			*bad = m->spec[i].name;
			return -ERANGE;
		}
		used[next] = true;
		ret = opmap_put(m, m->spec[i].name, next);
	}
	return ret;
}

static int table_error(int ret, const char *key, char *err, size_t errlen)
{
	if (ret == -ENOENT)
		snprintf(err, errlen, "no %s table", key);
	else if (ret == -E2BIG)
		snprintf(err, errlen, "%s: more than %d names", key, MAX_OPS);
	else
		snprintf(err, errlen, "%s: not a complete literal table", key);
	return ret;
}

/* 3.13+: every number is written out, the specialized ones in their own table. */
static int parse_metadata(struct py_opmap *m, const char *text, char *err, size_t errlen)
{
	int ret;

	ret = parse_numbers(m, text, "opmap");
	if (ret)
		return table_error(ret, "opmap", err, errlen);
	ret = parse_numbers(m, text, "_specialized_opmap");
	if (ret && ret != -ENOENT)
		return table_error(ret, "_specialized_opmap", err, errlen);
	ret = parse_families(m, text);
	if (ret && ret != -ENOENT)
		return table_error(ret, "_specializations", err, errlen);
	return 0;
}

/* 3.11, 3.12: the explicit numbers, then the specialized ones by the build's rule. */
static int parse_opcode_py(struct py_opmap *m, const char *text, char *err, size_t errlen)
{
	const char *key = "_specializations", *bad = "";
	int ret;

	ret = parse_def_ops(m, text);
	if (ret)
		return table_error(ret, "def_op()", err, errlen);
	if (!m->n) {
		snprintf(err, errlen, "no def_op('NAME', N) lines");
		return -ENOENT;
	}
	/* before 3.11 (no RESUME) the families are missing too: name what matters */
	if (py_opmap__get(m, "RESUME") < 0) {
		snprintf(err, errlen, "no RESUME in opcode map");
		return -ENOENT;
	}
	ret = parse_families(m, text);
	if (ret == -ENOENT) {
		key = "_specialized_instructions";
		ret = parse_flat_list(m, text);
	}
	if (ret)
		return table_error(ret, ret == -ENOENT ? "_specializations" : key, err, errlen);
	ret = number_specialized(m, &bad);
	if (ret == -ERANGE)
		snprintf(err, errlen, "no opcode number left for %s", bad);
	else if (ret)
		table_error(ret, "opcode", err, errlen);
	return ret;
}

int py_opmap__parse(const char *text, uint32_t version_hex, struct py_opmap **map, char *err,
		    size_t errlen)
{
	struct py_opmap *m = calloc(1, sizeof(*m));
	int ret;

	*map = NULL;
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (version_hex >= PY_313)
		ret = parse_metadata(m, text, err, errlen);
	else
		ret = parse_opcode_py(m, text, err, errlen);
	if (ret) {
		free(m);
		return ret;
	}
	*map = m;
	return 0;
}

/*
 * Appends num (1-255: 0 is CACHE, never a handler) once. A full list is an
 * error: a form left out is a handler never probed, and calls missed.
 */
static int add(uint8_t *list, int num)
{
	int i;

	if (num <= 0 || num > 255)
		return 0;
	for (i = 0; i < PY_MAX_HANDLERS && list[i]; i++) {
		if (list[i] == num)
			return 0;
	}
	if (i >= PY_MAX_HANDLERS)
		return -E2BIG;
	list[i] = (uint8_t)num;
	return 0;
}

/*
 * RESUME, its specialized forms in source order, INSTRUMENTED_RESUME. A flat
 * list names no families: there RESUME's are the RESUME_* names in it.
 */
static int resume_family(const struct py_opmap *m, uint8_t *list)
{
	int ret = add(list, py_opmap__get(m, "RESUME"));

	for (int i = 0; i < m->nspec && !ret; i++) {
		const char *fam = m->spec[i].family, *name = m->spec[i].name;

		if (!strcmp(fam, "RESUME") || (!fam[0] && !strncmp(name, "RESUME_", 7)))
			ret = add(list, py_opmap__get(m, name));
	}
	return ret ?: add(list, py_opmap__get(m, "INSTRUMENTED_RESUME"));
}

static int pick_lists(const struct py_opmap *m, struct py_opcodes *ops, char *err, size_t errlen)
{
	static const char *const rets[] = {"RETURN_VALUE", "RETURN_CONST",
					   "INSTRUMENTED_RETURN_VALUE",
					   "INSTRUMENTED_RETURN_CONST"};
	static const char *const yields[] = {"YIELD_VALUE", "INSTRUMENTED_YIELD_VALUE"};
	static const char *const firsts[] = {"RESUME", "RETURN_VALUE", "YIELD_VALUE"};
	int ret;

	/* the first of each list must be there: the others may not exist in a version */
	for (size_t i = 0; i < sizeof(firsts) / sizeof(*firsts); i++) {
		int num = py_opmap__get(m, firsts[i]);

		if (num < 0) {
			snprintf(err, errlen, "no %s in opcode map", firsts[i]);
			return -ENOENT;
		}
		if (num == 0 || num > 255) {
			snprintf(err, errlen, "%s is %d in opcode map, not 1-255", firsts[i], num);
			return -ERANGE;
		}
	}
	ret = resume_family(m, ops->resume);
	for (size_t i = 0; i < sizeof(rets) / sizeof(*rets) && !ret; i++)
		ret = add(ops->ret, py_opmap__get(m, rets[i]));
	for (size_t i = 0; i < sizeof(yields) / sizeof(*yields) && !ret; i++)
		ret = add(ops->yield, py_opmap__get(m, yields[i]));
	if (ret)
		snprintf(err, errlen, "more than %d forms of one instruction", PY_MAX_HANDLERS);
	return ret;
}

int py_opcodes__parse(const char *text, uint32_t version_hex, struct py_opcodes *ops, char *err,
		      size_t errlen)
{
	struct py_opmap *m;
	int ret;

	memset(ops, 0, sizeof(*ops));
	ret = py_opmap__parse(text, version_hex, &m, err, errlen);
	if (ret)
		return ret;
	ret = pick_lists(m, ops, err, errlen);
	if (ret)
		memset(ops, 0, sizeof(*ops));
	py_opmap__free(m);
	return ret;
}

/*
 * Opens path inside rootfd as a chroot would: a container's absolute
 * symlinks and its ".." resolve inside the container, never on the host.
 * O_NONBLOCK: a FIFO planted at the path must not hang the tracer.
 */
static int open_in_root(int rootfd, const char *path)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	while (*path == '/')
		path++;
	fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* The whole of a regular file, at most MAX_SOURCE bytes, '\0'-terminated. */
static int read_bounded(int fd, char **out, const char **why)
{
	struct stat st;
	size_t len = 0;
	ssize_t n = 0;
	char *buf;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return -EINVAL;
	}
	buf = malloc(MAX_SOURCE + 1);
	if (!buf)
		return -ENOMEM;
	/* reads one byte past the bound: the size that st_size claims is not trusted */
	while (len <= MAX_SOURCE && (n = read(fd, buf + len, MAX_SOURCE + 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0 || len > MAX_SOURCE) {
		free(buf);
		*why = n < 0 ? NULL : "larger than 1 MiB";
		return n < 0 ? -errno : -EFBIG;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* <prefix>/<libdir>/pythonX.Y/<file> as the target sees it; -ENAMETOOLONG when cut. */
static int stdlib_path(char *buf, size_t len, const char *prefix, const char *libdir,
		       uint32_t version_hex, const char *file)
{
	int n = snprintf(buf, len, "%s/%s/python%u.%u/%s", strcmp(prefix, "/") ? prefix : "",
			 libdir, version_hex >> 24, (version_hex >> 16) & 0xff, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The stdlib file under lib/, or lib64/ where lib/ lacks it; path: the one opened or failed. */
static int open_stdlib(int rootfd, const char *prefix, uint32_t version_hex, char *path, size_t len)
{
	const char *file = version_hex >= PY_313 ? "_opcode_metadata.py" : "opcode.py";
	char lib64[4096];
	int fd, ret;

	ret = stdlib_path(path, len, prefix, "lib", version_hex, file);
	if (ret)
		return ret;
	fd = open_in_root(rootfd, path);
	if (fd != -ENOENT && fd != -ENOTDIR)
		return fd;
	/* a failure under lib64/ too reports lib/'s path: the one most installs have */
	if (stdlib_path(lib64, sizeof(lib64), prefix, "lib64", version_hex, file))
		return fd;
	ret = open_in_root(rootfd, lib64);
	if (ret >= 0 || (ret != -ENOENT && ret != -ENOTDIR)) {
		snprintf(path, len, "%s", lib64);
		return ret;
	}
	return fd;
}

int py_opcodes__read(const char *root, const char *prefix, uint32_t version_hex,
		     struct py_opcodes *ops, char *used, size_t usedlen, char *err, size_t errlen)
{
	unsigned int major = version_hex >> 24, minor = (version_hex >> 16) & 0xff;
	char path[4096] = "", why[256];
	const char *reason = NULL;
	char *text = NULL;
	int rootfd, fd, ret;

	memset(ops, 0, sizeof(*ops));
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		ret = -errno;
		snprintf(err, errlen, "python %u.%u: cannot read opcode numbers: root %s: %s",
			 major, minor, root, strerror(-ret));
		return ret;
	}
	fd = open_stdlib(rootfd, prefix, version_hex, path, sizeof(path));
	close(rootfd);
	ret = fd < 0 ? fd : read_bounded(fd, &text, &reason);
	if (fd >= 0)
		close(fd);
	if (ret) {
		snprintf(err, errlen, "python %u.%u: cannot read opcode numbers: %s: %s", major,
			 minor, path[0] ? path : prefix, reason ?: strerror(-ret));
		return ret;
	}
	ret = py_opcodes__parse(text, version_hex, ops, why, sizeof(why));
	free(text);
	if (ret) {
		snprintf(err, errlen, "python %u.%u: %s: %s", major, minor, path, why);
		return ret;
	}
	snprintf(used, usedlen, "%s", path);
	return 0;
}
