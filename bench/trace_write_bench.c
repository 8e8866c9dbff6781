// SPDX-License-Identifier: MIT
/*
 * Speed and size of the .ptg format on a Python-like stream: properly nested
 * PY_ENTER/PY_EXIT pairs of one thread over 2,000 functions, 30-400 ns apart,
 * with an op inside one call in eight. Measures the writer, the reader and
 * the model walk. Not a test: build and run by hand,
 *
 *   cc -O2 -D_GNU_SOURCE -Iuser bench/trace_write_bench.c user/trace/trace_writer.c \
 *      user/trace/trace_reader.c user/model/model.c -lz -lzstd -o /tmp/trace_write_bench
 *   /tmp/trace_write_bench [records (default 10000000)] [path]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/model.h"
#include "trace/trace.h"

#define POOL 1000000 /* records generated once, written again with later ts */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void push_rec(struct ptg_record *r, uint16_t kind, uint32_t sym, uint64_t *ts)
{
	*ts += 30 + rng() % 370;
	r->kind = kind;
	r->pid = 4242;
	r->tid = 4242;
	r->sym = sym;
	r->ts = *ts;
}

/* A balanced random call tree of POOL records; returns the time it spans. */
static uint64_t make_pool(struct ptg_record *pool, const uint32_t *syms, uint32_t op)
{
	size_t n = 0, depth = 0;
	uint64_t ts = 0;
	uint16_t stack[256];

	while (n < POOL - depth) {
		bool enter = depth == 0 || (depth < 40 && rng() % 100 < 50);

		if (enter && depth > 0 && rng() % 8 == 0 && n + 2 + depth <= POOL) {
			push_rec(&pool[n++], PTG_REC_OP_ENTER, op, &ts);
			push_rec(&pool[n++], PTG_REC_OP_EXIT, 0, &ts);
		} else if (enter) {
			stack[depth] = rng() % 2000;
			push_rec(&pool[n++], PTG_REC_PY_ENTER, syms[stack[depth++]], &ts);
		} else {
			depth--;
			push_rec(&pool[n++], PTG_REC_PY_EXIT, 0, &ts);
		}
	}
	while (depth--)
		push_rec(&pool[n++], PTG_REC_PY_EXIT, 0, &ts);
	for (; n < POOL; n++) /* pad with instants so every pass has POOL records */
		push_rec(&pool[n], PTG_REC_SPAN, 0, &ts);
	return ts;
}

static int bench_write(const char *path, const struct ptg_record *pool, uint64_t span, size_t nrec,
		       const char **names)
{
	struct trace_writer *w;
	struct ptg_record r;
	double t0;
	size_t i;
	int err;

	t0 = now();
	err = trace_writer__open(path, &w);
	if (err)
		return err;
	for (i = 0; i < 2000; i++)
		trace_writer__sym(w, PTG_SYM_PY_FUNC, names[i], "/srv/app/model.py", i);
	/* id 2001, which make_pool() used */
	trace_writer__sym(w, PTG_SYM_OP, "aten::addmm", "", 0);
	for (i = 0; i < nrec && !err; i++) {
		r = pool[i % POOL];
		r.ts += (i / POOL) * span;
		err = trace_writer__record(w, &r);
	}
	if (err) {
		trace_writer__abort(w);
		return err;
	}
	err = trace_writer__close(w);
	printf("write: %.2f M records/s\n", nrec / (now() - t0) / 1e6);
	return err;
}

static int bench_read(const char *path, size_t nrec)
{
	struct trace_reader *r;
	struct model_stats st;
	struct ptg_record rec;
	char err[256];
	size_t n = 0;
	double t0;
	int ret;

	t0 = now();
	ret = trace_reader__open(path, &r, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "%s: %s\n", path, err);
		return ret;
	}
	while ((ret = trace_reader__next(r, &rec)) > 0)
		n++;
	printf("read:  %.2f M records/s (%zu of %zu records)\n", n / (now() - t0) / 1e6, n, nrec);
	trace_reader__rewind(r);
	t0 = now();
	if (!ret)
		ret = model__walk(r, NULL, NULL, &st);
	printf("walk:  %.2f M records/s (%llu spans)\n", n / (now() - t0) / 1e6,
	       (unsigned long long)st.spans);
	trace_reader__close(r);
	return ret;
}

int main(int argc, char **argv)
{
	size_t nrec = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
	const char *path = argc > 2 ? argv[2] : "/tmp/ptg-bench.ptg";
	struct ptg_record *pool = calloc(POOL, sizeof(*pool));
	static char name_buf[2000][48];
	const char *names[2000];
	uint32_t syms[2000];
	struct stat st;
	uint64_t span;
	int i, err;

	if (!pool)
		return 1;
	/* ids the writer will give, in registration order */
	for (i = 0; i < 2000; i++) {
		snprintf(name_buf[i], sizeof(name_buf[i]), "module.Class%d.method_%d", i / 10, i);
		names[i] = name_buf[i];
		syms[i] = i + 1;
	}
	span = make_pool(pool, syms, 2001);
	err = bench_write(path, pool, span, nrec, names);
	if (err)
		return 1;
	if (stat(path, &st))
		return 1;
	printf("size:  %.2f bytes/record (%lld bytes)\n", (double)st.st_size / nrec,
	       (long long)st.st_size);
	err = bench_read(path, nrec);
	unlink(path);
	free(pool);
	return err ? 1 : 0;
}
