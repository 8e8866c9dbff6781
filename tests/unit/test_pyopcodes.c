// SPDX-License-Identifier: MIT
/*
 * Opcode numbers read from each interpreter's standard library against the
 * interpreter's own view of them (it runs and prints its opcode map) and
 * against the opcode.h its build generated, on every interpreter on this
 * machine; then the same files truncated at every few bytes, the flat list
 * of older 3.11 releases, and files that are malformed, huge, not regular,
 * or symlinks out of a container's root. Needs no root (chroots then skip)
 * and no source tree.
 */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyinterp/pyopcodes.h"
#include "test.h"

#define MAX_VIEW 1024
#define NAME_LEN 64

/* What the interpreter says: its three lists (L), its opcode map (M), its flat list (S). */
static const char *const ASK =
    "import opcode, dis\n"
    "m = dict(opcode.opmap)\n"
    "m.update(getattr(opcode, '_specialized_opmap', None) or {})\n"
    "m.update(getattr(dis, '_all_opmap', None) or {})\n"
    "flat = getattr(opcode, '_specialized_instructions', [])\n"
    "sp = getattr(opcode, '_specializations', {}).get('RESUME') or \\\n"
    "    [n for n in flat if n.startswith('RESUME_')]\n"
    "for names in (['RESUME'] + list(sp) + ['INSTRUMENTED_RESUME'],\n"
    "              ['RETURN_VALUE', 'RETURN_CONST', 'INSTRUMENTED_RETURN_VALUE',\n"
    "               'INSTRUMENTED_RETURN_CONST'],\n"
    "              ['YIELD_VALUE', 'INSTRUMENTED_YIELD_VALUE']):\n"
    "    print('L', ' '.join('%s=%d' % (n, m[n]) for n in names if n in m))\n"
    "for n, v in m.items():\n"
    "    print('M', n, v)\n"
    "for n in flat:\n"
    "    print('S', n)\n";

struct view {
	char lists[3][256]; /* "RESUME=151 RESUME_QUICK=150" */
	int n, nflat;
	char names[MAX_VIEW][NAME_LEN];
	int nums[MAX_VIEW];
	char flat[MAX_VIEW][NAME_LEN];
};

static struct view view;

/* "RESUME=151 RESUME_QUICK=150" -> "151 150" */
static void numbers_of(const char *list, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (const char *p = strchr(list, '='); p && n < len; p = strchr(p + 1, '='))
		n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? " " : "", atoi(p + 1));
}

static void list_str(const uint8_t *l, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < PY_MAX_HANDLERS && l[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? " " : "", l[i]);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = (cap + 4096) * 2);

			if (!nb)
				break;
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);

		if (!got)
			break;
		n += got;
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static int write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");
	int ok = f && fwrite(text, 1, len, f) == len;

	if (f && fclose(f))
		ok = 0;
	return ok ? 0 : -1;
}

/* Runs the interpreter (inside root when that is not "/") and fills view. */
static int ask(const char *root, const char *exe)
{
	char cmd[1024], line[256];
	FILE *p;

	memset(&view, 0, sizeof(view));
	if (strcmp(root, "/"))
		snprintf(cmd, sizeof(cmd), "chroot %s %s -c \"$PTG_ASK\" 2>/dev/null", root, exe);
	else
		snprintf(cmd, sizeof(cmd), "%s -c \"$PTG_ASK\" 2>/dev/null", exe);
	setenv("PTG_ASK", ASK, 1);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	for (int nl = 0; fgets(line, sizeof(line), p);) {
		char name[NAME_LEN];
		int num;

		line[strcspn(line, "\n")] = '\0';
		if (line[0] == 'L' && nl < 3)
			snprintf(view.lists[nl++], sizeof(view.lists[0]), "%s", line + 1);
		else if (sscanf(line, "M %63s %d", name, &num) == 2 && view.n < MAX_VIEW) {
			snprintf(view.names[view.n], NAME_LEN, "%s", name);
			view.nums[view.n++] = num;
		} else if (sscanf(line, "S %63s", name) == 1 && view.nflat < MAX_VIEW)
			snprintf(view.flat[view.nflat++], NAME_LEN, "%s", name);
	}
	return pclose(p) == 0 && view.n ? 0 : -1;
}

