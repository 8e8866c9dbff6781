// SPDX-License-Identifier: MIT
/*
 * The Chrome exporter's events in their order: metadata first, then by
 * start, longer first, then as they were made. A span is made when it
 * closes, so an event can come long after those it must precede (a
 * program's outermost frame is made last and written first), and the order
 * needs all of them. They are kept in memory up to run_bytes; then that run
 * is sorted and written to a spill file beside the output, and at the end
 * the runs are merged, each read through a small window. Memory stays
 * bounded whatever the length of the trace, and a trace whose events fit in
 * one run (most) never touches the disk. The order is total (the sequence
 * number ends every tie), so the merge writes the bytes one sort would.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "chrome/chrome_export.h"

#define SPILL_FLUSH_AT (256 * 1024)
/* the windows of all runs together, while merging; each between the two below */
#define MERGE_BYTES (16u << 20)
#define WINDOW_MIN  (4u << 10)
#define WINDOW_MAX  (256u << 10)
#define MERGE_FANIN (MERGE_BYTES / WINDOW_MIN)

struct chrome_spill {
	int fd;
	struct buf w; /* bytes not yet written to fd */
	off_t size;   /* fd's bytes and w's */
	off_t *runs;  /* where each run starts; one ends where the next starts */
	size_t nruns, runs_cap;
};

/* One run while merging: its next bytes in a window, its next event's key in k. */
struct run_reader {
	off_t next, end; /* file offset of what the window reads next; the run's end */
	uint8_t *win;
	size_t lo, hi, cap;
	struct cevent_key k;
};

/* Metadata first, then by start, longer first, then in the order they were made. */
static int key_cmp(const struct cevent_key *a, const struct cevent_key *b)
{
	if (a->meta != b->meta)
		return a->meta ? -1 : 1;
	if (!a->meta && a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (!a->meta && a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return (a->seq > b->seq) - (a->seq < b->seq);
}

static int cmp_cevent(const void *a, const void *b)
{
	return key_cmp(&((const struct cevent *)a)->k, &((const struct cevent *)b)->k);
}

/* Sorts the events of c->b; they lie back to back, each ending where the next made begins. */
static void sort_run(struct chrome *c)
{
	size_t i;

	for (i = 0; i < c->nevs; i++)
		c->evs[i].end = i + 1 < c->nevs ? c->evs[i + 1].off : c->b.len;
	array_sort(c->evs, c->nevs, sizeof(*c->evs), cmp_cevent);
}

/*
 * A file of no name in the output's directory (the output needs that room
 * anyway), else one unlinked at once.
 */
static int spill_open(const char *out_path)
{
	const char *slash = strrchr(out_path, '/');
	char dir[4096], tmpl[4096 + 32];
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == out_path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - out_path), out_path);
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	snprintf(tmpl, sizeof(tmpl), "%s/.ptg-chrome-XXXXXX", dir);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(tmpl);
	return fd;
}

static int spill_flush(struct chrome *c)
{
	struct chrome_spill *s = c->spill;
	size_t done = 0;
	ssize_t n;

	if (s->w.err)
		return s->w.err;
	while (done < s->w.len) {
		n = write(s->fd, s->w.data + done, s->w.len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;

			pr_err("chrome: spill file beside %s: %s", c->path, strerror(-err));
			return s->w.err = err;
		}
		done += (size_t)n;
	}
	buf__reset(&s->w);
	return 0;
}

static int spill_new(struct chrome *c)
{
	struct chrome_spill *s = calloc(1, sizeof(*s));
	int fd;

	if (!s)
		return -ENOMEM;
	fd = spill_open(c->path);
	if (fd < 0) {
		pr_err("chrome: no spill file beside %s: %s", c->path, strerror(-fd));
		free(s);
		return fd;
	}
	s->fd = fd;
	c->spill = s;
	return 0;
}

