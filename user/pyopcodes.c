// SPDX-License-Identifier: MIT
/* Opcode numbers from the interpreter's standard library. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pyopcodes.h"

#define MAX_SOURCE (1 << 20)
#define MAX_NAME 48
#define MAX_SPECIALIZED 256

struct opmap {
	char names[512][MAX_NAME];
	int16_t nums[512];
	int n;
};

static int opmap_get(const struct opmap *m, const char *name)
{
	for (int i = 0; i < m->n; i++) {
		if (!strcmp(m->names[i], name))
			return m->nums[i];
	}
	return -1;
}

static void opmap_put(struct opmap *m, const char *name, int num)
{
	if (num < 0 || num > 255 || m->n >= 512 || opmap_get(m, name) >= 0)
		return;
	snprintf(m->names[m->n], MAX_NAME, "%s", name);
	m->nums[m->n++] = (int16_t)num;
}

/*
 * A tiny tokenizer for the literal tables these files hold, in the forms
 * each version writes: { 'NAME': 1 }, frozendict(NAME=1),
 * { "FAMILY": [ "SPEC" ] }, frozendict(FAMILY=( "SPEC", )). Names are
 * identifiers, quoted or bare; nothing is ever evaluated.
 */
struct tok {
	const char *p, *end;
	int depth; /* brackets open inside the table, the table's own included */
	char name[MAX_NAME];
	bool is_name;
	long num; /* -1: not a number */
};

/* The next name or number inside [p, end); false at the end. Punctuation adjusts depth. */
static bool next_tok(struct tok *t)
{
	while (t->p < t->end) {
		char c = *t->p;

		if (c == '#') {
			while (t->p < t->end && *t->p != '\n')
				t->p++;
			continue;
		}
		if (c == '(' || c == '[' || c == '{') {
			t->depth++;
			t->p++;
			continue;
		}
		if (c == ')' || c == ']' || c == '}') {
			t->depth--;
			t->p++;
			continue;
		}
		t->is_name = false;
		t->num = -1;
		if (c == '\'' || c == '"' || isalpha((unsigned char)c) || c == '_') {
			bool quoted = c == '\'' || c == '"';
			size_t n = 0;

			t->p += quoted;
			while (t->p < t->end && (isalnum((unsigned char)*t->p) || *t->p == '_')) {
				if (n < MAX_NAME - 1)
					t->name[n++] = *t->p;
				t->p++;
			}
			t->name[n] = '\0';
			if (quoted && t->p < t->end && *t->p == c)
				t->p++;
			t->is_name = n > 0;
			return true;
		}
		if (isdigit((unsigned char)c)) {
			t->num = strtol(t->p, NULL, 10);
			while (t->p < t->end && isdigit((unsigned char)*t->p))
				t->p++;
			return true;
		}
		t->p++;
	}
	return false;
}

/* The char after a token, spaces skipped: ':' or '=' make the name a key. */
static char after(const struct tok *t)
{
	const char *q = t->p;

	while (q < t->end && (*q == ' ' || *q == '\t'))
		q++;
	return q < t->end ? *q : '\0';
}

/* The bracketed table that follows "\n<key> =" (a dict, a list or a frozendict(...) call). */
static bool table(const char *text, const char *key, struct tok *t)
{
	char pat[64];
	const char *p, *q;
	int depth = 0;

	snprintf(pat, sizeof(pat), "\n%s = ", key);
	p = strstr(text, pat);
	if (!p && !strncmp(text, pat + 1, strlen(pat + 1)))
		p = text - 1; /* at the very start of the file */
	if (!p)
		return false;
	for (q = p + strlen(pat); *q && !strchr("([{\n", *q); q++)
		;
	if (!*q || *q == '\n')
		return false;
	memset(t, 0, sizeof(*t));
	t->p = q;
	for (; *q; q++) {
		depth += !!strchr("([{", *q);
		depth -= !!strchr(")]}", *q);
		if (!depth) {
			t->end = q + 1;
			return true;
		}
	}
	return false;
}

