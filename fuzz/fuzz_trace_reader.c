// SPDX-License-Identifier: MIT
/*
 * The .ptg reader on any bytes: open, metadata, symbols, losses, every
 * record, then the model pass every report makes and, on a trace that reads
 * whole, the reports themselves. A damaged trace must give an error with a
 * reason, never a crash, a leak or a huge allocation.
 *
 * Mutations of a compressed, checksummed chunk almost never get past its
 * checksum, so an input that starts with RAW_MAGIC instead of the file's
 * magic holds its chunks uncompressed (header lengths and checksum ignored):
 * they are compressed as its header's version stores them (zstd from version
 * 3, zlib before) and summed here, and the decoders behind them get fuzzed
 * too. fuzz/seeds/ptg-raw.py turns a .ptg into that form.
 */
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

#include "analysis/cudacalls_report.h"
#include "analysis/idle.h"
#include "analysis/offcpu_report.h"
#include "fuzz_util.h"
#include "model/model.h"
#include "model/profile.h"
#include "chrome/chrome.h"
#include "output/flamegraph_write.h"
#include "output/pstats.h"
#include "trace/trace.h"
#include "trace/trace_format.h"

#define RAW_MAGIC "PTGRAWCK"

/* Appends to a growing buffer; aborts when out of memory. */
static void put(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		*cap = (*len + n) * 2;
		*buf = realloc(*buf, *cap);
		if (!*buf)
			fuzz_die("realloc");
	}
	memcpy(*buf + *len, p, n);
	*len += n;
}

/* RAW_MAGIC form -> a .ptg whose chunks pass their checksums. */
static uint8_t *pack(const uint8_t *data, size_t size, size_t *len)
{
	size_t cap = size + 64, off = PTG_FILE_HDR_LEN;
	uint8_t *out = malloc(cap), *comp;
	bool zstd = get_le32(data + 8) >= 3;

	if (!out)
		fuzz_die("malloc");
	*len = 0;
	put(&out, len, &cap, PTG_FILE_MAGIC, PTG_FILE_MAGIC_LEN);
	put(&out, len, &cap, data + PTG_FILE_MAGIC_LEN, PTG_FILE_HDR_LEN - PTG_FILE_MAGIC_LEN);
	while (size - off >= PTG_CHUNK_HDR_LEN) {
		uint8_t h[PTG_CHUNK_HDR_LEN];
		uint32_t raw = get_le32(data + off + 8);
		uLongf clen;
		size_t zlen;

		memcpy(h, data + off, sizeof(h));
		off += sizeof(h);
		if (raw > size - off)
			raw = size - off;
		clen = zstd ? ZSTD_compressBound(raw) : compressBound(raw);
		comp = malloc(clen);
		if (!comp)
			fuzz_die("malloc");
		if (zstd) {
			zlen = ZSTD_compress(comp, clen, data + off, raw, 1);
			if (ZSTD_isError(zlen))
				fuzz_die("ZSTD_compress");
			clen = zlen;
		} else if (compress2(comp, &clen, data + off, raw, Z_BEST_SPEED) != Z_OK) {
			fuzz_die("compress2");
		}
		put_le32(h + 8, raw);
		put_le32(h + 12, clen);
		put_le32(h + 16, crc32(0, comp, clen));
		put(&out, len, &cap, h, sizeof(h));
		put(&out, len, &cap, comp, clen);
		free(comp);
		off += raw;
	}
	/* a partial chunk header stays: truncation is damage too */
	put(&out, len, &cap, data + off, size - off);
	return out;
}

static void check_stack(const struct model_frame *stack, unsigned int depth)
{
	/* the frames must be readable to the last one */
	if (depth && stack[depth - 1].kind != PTG_REC_PY_ENTER &&
	    stack[depth - 1].kind != PTG_REC_OP_ENTER)
		abort();
}

static void on_span(void *ctx, const struct model_span *s, const struct model_frame *stack,
		    unsigned int depth)
{
	check_stack(stack, depth);
}