/* The three lists read against the interpreter's. */
static void check_lists(const struct py_opcodes *ops, const char *what)
{
	const uint8_t *mine[3] = {ops->resume, ops->ret, ops->yield};
	static const char *const names[3] = {"RESUME family", "returns", "yields"};
	char want[128], got[128], name[700];

	for (int i = 0; i < 3; i++) {
		numbers_of(view.lists[i], want, sizeof(want));
		list_str(mine[i], got, sizeof(got));
		snprintf(name, sizeof(name), "%s: %s", what, names[i]);
		ASSERT_STREQ(got, want, name);
	}
}

/* Every name of the interpreter's map against the map parsed from text. */
static void check_map(const char *text, uint32_t hex, const char *what)
{
	struct py_opmap *m;
	char err[256], name[700];
	int bad = 0;

	snprintf(name, sizeof(name), "%s: opmap parses", what);
	if (!ASSERT_EQ(py_opmap__parse(text, hex, &m, err, sizeof(err)), 0, name)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	for (int i = 0; i < view.n; i++) {
		int got = py_opmap__get(m, view.names[i]);

		if (got != view.nums[i] && bad++ < 5)
			fprintf(stderr, "  %s: %s: expected %d, got %d\n", what, view.names[i],
				view.nums[i], got);
	}
	snprintf(name, sizeof(name), "%s: all %d names numbered as the interpreter does", what,
		 view.n);
	if (ASSERT_EQ(bad, 0, name))
		printf("  %s: all %d names of the interpreter's map agree\n", what, view.n);
	py_opmap__free(m);
}

/* The numbers the build wrote into opcode_ids.h (3.13+) or opcode.h, where installed. */
static void check_header(const char *root, const char *prefix, uint32_t hex)
{
	char path[1024], pat[NAME_LEN + 16], *h = NULL;
	int found = 0, bad = 0;

	for (int i = 0; i < 2 && !h; i++) {
		snprintf(path, sizeof(path), "%s%s/include/python%u.%u/%s",
			 strcmp(root, "/") ? root : "", prefix, hex >> 24, (hex >> 16) & 0xff,
			 i ? "opcode.h" : "opcode_ids.h");
		h = slurp(path, NULL);
	}
	if (!h) {
		printf("  no opcode.h under %s%s/include: header not compared\n",
		       strcmp(root, "/") ? root : "", prefix);
		return;
	}
	for (int i = 0; i < view.n; i++) {
		const char *p;

		snprintf(pat, sizeof(pat), "#define %s ", view.names[i]);
		p = strstr(h, pat);
		if (!p)
			continue;
		found++;
		if (atoi(p + strlen(pat)) != view.nums[i] && bad++ < 5)
			fprintf(stderr, "  %s: %s %d, interpreter %d\n", path, view.names[i],
				atoi(p + strlen(pat)), view.nums[i]);
	}
	ASSERT_TRUE(found > 0, "header names some opcodes");
	ASSERT_EQ(bad, 0, "header agrees with the interpreter");
	printf("  %s: %d names agree\n", path, found - bad);
	free(h);
}

/* The file cut short at every few bytes: the full answer or a one-line error, never more. */
static void check_truncated(const char *text, uint32_t hex, const struct py_opcodes *full,
			    const char *what)
{
	size_t len = strlen(text);
	char *cut = malloc(len + 1), err[256], name[700];
	int wrong = 0, ok = 0;

	if (!cut)
		return;
	for (size_t n = 0; n < len; n += 5) {
		struct py_opcodes ops;

		memcpy(cut, text, n);
		cut[n] = '\0';
		err[0] = '\0';
		if (!py_opcodes__parse(cut, hex, &ops, err, sizeof(err))) {
			ok++;
			wrong += !!memcmp(&ops, full, sizeof(ops));
		} else {
			wrong += !err[0] || strchr(err, '\n');
		}
	}
	snprintf(name, sizeof(name), "%s: truncated copies (%d of them parse)", what, ok);
	ASSERT_EQ(wrong, 0, name);
	free(cut);
}

/*
 * Some 3.11 releases list the specialized instructions flat, with no
 * families: the same file rewritten that way must number them the same.
 */
static void check_flat_list(const char *text, uint32_t hex, const char *what)
{
	size_t len = strlen(text), cap = len + (size_t)view.nflat * (NAME_LEN + 8) + 64;
	char *t = malloc(cap), *p, err[256], name[700];
	struct py_opcodes ops;
	size_t n;

	if (!t || !view.nflat) {
		free(t);
		return;
	}
	memcpy(t, text, len + 1);
	/* tables hidden by a rename in place: the families first, then the comprehension */
	if ((p = strstr(t, "\n_specializations = ")))
		p[1] = 'X';
	snprintf(name, sizeof(name), "%s: a comprehension is no list", what);
	ASSERT_EQ(py_opcodes__parse(t, hex, &ops, err, sizeof(err)), -EINVAL, name);
	if ((p = strstr(t, "\n_specialized_instructions = ")))
		p[1] = 'X';
	snprintf(name, sizeof(name), "%s: no list at all", what);
	ASSERT_EQ(py_opcodes__parse(t, hex, &ops, err, sizeof(err)), -ENOENT, name);
	n = len;
	n += (size_t)snprintf(t + n, cap - n, "\n_specialized_instructions = [\n");
	for (int i = 0; i < view.nflat; i++)
		n += (size_t)snprintf(t + n, cap - n, "    \"%s\",\n", view.flat[i]);
	snprintf(t + n, cap - n, "]\n");
	snprintf(name, sizeof(name), "%s: flat list", what);
	if (ASSERT_EQ(py_opcodes__parse(t, hex, &ops, err, sizeof(err)), 0, name))
		check_lists(&ops, name);
	else
		fprintf(stderr, "  %s\n", err);
	check_map(t, hex, name);
	free(t);
}

static void check_interp(const char *root, const char *prefix, const char *exe, uint32_t hex)
{
	char path[1024], used[512], err[512], what[600];
	struct py_opcodes ops;
	char *text;

	snprintf(what, sizeof(what), "%s%s", strcmp(root, "/") ? root : "", exe);
	if (access(what, X_OK)) {
		printf("skip %s: not installed (or not reachable)\n", what);
		return;
	}
	if (strcmp(root, "/") && geteuid()) {
		printf("skip %s: running it in its chroot needs root\n", what);
		return;
	}
	if (!ASSERT_EQ(ask(root, exe), 0, "the interpreter prints its opcode map"))
		return;
	if (!ASSERT_EQ(
		py_opcodes__read(root, prefix, hex, &ops, used, sizeof(used), err, sizeof(err)), 0,
		what)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	printf("%s: %s |%s |%s (from %s)\n", what, view.lists[0], view.lists[1], view.lists[2],
	       used);
	check_lists(&ops, what);
	check_header(root, prefix, hex);
	snprintf(path, sizeof(path), "%s%s", strcmp(root, "/") ? root : "", used);
	text = slurp(path, NULL);
	if (!ASSERT_TRUE(text != NULL, "the file read can be read again"))
		return;
	check_map(text, hex, what);
	check_truncated(text, hex, &ops, what);
	if (hex < 0x030d0000)
		check_flat_list(text, hex, what);
	free(text);
}

/* A chroot of tools/make-chroots.sh, once finished (.ptg-ready). */
static void check_chroot(const char *dir, const char *name, const char *exe, uint32_t hex)
{
	char root[512], ready[600];

	snprintf(root, sizeof(root), "%s/%s", dir, name);
	snprintf(ready, sizeof(ready), "%s/.ptg-ready", root);
	if (access(ready, F_OK)) {
		printf("skip %s%s: chroot not (yet) built\n", root, exe);
		return;
	}
	check_interp(root, "/usr", exe, hex);
}

static const char VALID313[] = "_specializations = {\n"
			       "    \"RESUME\": [\n"
			       "        \"RESUME_CHECK\",  # a comment with a ] in it\n"
			       "    ],\n"
			       "}\n"
			       "_specialized_opmap = {\n"
			       "    'RESUME_CHECK': 207,\n"
			       "}\n"
			       "opmap = {\n"
			       "    'CACHE': 0,\n"
			       "    'RETURN_VALUE': 36,\n"
			       "    'YIELD_VALUE': 118,\n"
			       "    'RESUME': 149,\n"
			       "    'INSTRUMENTED_RESUME': 236,\n"
			       "    'BAD ]': 1,\n"
			       "}\n";

static int parse(const char *text, uint32_t hex, struct py_opcodes *ops, char *err, size_t len)
{
	err[0] = '\0';
	return py_opcodes__parse(text, hex, ops, err, len);
}

static void check_texts(void)
{
	char err[256], buf[8192], got[64];
	struct py_opcodes ops;
	size_t n;

	ASSERT_EQ(parse(VALID313, 0x030d0000, &ops, err, sizeof(err)), 0, "3.13 form");
	list_str(ops.resume, got, sizeof(got));
	ASSERT_STREQ(got, "149 207 236", "3.13 form: RESUME family, brackets in strings ignored");
	ASSERT_EQ(parse("", 0x030d0000, &ops, err, sizeof(err)), -ENOENT, "empty");
	ASSERT_STREQ(err, "no opmap table", "empty: reason");
	ASSERT_EQ(parse("opmap = {\n 'RESUME': 149,\n", 0x030d0000, &ops, err, sizeof(err)),
		  -EINVAL, "truncated table");
	ASSERT_STREQ(err, "opmap: not a complete literal table", "truncated: reason");
	ASSERT_EQ(parse("opmap = dict(zip(names, numbers))\n", 0x030d0000, &ops, err, sizeof(err)),
		  -ENOENT, "code, not a table");
	ASSERT_EQ(parse("\nopmap = {'RESUME': 999, 'RETURN_VALUE': 36, 'YIELD_VALUE': 118}\n",
			0x030d0000, &ops, err, sizeof(err)),
		  -ERANGE, "a number past 255 is no handler");
	ASSERT_STREQ(err, "RESUME is 999 in opcode map, not 1-255", "out of range: reason");
	ASSERT_EQ(parse("\nopmap = {'RETURN_VALUE': 36, 'YIELD_VALUE': 118}\n", 0x030d0000, &ops,
			err, sizeof(err)),
		  -ENOENT, "no RESUME");
	ASSERT_STREQ(err, "no RESUME in opcode map", "no RESUME: reason");
	ASSERT_EQ(
	    parse("opmap = {'RESUME': 1, 'RETURN_VALUE': 2}\n", 0x030d0000, &ops, err, sizeof(err)),
	    -ENOENT, "no YIELD_VALUE");
	ASSERT_EQ(ops.resume[0], 0, "nothing filled on failure");
	ASSERT_EQ(
	    parse("opmap = frozendict(\n RESUME=128,\n RETURN_VALUE=33,\n YIELD_VALUE=119,\n)\n"
		  "_specializations = frozendict(\n RESUME=(\n  \"RESUME_CHECK\",\n"
		  "  \"RESUME_CHECK_JIT\",\n ),\n)\n"
		  "_specialized_opmap = frozendict(\n RESUME_CHECK=200,\n"
		  " RESUME_CHECK_JIT=201,\n)\n",
		  0x030f0000, &ops, err, sizeof(err)),
	    0, "3.15 frozendict form");
	list_str(ops.resume, got, sizeof(got));
	ASSERT_STREQ(got, "128 200 201", "3.15 form: RESUME family");

	/* 3.11: numbered by the build, each taking the lowest free number in order */
	n = (size_t)snprintf(
	    buf, sizeof(buf),
	    "def def_op(name, op):\n    opmap[name] = op\n"
	    "def_op('CACHE', 0)\ndef_op('POP_TOP', 1)\n"
	    "# def_op('COMMENTED', 2)\n"
	    "def_op('NOP', 3)\njrel_op('RETURN_VALUE', 83)\n"
	    "name_op('YIELD_VALUE', 86)\ndef_op('RESUME', 151)\n"
	    "_specializations = {\n \"LOAD_ATTR\": [\n  \"LOAD_ATTR_A\",\n  "
	    "\"LOAD_ATTR_B\",\n ],\n \"RESUME\": [\n  \"RESUME_QUICK\",\n ],\n}\n"
	    "_specialized_instructions = [\n"
	    "    opcode for family in _specializations.values() for opcode in family\n]\n");
	ASSERT_EQ(parse(buf, 0x030b0000, &ops, err, sizeof(err)), 0, "3.11 form");
	list_str(ops.resume, got, sizeof(got));
	ASSERT_STREQ(got, "151 5", "3.11 form: RESUME_QUICK after 2 (A) and 4 (B)");

	/* more specialized instructions than numbers left */
	n = (size_t)snprintf(buf, sizeof(buf),
			     "def_op('RESUME', 151)\n_specializations = {\n"
			     " \"X\": [\n");
	for (int i = 0; i < 300 && n < sizeof(buf) - 64; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\"X_%d\",\n", i);
	snprintf(buf + n, sizeof(buf) - n, "],\n}\n");
	ASSERT_EQ(parse(buf, 0x030b0000, &ops, err, sizeof(err)), -ERANGE, "numbers run out");
	ASSERT_TRUE(strstr(err, "no opcode number left for X_") != NULL, err);

	/* more RESUME forms than the probes have room for: refused, not cut short */
	ASSERT_EQ(parse("opmap = {'RESUME': 1, 'RETURN_VALUE': 2, 'YIELD_VALUE': 3, 'R1': 4,\n"
			" 'R2': 5, 'R3': 6, 'R4': 7, 'R5': 8, 'R6': 9}\n"
			"_specializations = {'RESUME': ['R1', 'R2', 'R3', 'R4', 'R5', 'R6']}\n",
			0x030d0000, &ops, err, sizeof(err)),
		  -E2BIG, "too many RESUME forms");
	ASSERT_EQ(parse("opmap = {'RESUME': 1, 'RETURN_VALUE': 2, 'YIELD_VALUE': 3, 'R1': 4,\n"
			" 'R2': 5, 'R3': 6, 'R4': 7, 'R5': 8}\n"
			"_specializations = {'RESUME': ['R1', 'R2', 'R3', 'R4', 'R5']}\n",
			0x030d0000, &ops, err, sizeof(err)),
		  0, "six RESUME forms fill the list");
	ASSERT_EQ(ops.resume[5], 8, "the sixth");
}

/* Random bytes and deep brackets: errors, no crash, no hang. */
static void check_garbage(void)
{
	size_t len = 256 << 10;
	char *t = malloc(len + 1), err[256];
	struct py_opcodes ops;
	unsigned int seed = 1;
	int bad = 0;

	if (!t)
		return;
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < len; i++)
			t[i] = (char)(rand_r(&seed) % 255 + 1);
		t[len] = '\0';
		if (round & 1)
			memcpy(t, "opmap = {", 9);
		bad += parse(t, round & 2 ? 0x030b0000 : 0x030d0000, &ops, err, sizeof(err)) >= 0;
	}
	ASSERT_EQ(bad, 0, "random bytes give an error");
	memset(t, '(', len);
	memcpy(t, "opmap = ", 8);
	t[len] = '\0';
	ASSERT_EQ(parse(t, 0x030d0000, &ops, err, sizeof(err)), -EINVAL,
		  "brackets that never close");
	free(t);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int read_in(const char *root, uint32_t hex, struct py_opcodes *ops, char *used, char *err)
{
	used[0] = err[0] = '\0';
	return py_opcodes__read(root, "/usr", hex, ops, used, 512, err, 512);
}

/* Files in a fake container root: where they are looked for, and what is refused. */
static void check_root(void)
{
	char dir[] = "/tmp/ptg-opcodes-XXXXXX", root[64], path[600], used[512], err[512];
	const char *file = "usr/lib/python3.13/_opcode_metadata.py";
	struct py_opcodes ops;
	char *big;

	if (!ASSERT_TRUE(mkdtemp(dir) != NULL, "temp dir"))
		return;
	snprintf(root, sizeof(root), "%s/root", dir);
	for (const char *d = "root root/usr root/usr/lib root/usr/lib64 root/usr/lib64/python3.13 "
			     "root/usr/lib/python3.13 root/opt root/outside outside";
	     *d;) {
		size_t n = strcspn(d, " ");

		snprintf(path, sizeof(path), "%s/%.*s", dir, (int)n, d);
		mkdir(path, 0755);
		d += n + (d[n] == ' ');
	}
	snprintf(path, sizeof(path), "%s/%s", root, file);

	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -ENOENT, "missing");
	ASSERT_STREQ(err,
		     "python 3.13: cannot read opcode numbers: "
		     "/usr/lib/python3.13/_opcode_metadata.py: No such file or directory",
		     "missing: reason");
	ASSERT_EQ(read_in("/nonexistent-root", 0x030d0000, &ops, used, err), -ENOENT, "no root");
	ASSERT_TRUE(strstr(err, "root /nonexistent-root") != NULL, err);

	snprintf(used, sizeof(used), "%s/usr/lib64/python3.13/_opcode_metadata.py", root);
	write_file(used, VALID313, strlen(VALID313));
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), 0, "lib64 when lib lacks it");
	ASSERT_STREQ(used, "/usr/lib64/python3.13/_opcode_metadata.py", "lib64: path");
	snprintf(used, sizeof(used), "%s/usr/lib64/python3.13/_opcode_metadata.py", root);
	unlink(used);

	write_file(path, VALID313, strlen(VALID313));
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), 0, "lib first");
	ASSERT_STREQ(used, "/usr/lib/python3.13/_opcode_metadata.py", "lib: path");
	ASSERT_EQ(ops.resume[1], 207, "lib: RESUME_CHECK");

	write_file(path, VALID313, strstr(VALID313, "'RESUME': 149") - VALID313);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -EINVAL, "truncated file");
	ASSERT_STREQ(err,
		     "python 3.13: /usr/lib/python3.13/_opcode_metadata.py: "
		     "opmap: not a complete literal table",
		     "truncated file: reason");
	write_file(path, VALID313, strstr(VALID313, "opmap = ") - VALID313);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -ENOENT, "no opmap");
	ASSERT_TRUE(strstr(err, ": no opmap table") != NULL, err);

	big = malloc((1 << 20) + 64);
	if (big) {
		size_t n = strlen(VALID313);

		memcpy(big, VALID313, n);
		for (; n < (1 << 20) + 16; n += 10)
			memcpy(big + n, "# padding\n", 10);
		write_file(path, big, n);
		free(big);
		ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -EFBIG, "over 1 MiB");
		ASSERT_TRUE(strstr(err, "larger than 1 MiB") != NULL, err);
	}

	unlink(path);
	mkfifo(path, 0644);
	alarm(30); /* a FIFO opened for reading would block: fail loudly instead */
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -EINVAL, "a FIFO");
	alarm(0);
	ASSERT_TRUE(strstr(err, "not a regular file") != NULL, err);
	unlink(path);

	/* a valid file outside the root, which symlinks inside must never reach */
	snprintf(used, sizeof(used), "%s/outside/_opcode_metadata.py", dir);
	write_file(used, VALID313, strlen(VALID313));
	symlink(used, path);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -ENOENT, "absolute symlink out");
	unlink(path);
	symlink("../../../../../../../../outside/_opcode_metadata.py", path);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -ENOENT, "relative symlink out");
	unlink(path);
	symlink("/proc/self/root/tmp", path);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), -ENOENT,
		  "/proc inside the root is the root's");
	unlink(path);

	/* a container's absolute symlink means its own /opt, found inside the root */
	snprintf(used, sizeof(used), "%s/opt/_opcode_metadata.py", root);
	write_file(used, VALID313, strlen(VALID313));
	symlink("/opt/_opcode_metadata.py", path);
	ASSERT_EQ(read_in(root, 0x030d0000, &ops, used, err), 0, "absolute symlink inside");
	ASSERT_EQ(ops.resume[0], 149, "absolute symlink inside: RESUME");

	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const char *c = getenv("PTG_CHROOT_DIR") ?: "/var/cache/ptrace-gpu/chroots";
	const char *py310 = "/root/.pyenv/versions/3.10.13";
	char used[512], err[512];
	struct py_opcodes ops;

	check_interp("/", "/usr", "/usr/bin/python3.11", 0x030b0000);
	check_interp("/", "/root/.pyenv/versions/3.11.7",
		     "/root/.pyenv/versions/3.11.7/bin/python3.11", 0x030b0000);
	check_interp("/", "/root/.pyenv/versions/3.12.1",
		     "/root/.pyenv/versions/3.12.1/bin/python3.12", 0x030c0000);
	check_interp("/", "/root/.pyenv/versions/3.13.0",
		     "/root/.pyenv/versions/3.13.0/bin/python3.13", 0x030d0000);
	check_chroot(c, "trixie", "/usr/bin/python3.13", 0x030d0000);
	check_chroot(c, "forky", "/usr/bin/python3.14", 0x030e0000);
	check_chroot(c, "sid", "/usr/bin/python3.14", 0x030e0000);
	check_chroot(c, "sid", "/usr/bin/python3.15", 0x030f0000);
	/* 3.10 has no RESUME: refused by name, not misread */
	if (!access(py310, F_OK)) {
		ASSERT_EQ(py_opcodes__read("/", py310, 0x030a0000, &ops, used, sizeof(used), err,
					   sizeof(err)),
			  -ENOENT, "3.10");
		ASSERT_TRUE(strstr(err, "no RESUME in opcode map") != NULL, err);
	}
	check_texts();
	check_garbage();
	check_root();
	return TEST_DONE();
}