/* NAME: number or NAME=number pairs of the table called key. */
static void parse_numbers(const char *text, const char *key, struct opmap *m)
{
	struct tok t;

	if (!table(text, key, &t))
		return;
	while (next_tok(&t)) {
		char name[MAX_NAME], c;

		if (!t.is_name || ((c = after(&t)) != ':' && c != '='))
			continue;
		snprintf(name, sizeof(name), "%s", t.name);
		if (next_tok(&t) && t.num >= 0)
			opmap_put(m, name, (int)t.num);
	}
}

/*
 * The specialized forms of each family, in source order: names one level
 * inside a family's brackets (the family names are the table's keys). When
 * family is given, only that family's members. Before 3.12.0 final some
 * releases list them flat: _specialized_instructions = [ ... ].
 */
static int specialized(const char *text, const char *family, char (*out)[MAX_NAME], int max)
{
	char cur[MAX_NAME] = "";
	struct tok t;
	int n = 0;

	if (!table(text, "_specializations", &t)) {
		if (family || !table(text, "_specialized_instructions", &t))
			return 0;
		while (n < max && next_tok(&t)) {
			if (t.is_name && t.depth == 1)
				snprintf(out[n++], MAX_NAME, "%s", t.name);
		}
		return n;
	}
	while (n < max && next_tok(&t)) {
		if (!t.is_name)
			continue;
		if (t.depth == 1 && (after(&t) == ':' || after(&t) == '='))
			snprintf(cur, sizeof(cur), "%s", t.name);
		else if (t.depth == 2 && (!family || !strcmp(cur, family)))
			snprintf(out[n++], MAX_NAME, "%s", t.name);
	}
	return n;
}

/* 3.11, 3.12: def_op('NAME', N), name_op(...), jrel_op(...): every "_op('NAME', N". */
static void parse_def_ops(const char *text, struct opmap *m)
{
	for (const char *p = strstr(text, "_op("); p; p = strstr(p + 4, "_op(")) {
		struct tok t = { .p = p + 4, .end = p + 4 + strnlen(p + 4, 128) };
		char name[MAX_NAME];

		if (!next_tok(&t) || !t.is_name || after(&t) != ',')
			continue;
		snprintf(name, sizeof(name), "%s", t.name);
		if (next_tok(&t) && t.num >= 0)
			opmap_put(m, name, (int)t.num);
	}
}

/*
 * Before 3.13 the build numbers the specialized instructions: each in turn
 * takes the lowest number from 1 up that no opcode uses yet
 * (Tools/build/generate_opcode_h.py). Same rule, same order.
 */
static void number_specialized(const char *text, struct opmap *m)
{
	static char names[MAX_SPECIALIZED][MAX_NAME];
	bool used[256] = { false };
	int n = specialized(text, NULL, names, MAX_SPECIALIZED), next = 1;

	for (int i = 0; i < m->n; i++)
		used[m->nums[i]] = true;
	for (int i = 0; i < n; i++) {
		while (next < 256 && used[next])
			next++;
		if (next >= 256)
			return;
		used[next] = true;
		opmap_put(m, names[i], next);
	}
}

static void add(uint8_t *list, int *n, int num)
{
	if (num <= 0 || *n >= PY_MAX_HANDLERS)
		return;
	for (int i = 0; i < *n; i++) {
		if (list[i] == num)
			return;
	}
	list[(*n)++] = (uint8_t)num;
}

