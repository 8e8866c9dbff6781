// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/ldcache.h"
#include "proc/procopen.h"

#define OLD_MAGIC    "ld.so-1.7.0"
#define NEW_MAGIC    "glibc-ld.so.cache1.1"
#define OLD_HDR_SIZE 16 /* magic (11 bytes, padded to 12), u32 count */
#define OLD_ENTRY    12 /* s32 flags, u32 name, u32 path */
#define NEW_HDR_SIZE 48 /* magic+version (20), count, string size, flags, extension... */
#define NEW_ENTRY    24 /* the old entry, u32 os version, u64 hwcap */
#define FLAG_TYPE    0x00ff
#define FLAG_LIBC6   0x0003
#define FLAG_ARCH    0xff00
#define FLAG_X86_64  0x0300

struct ldcache_entry {
	int32_t flags;
	const char *name;
	const char *path;
};

struct ldcache {
	char *data;
	size_t nentries;
	struct ldcache_entry *entries;
};

static uint32_t get_u32(const char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v)); /* the image need not be aligned in memory */
	return v;
}

/* The NUL-terminated string at base + off, or NULL when it leaves the image. */
static const char *string_at(const struct ldcache *c, size_t len, size_t base, uint32_t off)
{
	const char *s;

	if (base > len || off >= len - base)
		return NULL;
	s = c->data + base + off;
	return memchr(s, '\0', len - base - off) ? s : NULL;
}

/*
 * Reads count entries of entsize bytes at entries, whose strings are at
 * offsets from strbase (the end of the old table; the new header's start).
 */
static int read_entries(struct ldcache *c, size_t len, size_t entries, size_t entsize,
			uint32_t count, size_t strbase)
{
	if (entries > len || count > (len - entries) / entsize)
		return -EINVAL;
	c->entries = calloc(count ?: 1, sizeof(*c->entries));
	if (!c->entries)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		const char *e = c->data + entries + (size_t)i * entsize;
		struct ldcache_entry *out = &c->entries[i];

		out->flags = (int32_t)get_u32(e);
		out->name = string_at(c, len, strbase, get_u32(e + 4));
		out->path = string_at(c, len, strbase, get_u32(e + 8));
		if (!out->name || !out->path)
			return -EINVAL;
	}
	c->nentries = count;
	return 0;
}

static int parse(struct ldcache *c, size_t len)
{
	size_t old_end, new_hdr;
	uint32_t count;

	if (len >= NEW_HDR_SIZE && !memcmp(c->data, NEW_MAGIC, strlen(NEW_MAGIC)))
		return read_entries(c, len, NEW_HDR_SIZE, NEW_ENTRY, get_u32(c->data + 20), 0);
	if (len < OLD_HDR_SIZE || memcmp(c->data, OLD_MAGIC, sizeof(OLD_MAGIC)))
		return -EINVAL;
	count = get_u32(c->data + 12);
	if (count > (len - OLD_HDR_SIZE) / OLD_ENTRY)
		return -EINVAL;
	old_end = OLD_HDR_SIZE + (size_t)count * OLD_ENTRY;
	/* ldconfig -c compat: a new table follows, 8-aligned, and glibc reads that one */
	new_hdr = (old_end + 7) & ~(size_t)7;
	if (new_hdr <= len && len - new_hdr >= NEW_HDR_SIZE &&
	    !memcmp(c->data + new_hdr, NEW_MAGIC, strlen(NEW_MAGIC)))
		return read_entries(c, len, new_hdr + NEW_HDR_SIZE, NEW_ENTRY,
				    get_u32(c->data + new_hdr + 20), new_hdr);
	return read_entries(c, len, OLD_HDR_SIZE, OLD_ENTRY, count, old_end);
}

int ldcache__parse(const void *buf, size_t len, struct ldcache **out)
{
	struct ldcache *c;
	int err;

	if (len > LDCACHE_MAX_SIZE)
		return -EFBIG;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* one byte more, so that an empty image is still an allocation */
	c->data = malloc(len + 1);
	if (!c->data) {
		free(c);
		return -ENOMEM;
	}
	memcpy(c->data, buf, len);
	err = parse(c, len);
	if (err) {
		ldcache__free(c);
		return err;
	}
	*out = c;
	return 0;
}

static int read_all(int fd, char *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = read(fd, buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shrank while read: not the file that was measured */
		done += n;
	}
	return 0;
}

int ldcache__load_target(pid_t pid, struct ldcache **out)
{
	struct stat st;
	char *buf = NULL;
	int pathfd, fd, err;

	/*
	 * Not trusted_open(): the cache is only read, by a parser made for
	 * hostile bytes, and only names files the target's loader would map
	 * anyway; its own loader trusts it whoever wrote it. Resolved inside
	 * the target's root: a container's absolute link (/etc -> /host/etc)
	 * must not lead to ours. Opened O_PATH first: a FIFO or a device put
	 * there is refused before it is opened.
	 */
	pathfd = proc_root_open(pid, "/etc/ld.so.cache", true, false);
	if (pathfd < 0)
		return pathfd == -EPERM ? -EINVAL : pathfd;
	fd = proc_fd_reopen(pathfd);
	close(pathfd);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > LDCACHE_MAX_SIZE) {
		err = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
		goto cleanup;
	}
	buf = malloc(st.st_size + 1);
	if (!buf) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = read_all(fd, buf, st.st_size);
	err = err ?: ldcache__parse(buf, st.st_size, out);
cleanup:
	free(buf);
	close(fd);
	return err;
}

size_t ldcache__count(const struct ldcache *c)
{
	return c->nentries;
}

void ldcache__entry(const struct ldcache *c, size_t i, const char **name, const char **path)
{
	*name = c->entries[i].name;
	*path = c->entries[i].path;
}

int ldcache__lookup(const struct ldcache *c, const char *name,
		    int (*cb)(const char *path, void *ctx), void *ctx)
{
	for (size_t i = 0; i < c->nentries; i++) {
		const struct ldcache_entry *e = &c->entries[i];
		int ret;

		if ((e->flags & FLAG_TYPE) != FLAG_LIBC6 || (e->flags & FLAG_ARCH) != FLAG_X86_64 ||
		    fnmatch(name, e->name, 0))
			continue;
		ret = cb(e->path, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

void ldcache__free(struct ldcache *c)
{
	if (!c)
		return;
	free(c->entries);
	free(c->data);
	free(c);
}
