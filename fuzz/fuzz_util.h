/* SPDX-License-Identifier: MIT */
/*
 * What the harnesses share. The readers under test take paths, not buffers,
 * so every input goes to a file first: in a directory of this process's own
 * (mkdtemp, 0700), so that nobody can swap a file or a symlink in between.
 * A header of static functions, not a .c: every fuzz/fuzz_*.c is a harness.
 */
#ifndef PTG_FUZZ_UTIL_H
#define PTG_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_MAX_FILES 4

static char fuzz_dir[4096];
static char fuzz_files[FUZZ_MAX_FILES][4096 + 32];
static int fuzz_nfiles;

static void fuzz_cleanup(void)
{
	for (int i = 0; i < fuzz_nfiles; i++)
		unlink(fuzz_files[i]);
	if (fuzz_dir[0])
		rmdir(fuzz_dir);
}

/* Aborts: a harness that cannot write its input would test nothing. */
static void fuzz_die(const char *what)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
	abort();
}

/* The path of file `name` in the private directory (made on first use). */
static const char *fuzz_path(const char *name)
{
	const char *tmp = getenv("TMPDIR");
	int i;

	if (!fuzz_dir[0]) {
		snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/ptg-fuzz-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(fuzz_dir))
			fuzz_die(fuzz_dir);
		atexit(fuzz_cleanup);
	}
	for (i = 0; i < fuzz_nfiles; i++) {
		if (!strcmp(strrchr(fuzz_files[i], '/') + 1, name))
			return fuzz_files[i];
	}
	if (fuzz_nfiles == FUZZ_MAX_FILES) {
		errno = ENOSPC;
		fuzz_die(name);
	}
	snprintf(fuzz_files[fuzz_nfiles], sizeof(fuzz_files[0]), "%s/%s", fuzz_dir, name);
	return fuzz_files[fuzz_nfiles++];
}

/* Writes the input to file `name` of the private directory; returns its path. */
static const char *fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	const char *path = fuzz_path(name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		fuzz_die(path);
	while (size) {
		ssize_t n = write(fd, data, size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fuzz_die(path);
		data += n;
		size -= n;
	}
	if (close(fd))
		fuzz_die(path);
	return path;
}

#endif /* PTG_FUZZ_UTIL_H */