/* Writes the events of c->b sorted, as one run of (key, bytes), and empties c->b. */
static int spill_run(struct chrome *c)
{
	struct chrome_spill *s;
	size_t i;
	int err;

	if (!c->spill && (err = spill_new(c)))
		return err;
	s = c->spill;
	if (array_grow((void **)&s->runs, &s->runs_cap, s->nruns + 1, sizeof(*s->runs)))
		return -ENOMEM;
	s->runs[s->nruns++] = s->size;
	sort_run(c);
	for (i = 0; i < c->nevs; i++) {
		struct cevent *e = &c->evs[i];

		/* 32 bits: an event of 4 GiB would need a record (an args blob) as big */
		e->k.len = (uint32_t)(e->end - e->off);
		jb_put(&s->w, &e->k, sizeof(e->k));
		jb_put(&s->w, c->b.data + e->off, e->k.len);
		s->size += (off_t)(sizeof(e->k) + e->k.len);
		if (s->w.len >= SPILL_FLUSH_AT && (err = spill_flush(c)))
			return err;
	}
	buf__reset(&c->b);
	c->nevs = 0;
	return spill_flush(c);
}

void chrome_run_check(struct chrome *c)
{
	int err;

	if (c->b.err || c->b.len < c->run_bytes)
		return;
	err = spill_run(c);
	if (err)
		c->b.err = err;
}

/* What comes before the event after n others in traceEvents. */
static void separate(struct buf *b, uint64_t n)
{
	if (n)
		jb_lit(b, ",\n  ");
	else
		jb_lit(b, "\n  ");
}

/* The events of c->b, sorted, to the output. */
static int write_memory(struct chrome *c)
{
	struct buf events = c->b;
	size_t i;
	int err = 0;

	sort_run(c);
	c->b = (struct buf){};
	for (i = 0; i < c->nevs && !err; i++) {
		separate(&c->b, i);
		jb_put(&c->b, events.data + c->evs[i].off, c->evs[i].end - c->evs[i].off);
		if (c->b.len >= CHROME_FLUSH_AT)
			err = chrome_out_flush(c);
	}
	buf__free(&events);
	return err ?: c->b.err;
}

/* Moves the window's unread bytes to its start and reads what follows them. */
static int rr_fill(const struct chrome_spill *s, struct run_reader *rr)
{
	size_t left = rr->hi - rr->lo, want;
	ssize_t n;

	memmove(rr->win, rr->win + rr->lo, left);
	rr->lo = 0;
	rr->hi = left;
	want = rr->cap - left;
	if ((off_t)want > rr->end - rr->next)
		want = (size_t)(rr->end - rr->next);
	do {
		/* want 0: a run cut short, which a spill file written whole has not */
		n = want ? pread(s->fd, rr->win + rr->hi, want, rr->next) : 0;
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		int err = n < 0 ? -errno : -EIO;

		pr_err("chrome: spill file: %s", strerror(-err));
		return err;
	}
	rr->hi += (size_t)n;
	rr->next += n;
	return 0;
}

/* Writes what of to is due: to is the output's buffer or the spill file's. */
static int to_flush(struct chrome *c, struct buf *to)
{
	if (to == &c->b)
		return to->len >= CHROME_FLUSH_AT ? chrome_out_flush(c) : 0;
	return to->len >= SPILL_FLUSH_AT ? spill_flush(c) : 0;
}

/* n bytes of the run to dst, or appended to to when dst is NULL. */
static int rr_read(struct chrome *c, struct run_reader *rr, void *dst, struct buf *to, size_t n)
{
	size_t k;
	int err;

	while (n) {
		if (rr->lo == rr->hi && (err = rr_fill(c->spill, rr)))
			return err;
		k = rr->hi - rr->lo < n ? rr->hi - rr->lo : n;
		if (dst) {
			memcpy(dst, rr->win + rr->lo, k);
			dst = (uint8_t *)dst + k;
		} else {
			jb_put(to, rr->win + rr->lo, k);
			if (to->err || (err = to_flush(c, to)))
				return to->err ?: err;
		}
		rr->lo += k;
		n -= k;
	}
	return 0;
}

