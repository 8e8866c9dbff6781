// SPDX-License-Identifier: MIT
/*
 * ld.so.cache in the three layouts ldconfig writes (-c old, compat, new):
 * images built here byte by byte give exactly their entries; the host's own
 * libraries cached by ldconfig in each layout give the same entries as
 * `ldconfig -p` prints; and every truncation or corrupted count or offset
 * of a valid image is refused or read within its bounds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/ldcache.h"
#include "test.h"

#define X86_64_LIBC6 0x0303
#define I386_LIBC6   0x0003

struct ent {
	int32_t flags;
	const char *name, *path;
};

static const struct ent ents[] = {
    {X86_64_LIBC6, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
    {X86_64_LIBC6, "libcuda.so.1", "/opt/nv/lib/libcuda.so.1"},
    {I386_LIBC6, "libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1"},
    {X86_64_LIBC6, "libcudart.so.12", "/opt/cuda/lib64/libcudart.so.12"},
};
#define NENTS (sizeof(ents) / sizeof(ents[0]))

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

enum layout { OLD, COMPAT, NEW };

/*
 * An image as ldconfig -c old|compat|new lays it out: the old table (header,
 * 12-byte entries, strings relative to the table's end), then for compat
 * the new one 8-aligned right after the old entries (24-byte entries,
 * strings relative to its header), then the strings both share.
 */
static size_t build(uint8_t *buf, enum layout l)
{
	size_t old_end = l == NEW ? 0 : 16 + NENTS * 12;
	size_t hdr = l == NEW ? 0 : (old_end + 7) & ~7ul;
	size_t at = l == OLD ? old_end : hdr + 48 + NENTS * 24;

	memset(buf, 0, at);
	if (l != NEW) {
		memcpy(buf, "ld.so-1.7.0", 12);
		put32(buf + 12, NENTS);
	}
	if (l != OLD) {
		memcpy(buf + hdr, "glibc-ld.so.cache1.1", 20);
		put32(buf + hdr + 20, NENTS);
	}
	for (size_t i = 0; i < NENTS; i++) {
		size_t name = at, path = at + strlen(ents[i].name) + 1;
		uint8_t *o = buf + 16 + i * 12, *n = buf + hdr + 48 + i * 24;

		memcpy(buf + name, ents[i].name, strlen(ents[i].name) + 1);
		memcpy(buf + path, ents[i].path, strlen(ents[i].path) + 1);
		at = path + strlen(ents[i].path) + 1;
		if (l != NEW) {
			put32(o, ents[i].flags);
			/* compat: the old table points at a damaged name, to see which is read */
			put32(o + 4, l == COMPAT ? path - old_end : name - old_end);
			put32(o + 8, path - old_end);
		}
		if (l != OLD) {
			put32(n, ents[i].flags);
			put32(n + 4, name - hdr);
			put32(n + 8, path - hdr);
		}
	}
	return at;
}

struct hits {
	int n;
	const char *paths[8];
};

static int collect(const char *path, void *ctx)
{
	struct hits *h = ctx;

	if (h->n < 8)
		h->paths[h->n] = path;
	h->n++;
	return 0;
}

static void check_entries(const uint8_t *img, size_t len, const char *what)
{
	struct hits h = {};
	struct ldcache *c;

	if (!ASSERT_EQ(ldcache__parse(img, len, &c), 0, what))
		return;
	ASSERT_EQ(ldcache__count(c), NENTS, what);
	ldcache__lookup(c, "libcuda.so.1", collect, &h);
	/* x86-64 entries only, in the cache's order */
	ASSERT_EQ(h.n, 2, what);
	ASSERT_STREQ(h.paths[0], ents[0].path, what);
	ASSERT_STREQ(h.paths[1], ents[1].path, what);
	h.n = 0;
	ldcache__lookup(c, "libcudart.so.1[1-3]*", collect, &h);
	ASSERT_EQ(h.n, 1, what);
	ASSERT_STREQ(h.paths[0], ents[3].path, what);
	h.n = 0;
	ldcache__lookup(c, "libnothere.so", collect, &h);
	ASSERT_EQ(h.n, 0, what);
	ldcache__free(c);
}

/* Every prefix and every single-byte change of img: refused, or read in bounds. */
static void check_hostile(const uint8_t *img, size_t len, const char *what)
{
	uint8_t *copy = malloc(len);
	int accepted = 0, refused = 0;

	for (size_t n = 0; n < len; n++) {
		struct ldcache *c;

		if (ldcache__parse(img, n, &c)) {
			refused++;
			continue;
		}
		accepted++;
		/* a prefix that parses has every string inside it */
		for (size_t i = 0; i < ldcache__count(c); i++) {
			const char *name, *path;

			ldcache__entry(c, i, &name, &path);
			ASSERT_TRUE(strlen(name) < n && strlen(path) < n, what);
		}
		ldcache__free(c);
	}
	ASSERT_EQ(accepted + refused, len, what);
	ASSERT_TRUE(refused > 0, what);
	for (size_t i = 0; i < len && i < 256; i++) {
		static const uint8_t vals[] = {0x00, 0xff, 0x7f, 0x80};

		for (size_t v = 0; v < sizeof(vals); v++) {
			struct ldcache *c;

			memcpy(copy, img, len);
			copy[i] = vals[v];
			if (!ldcache__parse(copy, len, &c))
				ldcache__free(c);
		}
	}
	free(copy);
}

