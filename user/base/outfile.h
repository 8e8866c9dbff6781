/* SPDX-License-Identifier: MIT */
/*
 * Output files, written the one safe way for a tool that runs as root in
 * directories other users can write. The data goes to a new file created
 * beside the destination (O_EXCL, O_NOFOLLOW, mode 0600) and is renamed over
 * the destination once complete and synced: a symlink planted at the
 * destination is replaced, never followed; a reader never sees half a file;
 * and a failure leaves whatever was at the destination before as it was.
 *
 * The functions print nothing: callers say what failed with their own prefix.
 */
#ifndef PTG_OUTFILE_H
#define PTG_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct outfile;

/* Creates the temporary file for path. Returns 0 or a negative errno. */
int outfile__open(const char *path, struct outfile **out);
/* The temporary file's descriptor, owned by of: not to be closed. */
int outfile__fd(const struct outfile *of);
/* A stdio stream on it, owned by of (at most one; NULL and errno when out of memory). */
FILE *outfile__stream(struct outfile *of);
/* Writes all of buf at the current position. Returns 0 or a negative errno. */
int outfile__write(struct outfile *of, const void *buf, size_t len);
/*
 * Flushes the stream, syncs the file and renames it over the destination.
 * Frees of; on failure the temporary file is removed. Returns 0 or a negative
 * errno.
 */
int outfile__commit(struct outfile *of);
/* Removes the temporary file and frees of. Accepts NULL. */
void outfile__abort(struct outfile *of);

/*
 * Finds a temporary file of path's name (.NAME.<random>.tmp, a regular file
 * of this user) beside it and puts its path in buf: true when there is one.
 * A writer killed before its rename leaves one behind; a live writer of the
 * same name has one too, and nothing tells the two apart, so callers only
 * say so and never remove it.
 */
bool outfile_leftover(const char *path, char *buf, size_t len);

/*
 * Whether writing out would replace the file in names: the same inode, out
 * itself not followed when it is a symlink (replacing the link leaves its
 * target alone).
 */
bool outfile_is_input(const char *out, const char *in);

#endif /* PTG_OUTFILE_H */
