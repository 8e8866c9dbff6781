// SPDX-License-Identifier: MIT
/*
 * Opcode numbers read from each interpreter's standard library against the
 * interpreter's own view of them (it runs and prints its opcode map), on
 * every interpreter on this machine; then text that is malformed, huge, or
 * a symlink out of a container's root.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyopcodes.h"
#include "test.h"

/* What the interpreter says, in list order: RESUME family, returns, yields. */
static const char *const ASK =
	"import opcode, dis\n"
	"m = dict(opcode.opmap)\n"
	"m.update(getattr(opcode, '_specialized_opmap', None) or {})\n"
	"m.update(getattr(dis, '_all_opmap', None) or {})\n"
	"sp = getattr(opcode, '_specializations', {}).get('RESUME', [])\n"
	"for names in (['RESUME'] + list(sp) + ['INSTRUMENTED_RESUME'],\n"
	"              ['RETURN_VALUE', 'RETURN_CONST', 'INSTRUMENTED_RETURN_VALUE',\n"
	"               'INSTRUMENTED_RETURN_CONST'],\n"
	"              ['YIELD_VALUE', 'INSTRUMENTED_YIELD_VALUE']):\n"
	"    print(' '.join(str(m[n]) for n in names if n in m))\n";

static void list_str(const uint8_t *l, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < PY_MAX_HANDLERS && l[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? " " : "", l[i]);
}

