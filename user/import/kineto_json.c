// SPDX-License-Identifier: MIT
/*
 * The bounded JSON reader of the Kineto importer (see kineto_json.h and the
 * IMPORT_* bounds below).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "base/log.h"
#include "import/kineto_json.h"

/*
 * What one import may read. A JSON value (a string, a number) longer than
 * VALUE_MAX is no trace's: json-c would buffer it whole. A gzip file that
 * inflates past INFLATE_FLOOR and more than INFLATE_RATIO times its own size
 * is a bomb: Kineto's JSON compresses 5 to 20 times, deflate at most ~1000.
 * The document is held whole, a few times the size of its text: no more
 * than TEXT_MAX of text, whatever the file.
 */
#define IMPORT_VALUE_MAX     (16u << 20)
#define IMPORT_INFLATE_FLOOR (64ull << 20)
#define IMPORT_INFLATE_RATIO 200
#define IMPORT_TEXT_MAX	     (4ull << 30)
#define IMPORT_CHUNK	     (256u << 10)

/* JSON text fed to json-c piece by piece, with the bounds above checked on the way. */
struct json_feed {
	const char *name;
	json_tokener *tok;
	json_object *root;
	uint64_t off;	/* bytes fed so far */
	uint64_t limit; /* the most bytes the input may have */
	uint64_t run;	/* bytes since the last structural character outside a string */
	bool in_str, esc;
};

/* false when a value runs past IMPORT_VALUE_MAX */
static bool feed_scan(struct json_feed *f, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (f->esc) {
			f->esc = false;
		} else if (f->in_str) {
			f->esc = c == '\\';
			f->in_str = c != '"';
		} else if (c == '"') {
			f->in_str = true;
		} else if (c && strchr("{}[],: \t\r\n", c)) {
			/* whitespace too: json-c skips it, a run of it holds no memory */
			f->run = 0;
			continue;
		}
		if (++f->run > IMPORT_VALUE_MAX)
			return false;
	}
	return true;
}

/* Returns 1 when the document is complete, 0 for more, or a negative errno after saying why. */
static int json_feed__add(struct json_feed *f, const char *p, size_t n)
{
	enum json_tokener_error jerr;

	if (f->off + n > f->limit && f->limit == IMPORT_TEXT_MAX) {
		pr_err("import: %s: more than %llu MiB of JSON: too large to import "
		       "whole",
		       f->name, IMPORT_TEXT_MAX >> 20);
		return -EFBIG;
	}
	if (f->off + n > f->limit) {
		pr_err("import: %s: inflates to over %" PRIu64 " MiB, %d times its "
		       "size: a gzip bomb, not a trace",
		       f->name, f->limit >> 20, IMPORT_INFLATE_RATIO);
		return -EINVAL;
	}
	if (!feed_scan(f, p, n)) {
		pr_err("import: %s: a JSON value longer than %u MiB near byte %" PRIu64
		       ": not a trace",
		       f->name, IMPORT_VALUE_MAX >> 20, f->off);
		return -EINVAL;
	}
	f->root = json_tokener_parse_ex(f->tok, p, (int)n);
	jerr = json_tokener_get_error(f->tok);
	f->off += n;
	if (jerr == json_tokener_continue)
		return 0;
	if (jerr == json_tokener_success && f->root)
		return 1;
	pr_err("import: %s: malformed JSON near byte %" PRIu64 ": %s", f->name,
	       f->off - n + json_tokener_get_parse_end(f->tok), json_tokener_error_desc(jerr));
	return -EINVAL;
}

/* The document fed so far, or NULL after saying why (it ended early). */
static json_object *json_feed__end(struct json_feed *f, int ret)
{
	json_object *root = NULL;

	if (ret == 1) {
		root = f->root;
		f->root = NULL;
	} else if (ret == 0) {
		pr_err("import: %s: malformed JSON: unexpected end of file", f->name);
	}
	json_object_put(f->root);
	json_tokener_free(f->tok);
	return root;
}

static int json_feed__init(struct json_feed *f, const char *name, uint64_t limit)
{
	*f = (struct json_feed){.name = name, .limit = limit};
	f->tok = json_tokener_new_ex(128);
	if (!f->tok) {
		pr_err("import: %s: out of memory", name);
		return -ENOMEM;
	}
	return 0;
}

json_object *kineto_json_parse(const char *json, size_t len, const char *name)
{
	struct json_feed f;
	size_t off = 0, n;
	int ret = 0;

	if (json_feed__init(&f, name, len))
		return NULL;
	while (off < len && ret == 0) {
		n = len - off < IMPORT_CHUNK ? len - off : IMPORT_CHUNK;
		ret = json_feed__add(&f, json + off, n);
		off += n;
	}
	return json_feed__end(&f, ret);
}

/*
 * Parses the file chunk by chunk as gzread() inflates it (zlib reads plain
 * files as they are), so that only the document, never the text, is held.
 */
int kineto_json_parse_file(const char *path, json_object **root)
{
	char *buf = malloc(IMPORT_CHUNK);
	uint64_t limit = IMPORT_INFLATE_FLOOR;
	struct json_feed f = {};
	gzFile gz = NULL;
	struct stat st;
	int fd, got = 0, errnum, ret = 0, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	if ((uint64_t)st.st_size * IMPORT_INFLATE_RATIO > limit)
		limit = (uint64_t)st.st_size * IMPORT_INFLATE_RATIO;
	if (limit > IMPORT_TEXT_MAX)
		limit = IMPORT_TEXT_MAX;
	gz = gzdopen(fd, "rb");
	if (gz)
		fd = -1; /* gzclose() closes it */
	if (!gz || !buf) {
		err = -ENOMEM;
		goto fail;
	}
	err = json_feed__init(&f, path, limit);
	if (err)
		goto cleanup;
	while (ret == 0 && (got = gzread(gz, buf, IMPORT_CHUNK)) > 0)
		ret = json_feed__add(&f, buf, (size_t)got);
	if (got < 0) {
		pr_err("import: %s: %s", path, gzerror(gz, &errnum));
		ret = -EIO;
	}
	*root = json_feed__end(&f, ret);
	err = *root ? 0 : ret < 0 ? ret : -EINVAL;
	goto cleanup;
fail:
	pr_err("import: %s: %s", path, strerror(-err));
cleanup:
	if (gz)
		gzclose(gz);
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}