static void check_built(void)
{
	static uint8_t img[4096];
	size_t len;

	len = build(img, OLD);
	check_entries(img, len, "old layout");
	check_hostile(img, len, "old layout, damaged");
	len = build(img, COMPAT);
	check_entries(img, len, "compat layout");
	check_hostile(img, len, "compat layout, damaged");
	len = build(img, NEW);
	check_entries(img, len, "new layout");
	check_hostile(img, len, "new layout, damaged");
	/* a count that would run past the end */
	put32(img + 20, UINT32_MAX);
	ASSERT_EQ(ldcache__parse(img, len, &(struct ldcache *){NULL}), -EINVAL, "huge count");
	/* a string offset past the end */
	build(img, NEW);
	put32(img + 48 + 4, len);
	ASSERT_EQ(ldcache__parse(img, len, &(struct ldcache *){NULL}), -EINVAL, "bad offset");
	/* the last string without its NUL */
	build(img, NEW);
	ASSERT_EQ(ldcache__parse(img, len - 1, &(struct ldcache *){NULL}), -EINVAL, "unterminated");
	ASSERT_EQ(ldcache__parse("nonsense", 8, &(struct ldcache *){NULL}), -EINVAL, "magic");
}

struct find_path {
	const char *path;
	int found;
};

static int match_path(const char *path, void *ctx)
{
	struct find_path *f = ctx;

	f->found |= !strcmp(path, f->path);
	return 0;
}

/*
 * The host's trusted directories cached by ldconfig in one layout: every
 * line `ldconfig -p` prints of it is an entry found by lookup.
 */
static void check_ldconfig(const char *format, const char *dir)
{
	char cache[4096], conf[4096], cmd[16384], line[8192], what[64];
	struct ldcache *c = NULL;
	size_t lines = 0, x86 = 0, found = 0;
	FILE *f, *p;
	long size;
	void *img;

	snprintf(what, sizeof(what), "ldconfig -c %s", format);
	snprintf(cache, sizeof(cache), "%s/ld.so.cache.%s", dir, format);
	snprintf(conf, sizeof(conf), "%s/ld.so.conf", dir);
	snprintf(cmd, sizeof(cmd), "ldconfig -X -c %s -f %s -C %s", format, conf, cache);
	if (!ASSERT_EQ(system(cmd), 0, what))
		return;
	f = fopen(cache, "rb");
	if (!ASSERT_TRUE(f != NULL, what))
		return;
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	img = malloc(size);
	ASSERT_EQ(fread(img, 1, size, f), size, what);
	fclose(f);
	if (!ASSERT_EQ(ldcache__parse(img, size, &c), 0, what))
		goto cleanup;
	snprintf(cmd, sizeof(cmd), "ldconfig -p -C %s", cache);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p)) {
		char name[4096], path[4096];
		struct find_path fp = {path};

		if (sscanf(line, " %4095s (%*[^)]) => %4095s", name, path) != 2)
			continue;
		lines++;
		if (!strstr(line, "x86-64"))
			continue;
		x86++;
		ldcache__lookup(c, name, match_path, &fp);
		found += fp.found;
	}
	if (p)
		pclose(p);
	ASSERT_EQ(lines, ldcache__count(c), what);
	ASSERT_TRUE(x86 > 10, what);
	ASSERT_EQ(found, x86, what);
	printf("%s: %zu entries, %zu x86-64, all found\n", what, ldcache__count(c), x86);
cleanup:
	ldcache__free(c);
	free(img);
	unlink(cache);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[4096], conf[4200];
	FILE *f;

	check_built();
	snprintf(dir, sizeof(dir), "%s/ptg-ldcache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (access("/sbin/ldconfig", X_OK) || !mkdtemp(dir)) {
		printf("no ldconfig: the layouts it writes are not checked\n");
		return TEST_DONE();
	}
	/* no extra directories: the host's trusted ones are cached anyway */
	snprintf(conf, sizeof(conf), "%s/ld.so.conf", dir);
	f = fopen(conf, "w");
	if (f)
		fclose(f);
	check_ldconfig("old", dir);
	check_ldconfig("compat", dir);
	check_ldconfig("new", dir);
	unlink(conf);
	rmdir(dir);
	return TEST_DONE();
}
