// SPDX-License-Identifier: MIT
/*
 * The events of the Chrome trace as they are made, for chrome.c (records)
 * and chrome_tracks.c (metadata) alike: each indexed for the sort
 * (chrome_sort.c), its pid, tid and ts, its end; symbols' names; the
 * output buffer written out.
 */
#include <errno.h>
#include <string.h>

#include <zlib.h>

#include "base/array.h"
#include "base/log.h"
#include "chrome/chrome_export.h"

int chrome_out_flush(struct chrome *c)
{
	if (c->b.err)
		return c->b.err;
	if (c->b.len && gzwrite(c->gz, c->b.data, c->b.len) != (int)c->b.len) {
		int errnum;

		pr_err("chrome: %s: %s", c->path, gzerror(c->gz, &errnum));
		return -EIO;
	}
	buf__reset(&c->b);
	return 0;
}

const char *chrome_sym_name(const struct chrome *c, uint32_t id)
{
	const struct ptg_sym *s = trace_reader__sym(c->r, id);

	return s ? s->name : "";
}

/* Indexes the event that starts at the end of c->b. */
void chrome_ev_new(struct chrome *c, bool meta)
{
	struct cevent *e;

	if (c->b.err)
		return;
	if (array_grow((void **)&c->evs, &c->evs_cap, c->nevs + 1, sizeof(*c->evs))) {
		c->b.err = -ENOMEM;
		return;
	}
	e = &c->evs[c->nevs];
	*e = (struct cevent){.off = c->b.len, .k = {.seq = c->nseq, .meta = meta}};
	c->nevs++;
	c->nseq++;
}

void chrome_ev_where(struct chrome *c, uint32_t pid, uint32_t tid, uint64_t ts)
{
	jb_lit(&c->b, ", \"pid\": ");
	jb_int(&c->b, (int32_t)pid);
	jb_lit(&c->b, ", \"tid\": ");
	jb_int(&c->b, (int32_t)tid);
	jb_lit(&c->b, ", \"ts\": ");
	jb_us(&c->b, ts);
	if (c->nevs)
		c->evs[c->nevs - 1].k.ts = ts;
}

/*
 * The members of an args blob (kineto_args.h) after those written, for a
 * record imported with one: its Kineto args and unknown keys as they came.
 */
void chrome_ev_extra(struct chrome *c, const char *blob)
{
	size_t n = blob ? strlen(blob) : 0;

	/* "{}" has none; the blob is an object, so its members lie between the braces */
	if (n > 2 && blob[0] == '{' && blob[n - 1] == '}') {
		jb_lit(&c->b, ", ");
		buf__put(&c->b, blob + 1, n - 2);
	}
}

void chrome_ev_end(struct chrome *c, struct jargs *a, const char *blob)
{
	if (a->open)
		jb_lit(&c->b, "}");
	chrome_ev_extra(c, blob);
	jb_lit(&c->b, "}");
}
