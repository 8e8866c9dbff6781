// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "base/log.h"
#include "proc/procfs.h"
#include "tracer/trapcost.h"
#include "trapcost.skel.h"

#define RUNS 3

#if defined(__x86_64__)
/* Out of the compiler's reach: exactly these instructions run per call. */
__asm__(".text\n"
	".globl ptg_trapcost_target\n.type ptg_trapcost_target, @function\n"
	"ptg_trapcost_target:\n\tmov %rdi, %rax\n\tret\n"
	".size ptg_trapcost_target, .-ptg_trapcost_target\n");
uint64_t ptg_trapcost_target(uint64_t x);
#else
__attribute__((noinline)) uint64_t ptg_trapcost_target(uint64_t x);
__attribute__((noinline)) uint64_t ptg_trapcost_target(uint64_t x)
{
	__asm__ volatile("" : "+r"(x));
	return x;
}
#endif

/* A trap is charged to the thread that hits it; CPU time leaves out other load. */
static double thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ns per call of the target: the median of RUNS runs of calls each */
static double ns_per_call(unsigned long calls)
{
	volatile uint64_t sink = 0;
	double v[RUNS];

	for (int r = 0; r < RUNS; r++) {
		double t0 = thread_ns();

		for (unsigned long i = 0; i < calls; i++)
			sink += ptg_trapcost_target(i);
		v[r] = (thread_ns() - t0) / (double)calls;
	}
	qsort(v, RUNS, sizeof(v[0]), cmp_double);
	return v[RUNS / 2];
}

struct text_ctx {
	uint64_t addr;
	uint64_t off; /* file offset of addr, 0 until found */
};

static int find_text(const struct proc_map *m, void *arg)
{
	struct text_ctx *c = arg;

	if (c->addr < m->start || c->addr >= m->end || m->path[0] != '/')
		return 0;
	c->off = c->addr - m->start + m->offset;
	return 1;
}

int trapcost_measure(unsigned long calls, struct trapcost *out, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct text_ctx tc = {.addr = (uint64_t)(uintptr_t)ptg_trapcost_target};
	struct trapcost_bpf *skel;
	struct bpf_link *link;
	int ret;

	if (proc_maps__for_each(getpid(), find_text, &tc) != 1) {
		snprintf(err, errlen,
			 "no mapping of this executable's own code in /proc/self/maps");
		return -ENOENT;
	}
	skel = trapcost_bpf__open_and_load();
	if (!skel) {
		ret = -errno;
		snprintf(err, errlen, "cannot load a uprobe program: %s", strerror(-ret));
		return ret;
	}
	out->calls = calls;
	out->bare_ns = ns_per_call(calls);
	link = bpf_program__attach_uprobe_opts(skel->progs.trap_count, getpid(), "/proc/self/exe",
					       (size_t)tc.off, &opts);
	if (!link) {
		ret = -errno;
		snprintf(err, errlen, "cannot attach a uprobe to this executable: %s",
			 strerror(-ret));
		goto cleanup;
	}
	out->hit_ns = ns_per_call(calls) - out->bare_ns;
	bpf_link__destroy(link);
	ret = 0;
	if (skel->bss->hits != (uint64_t)calls * RUNS) {
		snprintf(err, errlen, "the uprobe counted %llu hits of %lu calls",
			 (unsigned long long)skel->bss->hits, calls * RUNS);
		ret = -EIO;
	}
cleanup:
	trapcost_bpf__destroy(skel);
	return ret;
}