static void on_record(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		      unsigned int depth)
{
	check_stack(stack, depth);
}

static int read_all(struct trace_reader *r)
{
	const struct ptg_loss *loss;
	const char *key, *value;
	struct ptg_record rec;
	size_t i, n;
	int ret;

	for (i = 0; trace_reader__meta_at(r, i, &key, &value); i++)
		trace_reader__meta(r, key);
	for (i = 1; i <= trace_reader__nsyms(r); i++) {
		const struct ptg_sym *s = trace_reader__sym(r, i);

		if (!s || s->id != i || !s->name || !s->file)
			abort();
	}
	loss = trace_reader__losses(r, &n);
	for (i = 0; i < n; i++) {
		if (memchr(loss[i].what, 0, sizeof(loss[i].what)) == NULL)
			abort();
	}
	while ((ret = trace_reader__next(r, &rec)) > 0) {
		/* the reader promises that every record's symbol exists */
		if (rec.sym && !trace_reader__sym(r, rec.sym))
			abort();
	}
	/* a corrupt trace is reported with a reason */
	if (ret < 0 && !trace_reader__error(r)[0])
		abort();
	return ret;
}

/*
 * What report, flamegraph, idle and export do with a trace; their options
 * taken from the input's size, so that the corpus tries each of them.
 */
static void run_reports(struct trace_reader *r, size_t size, FILE *null)
{
	const struct flamegraph_opts fo = {.weight = size % 4};
	const struct profile_opts po = {
	    .kind = size & 1 ? PTG_REC_OP_ENTER : PTG_REC_PY_ENTER,
	    .per_thread = true,
	    .group = (size >> 1) % 3,
	    .stack_n = 2,
	};
	const struct pstats_list_opts lo = {.sort = (size >> 2) % 4, .limit = -1};
	struct profile_run *run;
	struct idle_report *rep;
	struct flamegraph *fg;
	struct idle_opts io;

	trace_reader__rewind(r);
	if (!flamegraph__collect(r, &fo, &fg)) {
		flamegraph__write_folded(fg, r, null);
		flamegraph__write_svg(fg, r, null, "fuzz");
		flamegraph__free(fg);
	}
	trace_reader__rewind(r);
	if (!profile_run__collect(r, &po, &run)) {
		pstats__print_stats(null, run->all, r, &lo);
		pstats__print_callers(null, run->all, r, &lo);
		pstats__print_callees(null, run->all, r, &lo);
		pstats__write(run->all, r, fuzz_path("out.pstats"));
		profile_run__free(run);
	}
	trace_reader__rewind(r);
	idle_opts__defaults(&io);
	if (!idle_analyze(r, &io, &rep))
		idle_report__free(rep);
	cudacalls_report(null, r);
	offcpu_report(null, r);
	trace_reader__rewind(r);
	chrome_export(r, fuzz_path("out.json"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct model_visitor v = {.span = on_span, .record = on_record};
	const char *path;
	struct model_stats st;
	struct trace_reader *r;
	char err[256] = "";
	int ret;

	if (size >= PTG_FILE_HDR_LEN && !memcmp(data, RAW_MAGIC, PTG_FILE_MAGIC_LEN)) {
		size_t len;
		uint8_t *packed = pack(data, size, &len);

		path = fuzz_write("in.ptg", packed, len);
		free(packed);
	} else {
		path = fuzz_write("in.ptg", data, size);
	}
	if (trace_reader__open(path, &r, err, sizeof(err))) {
		if (!err[0])
			abort();
		return 0;
	}
	ret = read_all(r);
	trace_reader__rewind(r);
	if (model__walk(r, &v, NULL, &st) < 0 && ret == 0)
		abort(); /* the same records read whole a moment ago */
	if (ret == 0) {
		static FILE *null;

		if (!null && !(null = fopen("/dev/null", "we")))
			fuzz_die("/dev/null");
		run_reports(r, size, null);
	}
	trace_reader__close(r);
	return 0;
}