static void check_interp(const char *root, const char *prefix, const char *exe, uint32_t hex)
{
	struct py_opcodes ops;
	char cmd[1024], line[3][128], got[128], used[512], err[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s%s", strcmp(root, "/") ? root : "", exe);
	if (access(cmd, X_OK) || (strcmp(root, "/") && geteuid())) {
		printf("skip %s: not here (or a chroot, and not root)\n", cmd);
		return;
	}
	if (strcmp(root, "/"))
		snprintf(cmd, sizeof(cmd), "chroot %s %s -c \"$PTG_ASK\" 2>/dev/null", root, exe);
	else
		snprintf(cmd, sizeof(cmd), "%s -c \"$PTG_ASK\" 2>/dev/null", exe);
	setenv("PTG_ASK", ASK, 1);
	p = popen(cmd, "r");
	for (int i = 0; i < 3; i++) {
		if (!p || !fgets(line[i], sizeof(line[i]), p))
			line[i][0] = '\0';
		line[i][strcspn(line[i], "\n")] = '\0';
	}
	if (p)
		pclose(p);
	if (!ASSERT_EQ(py_opcodes__read(root, prefix, hex, &ops, used, sizeof(used), err,
					sizeof(err)),
		       0, exe)) {
		fprintf(stderr, "  %s\n", err);
		return;
	}
	list_str(ops.resume, got, sizeof(got));
	ASSERT_STREQ(got, line[0], "RESUME family");
	list_str(ops.ret, got, sizeof(got));
	ASSERT_STREQ(got, line[1], "returns");
	list_str(ops.yield, got, sizeof(got));
	ASSERT_STREQ(got, line[2], "yields");
	printf("%s%s: %s | %s | %s (from %s)\n", strcmp(root, "/") ? root : "", exe, line[0],
	       line[1], line[2], used);
}

static void check_malformed(void)
{
	struct py_opcodes ops;
	char err[256];

	ASSERT_EQ(py_opcodes__parse("", 0x030d0000, &ops, err, sizeof(err)), -ENOENT, "empty");
	ASSERT_EQ(py_opcodes__parse("opmap = {\n 'RESUME': 149,\n", 0x030d0000, &ops, err,
				    sizeof(err)),
		  -ENOENT, "truncated table");
	ASSERT_EQ(py_opcodes__parse("\nopmap = {'RESUME': 149, 'RETURN_VALUE': 36, "
				    "'YIELD_VALUE': 118}\n",
				    0x030d0000, &ops, err, sizeof(err)),
		  0, "minimal table");
	ASSERT_EQ(ops.resume[0], 149, "RESUME");
	ASSERT_EQ(py_opcodes__parse("\nopmap = {'RESUME': 999, 'RETURN_VALUE': 36, "
				    "'YIELD_VALUE': 118}\n",
				    0x030d0000, &ops, err, sizeof(err)),
		  -ENOENT, "out-of-range number ignored");
	ASSERT_EQ(py_opcodes__parse("def_op('RESUME', 151)\ndef_op('RETURN_VALUE', 83)\n"
				    "def_op('YIELD_VALUE', 86)\n_specializations = {\n"
				    "  \"RESUME\": [\n   \"RESUME_QUICK\",\n  ],\n}\n",
				    0x030b0000, &ops, err, sizeof(err)),
		  0, "3.11 style");
	ASSERT_EQ(ops.resume[1], 1, "RESUME_QUICK takes the lowest free number");
	ASSERT_EQ(py_opcodes__parse("\n_specializations = frozendict(\n RESUME=(\n  \"RESUME_CHECK\",\n"
				    " ),\n)\n_specialized_opmap = frozendict(\n RESUME_CHECK=200,\n)\n"
				    "opmap = frozendict(\n RESUME=128,\n RETURN_VALUE=33,\n"
				    " YIELD_VALUE=119,\n)\n",
				    0x030f0000, &ops, err, sizeof(err)),
		  0, "3.15 style");
	ASSERT_EQ(ops.resume[1], 200, "RESUME_CHECK from frozendict");
}

/* A container's absolute symlink resolves inside its root, never to the host's file. */
static void check_root(void)
{
	char dir[] = "/tmp/ptg-opcodes-XXXXXX", path[512], used[1024], err[512];
	struct py_opcodes ops;
	FILE *f;

	if (!mkdtemp(dir))
		return;
	snprintf(path, sizeof(path), "%s/usr/lib/python3.13", dir);
	snprintf(used, sizeof(used), "mkdir -p %s", path);
	if (system(used))
		return;
	snprintf(path, sizeof(path), "%s/usr/lib/python3.13/_opcode_metadata.py", dir);
	/* points at the host's real file: must resolve to <dir>/root/... instead, which is not there */
	if (symlink("/root/.pyenv/versions/3.13.0/lib/python3.13/_opcode_metadata.py", path))
		return;
	ASSERT_EQ(py_opcodes__read(dir, "/usr", 0x030d0000, &ops, used, sizeof(used), err,
				   sizeof(err)),
		  -ENOENT, "absolute symlink resolved inside the root");
	unlink(path);
	f = fopen(path, "w");
	for (int i = 0; f && i < (1 << 17); i++)
		fputs("# padding\n", f);
	if (f)
		fclose(f);
	ASSERT_EQ(py_opcodes__read(dir, "/usr", 0x030d0000, &ops, used, sizeof(used), err,
				   sizeof(err)),
		  -EFBIG, "a file over 1 MiB is refused");
	ASSERT_TRUE(strstr(err, "larger than 1 MiB") != NULL, err);
	snprintf(used, sizeof(used), "rm -rf %s", dir);
	if (system(used))
		fprintf(stderr, "cannot remove %s\n", dir);
}

int main(void)
{
	const char *c = getenv("PTG_CHROOT_DIR") ?: "/var/cache/ptrace-gpu/chroots";
	char root[512];

	check_interp("/", "/usr", "/usr/bin/python3.11", 0x030b0000);
	check_interp("/", "/root/.pyenv/versions/3.11.7", "/root/.pyenv/versions/3.11.7/bin/python3.11",
		     0x030b0000);
	check_interp("/", "/root/.pyenv/versions/3.12.1", "/root/.pyenv/versions/3.12.1/bin/python3.12",
		     0x030c0000);
	check_interp("/", "/root/.pyenv/versions/3.13.0", "/root/.pyenv/versions/3.13.0/bin/python3.13",
		     0x030d0000);
	snprintf(root, sizeof(root), "%s/trixie", c);
	check_interp(root, "/usr", "/usr/bin/python3.13", 0x030d0000);
	snprintf(root, sizeof(root), "%s/forky", c);
	check_interp(root, "/usr", "/usr/bin/python3.14", 0x030e0000);
	snprintf(root, sizeof(root), "%s/sid", c);
	check_interp(root, "/usr", "/usr/bin/python3.14", 0x030e0000);
	check_interp(root, "/usr", "/usr/bin/python3.15", 0x030f0000);
	check_malformed();
	check_root();
	return TEST_DONE();
}