/* Whether the run has another event; its key in rr->k. */
static int rr_head(struct chrome *c, struct run_reader *rr, bool *more)
{
	*more = rr->lo < rr->hi || rr->next < rr->end;
	return *more ? rr_read(c, rr, &rr->k, NULL, sizeof(rr->k)) : 0;
}

/* Restores the heap of runs (by their next event) below position i. */
static void sift_down(struct run_reader **h, size_t n, size_t i)
{
	for (;;) {
		size_t m = i, l = 2 * i + 1, r = l + 1;
		struct run_reader *t;

		if (l < n && key_cmp(&h[l]->k, &h[m]->k) < 0)
			m = l;
		if (r < n && key_cmp(&h[r]->k, &h[m]->k) < 0)
			m = r;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* The next event of the heap's first run: to the output, or with its key to a new run. */
static int merge_one(struct chrome *c, struct run_reader *rr, bool to_spill, uint64_t *written)
{
	struct buf *to = to_spill ? &c->spill->w : &c->b;

	if (to_spill) {
		jb_put(to, &rr->k, sizeof(rr->k));
		c->spill->size += (off_t)(sizeof(rr->k) + rr->k.len);
	} else {
		separate(to, *written);
	}
	(*written)++;
	return to->err ?: rr_read(c, rr, NULL, to, rr->k.len);
}

/* Merges runs [first, first + n) to the output, or to a new run at the end of the spill file. */
static int merge_runs(struct chrome *c, size_t first, size_t nr, bool to_spill)
{
	struct chrome_spill *s = c->spill;
	struct run_reader *rrs = calloc(nr, sizeof(*rrs)), **heap = calloc(nr, sizeof(*heap));
	size_t i, n = 0, cap = MERGE_BYTES / nr;
	uint64_t written = 0;
	bool more;
	int err = rrs && heap ? 0 : -ENOMEM;

	cap = cap < WINDOW_MIN ? WINDOW_MIN : cap > WINDOW_MAX ? WINDOW_MAX : cap;
	for (i = 0; i < nr && !err; i++) {
		struct run_reader *rr = &rrs[i];

		rr->next = s->runs[first + i];
		rr->end = first + i + 1 < s->nruns ? s->runs[first + i + 1] : s->size;
		rr->cap = cap;
		rr->win = malloc(cap);
		err = rr->win ? rr_head(c, rr, &more) : -ENOMEM;
		if (!err && more)
			heap[n++] = rr;
	}
	if (!err && to_spill &&
	    array_grow((void **)&s->runs, &s->runs_cap, s->nruns + 1, sizeof(*s->runs)))
		err = -ENOMEM;
	if (!err && to_spill)
		s->runs[s->nruns++] = s->size;
	for (i = n; i-- > 0;)
		sift_down(heap, n, i);
	while (n && !err) {
		err = merge_one(c, heap[0], to_spill, &written) ?: rr_head(c, heap[0], &more);
		if (!more)
			heap[0] = heap[--n];
		sift_down(heap, n, 0);
	}
	for (i = 0; rrs && i < nr; i++)
		free(rrs[i].win);
	free(rrs);
	free(heap);
	if (!err && to_spill)
		err = spill_flush(c);
	return err ?: c->b.err;
}

int chrome_write_events(struct chrome *c)
{
	size_t first = 0;
	int err;

	if (!c->spill)
		return write_memory(c);
	if ((err = spill_run(c)))
		return err;
	/* the last run is on disk too: the memory that held it is the windows' now */
	buf__free(&c->b);
	free(c->evs);
	c->evs = NULL;
	c->evs_cap = 0;
	/* more runs than windows of WINDOW_MIN fit in MERGE_BYTES: merged by groups into longer */
	while (!err && c->spill->nruns - first > MERGE_FANIN) {
		err = merge_runs(c, first, MERGE_FANIN, true);
		first += MERGE_FANIN;
	}
	return err ?: merge_runs(c, first, c->spill->nruns - first, false);
}

void chrome_spill_free(struct chrome_spill *s)
{
	if (!s)
		return;
	close(s->fd);
	buf__free(&s->w);
	free(s->runs);
	free(s);
}
