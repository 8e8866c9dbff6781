// SPDX-License-Identifier: MIT
/* Output files through a new temporary file renamed into place (outfile.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/outfile.h"

/* tries at a fresh random name before giving up: another file took each one */
#define OUTFILE_TRIES 64
/* the destination's name as the temporary file's name holds it */
#define TMP_BASE_MAX 200
#define TMP_RND_LEN  16

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
		snprintf(of->tmp, sizeof(of->tmp), ".%.*s.%0*" PRIx64 ".tmp", TMP_BASE_MAX,
			 of->base, TMP_RND_LEN, rnd);
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

/* Whether name is what create_tmp() makes for base: .BASE.<16 hex digits>.tmp */
static bool is_tmp_of(const char *name, const char *base)
{
	size_t blen = strnlen(base, TMP_BASE_MAX);
	const char *rnd;

	if (name[0] != '.' || strncmp(name + 1, base, blen) || name[1 + blen] != '.')
		return false;
	rnd = name + 2 + blen;
	if (strlen(rnd) != TMP_RND_LEN + 4 || strcmp(rnd + TMP_RND_LEN, ".tmp"))
		return false;
	for (int i = 0; i < TMP_RND_LEN; i++) {
		if (!strchr("0123456789abcdef", rnd[i]))
			return false;
	}
	return true;
}

bool outfile_leftover(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	struct outfile of = {.dirfd = -1};
	struct dirent *de = NULL;
	struct stat st;
	DIR *d;

	if (open_dir(path, &of) || !(d = fdopendir(of.dirfd))) {
		if (of.dirfd >= 0)
			close(of.dirfd);
		free(of.base);
		return false;
	}
	while ((de = readdir(d))) {
		/* another user's file of that name is not ours to mention */
		if (is_tmp_of(de->d_name, of.base) &&
		    !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
			snprintf(buf, len, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path,
				 de->d_name);
			break;
		}
	}
	closedir(d); /* and of.dirfd with it */
	free(of.base);
	return de != NULL;
}

bool outfile_is_input(const char *out, const char *in)
{
	struct stat so, si;

	if (lstat(out, &so) || stat(in, &si))
		return false;
	return so.st_dev == si.st_dev && so.st_ino == si.st_ino;
}
