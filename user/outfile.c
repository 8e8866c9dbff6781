// SPDX-License-Identifier: MIT
/* Output files through a new temporary file renamed into place (outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* tries at a fresh random name before giving up: another file took each one */
#define OUTFILE_TRIES 64

struct outfile {
	int dirfd;
	int fd;
	FILE *f;    /* when a stream was asked for: it owns fd */
	char *base; /* the destination's name in dirfd */
	char tmp[NAME_MAX + 1];
};

/* Splits path into its directory, opened, and the last name. */
static int open_dir(const char *path, struct outfile *of)
{
	const char *slash = strrchr(path, '/');
	char *dir;

	if (!*path)
		return -ENOENT;
	if (slash && !slash[1])
		return -EISDIR;
	of->base = strdup(slash ? slash + 1 : path);
	dir = slash ? strndup(path, slash == path ? 1 : slash - path) : strdup(".");
	if (!of->base || !dir) {
		free(dir);
		return -ENOMEM;
	}
	of->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return of->dirfd < 0 ? -errno : 0;
}

static int create_tmp(struct outfile *of)
{
	uint64_t rnd;
	int i;

	for (i = 0; i < OUTFILE_TRIES; i++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -errno;
		/* hidden, and short enough for NAME_MAX whatever the destination's length */
		snprintf(of->tmp, sizeof(of->tmp), ".%.200s.%016" PRIx64 ".tmp", of->base, rnd);
		of->fd = openat(of->dirfd, of->tmp,
				O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (of->fd >= 0)
			return 0;
		if (errno != EEXIST)
			break;
	}
	of->tmp[0] = '\0';
	return -errno;
}

int outfile__open(const char *path, struct outfile **out)
{
	struct outfile *of = calloc(1, sizeof(*of));
	struct stat st;
	int err;

	if (!of)
		return -ENOMEM;
	of->dirfd = -1;
	of->fd = -1;
	err = open_dir(path, of);
	/* a directory is only found by the final rename: say so before the work */
	if (!err && !fstatat(of->dirfd, of->base, &st, AT_SYMLINK_NOFOLLOW) && S_ISDIR(st.st_mode))
		err = -EISDIR;
	if (!err)
		err = create_tmp(of);
	if (err) {
		outfile__abort(of);
		return err;
	}
	*out = of;
	return 0;
}

int outfile__fd(const struct outfile *of)
{
	return of->fd;
}

FILE *outfile__stream(struct outfile *of)
{
	if (!of->f)
		of->f = fdopen(of->fd, "w");
	return of->f;
}

int outfile__write(struct outfile *of, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(of->fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* Closes the file, stream or descriptor; Linux frees the descriptor even when close fails. */
static int close_file(struct outfile *of)
{
	int rc;

	if (of->f) {
		rc = fclose(of->f);
		of->f = NULL;
	} else if (of->fd >= 0) {
		rc = close(of->fd);
	} else {
		return 0;
	}
	of->fd = -1;
	return rc ? -(errno ? errno : EIO) : 0;
}

int outfile__commit(struct outfile *of)
{
	int err = 0, cerr;

	if (of->f && (fflush(of->f) || ferror(of->f)))
		err = -(errno ? errno : EIO);
	/* the rename must not reach the disk before the data it names */
	if (!err && fsync(of->fd))
		err = -errno;
	cerr = close_file(of);
	err = err ?: cerr;
	if (!err && renameat(of->dirfd, of->tmp, of->dirfd, of->base))
		err = -errno;
	if (!err) {
		of->tmp[0] = '\0';
		/* durability of the name only: the file is complete either way */
		fsync(of->dirfd);
	}
	outfile__abort(of);
	return err;
}

void outfile__abort(struct outfile *of)
{
	if (!of)
		return;
	close_file(of);
	if (of->tmp[0])
		unlinkat(of->dirfd, of->tmp, 0);
	if (of->dirfd >= 0)
		close(of->dirfd);
	free(of->base);
	free(of);
}

bool outfile_is_input(const char *out, const char *in)
{
	struct stat so, si;

	if (lstat(out, &so) || stat(in, &si))
		return false;
	return so.st_dev == si.st_dev && so.st_ino == si.st_ino;
}