int py_opcodes__parse(const char *text, uint32_t version_hex, struct py_opcodes *ops, char *err,
		      size_t errlen)
{
	static char family[16][MAX_NAME];
	struct opmap *m = calloc(1, sizeof(*m));
	int nr = 0, nt = 0, ny = 0, nf;

	if (!m)
		return -ENOMEM;
	memset(ops, 0, sizeof(*ops));
	if (version_hex >= 0x030d0000) {
		parse_numbers(text, "opmap", m);
		parse_numbers(text, "_specialized_opmap", m);
	} else {
		parse_def_ops(text, m);
		number_specialized(text, m);
	}
	if (opmap_get(m, "RESUME") < 0)
		nr = -1; /* the specialized forms alone are no RESUME */
	else
		add(ops->resume, &nr, opmap_get(m, "RESUME"));
	nf = nr < 0 ? 0 : specialized(text, "RESUME", family, 16);
	for (int i = 0; i < nf; i++)
		add(ops->resume, &nr, opmap_get(m, family[i]));
	if (nr >= 0)
		add(ops->resume, &nr, opmap_get(m, "INSTRUMENTED_RESUME"));
	add(ops->ret, &nt, opmap_get(m, "RETURN_VALUE"));
	add(ops->ret, &nt, opmap_get(m, "RETURN_CONST"));
	add(ops->ret, &nt, opmap_get(m, "INSTRUMENTED_RETURN_VALUE"));
	add(ops->ret, &nt, opmap_get(m, "INSTRUMENTED_RETURN_CONST"));
	add(ops->yield, &ny, opmap_get(m, "YIELD_VALUE"));
	add(ops->yield, &ny, opmap_get(m, "INSTRUMENTED_YIELD_VALUE"));
	free(m);
	if (nr <= 0 || !ops->ret[0] || !ops->yield[0]) {
		snprintf(err, errlen, "no %s in the opcode map",
			 nr <= 0 ? "RESUME" : !ops->ret[0] ? "RETURN_VALUE" : "YIELD_VALUE");
		memset(ops, 0, sizeof(*ops));
		return -ENOENT;
	}
	return 0;
}

/* Opens path inside root: a container's absolute symlinks resolve inside the container. */
static int open_in_root(const char *root, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int rootfd, fd;

	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	while (*path == '/')
		path++;
	fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	if (fd < 0)
		fd = -errno;
	close(rootfd);
	return fd;
}

/* The whole file, at most MAX_SOURCE bytes, '\0'-terminated. */
static int slurp(int fd, char **out)
{
	char *buf = malloc(MAX_SOURCE + 1);
	size_t len = 0;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	while ((n = read(fd, buf + len, MAX_SOURCE + 1 - len)) > 0 && len <= MAX_SOURCE)
		len += (size_t)n;
	if (n < 0 || len > MAX_SOURCE) {
		free(buf);
		return n < 0 ? -errno : -EFBIG;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int py_opcodes__read(const char *root, const char *prefix, uint32_t version_hex,
		     struct py_opcodes *ops, char *used, size_t usedlen, char *err, size_t errlen)
{
	const char *file = version_hex >= 0x030d0000 ? "_opcode_metadata.py" : "opcode.py";
	static const char *const libdirs[] = { "lib", "lib64" };
	unsigned major = version_hex >> 24, minor = (version_hex >> 16) & 0xff;
	char path[4096], first[4096] = "", why[160];
	char *text = NULL;
	int fd = -ENOENT, ret;

	for (size_t i = 0; i < 2 && fd == -ENOENT; i++) {
		snprintf(path, sizeof(path), "%s/%s/python%u.%u/%s", strcmp(prefix, "/") ? prefix : "",
			 libdirs[i], major, minor, file);
		fd = open_in_root(root, path);
		if (!first[0])
			snprintf(first, sizeof(first), "%s", path);
	}
	if (fd < 0) {
		snprintf(err, errlen, "python %u.%u: cannot read opcode numbers: %s: %s", major, minor,
			 first, strerror(-fd));
		return fd;
	}
	ret = slurp(fd, &text);
	close(fd);
	if (ret) {
		snprintf(err, errlen, "python %u.%u: cannot read opcode numbers: %s: %s", major, minor,
			 path, ret == -EFBIG ? "larger than 1 MiB" : strerror(-ret));
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
