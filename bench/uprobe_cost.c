// SPDX-License-Identifier: MIT
/*
 * The bare cost of a uprobe hit on this machine, to set ptrace-gpu's cost
 * per Python call against. Calls a tiny assembly function N times and times
 * the loop with nothing attached, with a uprobe running an empty BPF program
 * at its first instruction, and with a uprobe + uretprobe pair.
 *
 * The probed instruction matters: x86 emulates a few instructions in the
 * kernel (push, the usual first instruction of a function; relative jumps,
 * calls and conditional branches) but executes the others out of line with
 * a single step, one more trap (mov, lea: what ptrace-gpu's probes in
 * CPython's eval loop hit). All three kinds are measured.
 *
 *   clang -O2 -g -target bpf -Ivmlinux -c bench/uprobe_cost.bpf.c -o uprobe_cost.bpf.o
 *   bpftool gen skeleton uprobe_cost.bpf.o name uprobe_cost_bpf > uprobe_cost.skel.h
 *   cc -O2 -I. bench/uprobe_cost.c -lbpf -lelf -lz -o uprobe_cost
 *   sudo ./uprobe_cost [calls (default 500000)] [repeats (default 5)]
 *
 * Prints one JSON object: per probed instruction, ns per call bare, with a
 * uprobe and with a uprobe + uretprobe (median of the repeats, thread CPU
 * time), and the cost of a hit and of a pair (probed minus bare).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include "uprobe_cost.skel.h"

#define MAX_REPEATS 31

/* Out of the compiler's reach: exactly these instructions run per call. */
__asm__(".text\n"
	".globl ptg_target_mov\n.type ptg_target_mov, @function\n"
	"ptg_target_mov:\n\tmov %rdi, %rax\n\tret\n"
	".size ptg_target_mov, .-ptg_target_mov\n"
	".globl ptg_target_push\n.type ptg_target_push, @function\n"
	"ptg_target_push:\n\tpush %rbp\n\tpop %rbp\n\tret\n"
	".size ptg_target_push, .-ptg_target_push\n"
	".globl ptg_target_jmp\n.type ptg_target_jmp, @function\n"
	"ptg_target_jmp:\n\tjmp 1f\n1:\tmov %rdi, %rax\n\tret\n"
	".size ptg_target_jmp, .-ptg_target_jmp\n"
	".globl ptg_target_nop5\n.type ptg_target_nop5, @function\n"
	"ptg_target_nop5:\n\t.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\tmov %rdi, %rax\n\tret\n"
	".size ptg_target_nop5, .-ptg_target_nop5\n");
uint64_t ptg_target_mov(uint64_t x);
uint64_t ptg_target_push(uint64_t x);
uint64_t ptg_target_jmp(uint64_t x);
uint64_t ptg_target_nop5(uint64_t x);

typedef uint64_t (*target_fn)(uint64_t);

/* The thread's CPU time: a probe's trap is charged to the thread that hits it, and
 * CPU time, unlike wall time, does not count the time other load on a shared
 * machine takes the CPU away. */
static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double ns_per_call(target_fn fn, long calls)
{
	volatile uint64_t sink = 0;
	double t0 = now_ns();

	for (long i = 0; i < calls; i++)
		sink += fn((uint64_t)i);
	return (now_ns() - t0) / calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_ns(target_fn fn, long calls, int repeats)
{
	double v[MAX_REPEATS];

	for (int i = 0; i < repeats; i++)
		v[i] = ns_per_call(fn, calls);
	qsort(v, repeats, sizeof(v[0]), cmp_double);
	return v[repeats / 2];
}

static struct bpf_link *attach(struct bpf_program *prog, const char *func, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func, .retprobe = ret);
	struct bpf_link *l;

	l = bpf_program__attach_uprobe_opts(prog, getpid(), "/proc/self/exe", 0, &opts);
	if (!l)
		fprintf(stderr, "uprobe_cost: cannot attach to %s: %s\n", func, strerror(errno));
	return l;
}

/* ns per call of fn with nothing, a uprobe, and a uprobe + uretprobe attached. */
static int measure(struct uprobe_cost_bpf *skel, const char *name, target_fn fn, long calls,
		   int repeats, double out[3])
{
	struct bpf_link *entry = NULL, *ret = NULL;
	int err = -1;

	out[0] = median_ns(fn, calls, repeats);
	entry = attach(skel->progs.noop_entry, name, false);
	if (!entry)
		goto cleanup;
	out[1] = median_ns(fn, calls, repeats);
	ret = attach(skel->progs.noop_return, name, true);
	if (!ret)
		goto cleanup;
	out[2] = median_ns(fn, calls, repeats);
	err = 0;
cleanup:
	bpf_link__destroy(ret);
	bpf_link__destroy(entry);
	return err;
}

/* A counting probe proves that the probe fires once per call. */
static int check_hits(struct uprobe_cost_bpf *skel, long calls)
{
	struct bpf_link *l = attach(skel->progs.count_entry, "ptg_target_mov", false);

	if (!l)
		return -1;
	skel->bss->hits = 0;
	ns_per_call(ptg_target_mov, calls);
	bpf_link__destroy(l);
	if (skel->bss->hits != (uint64_t)calls) {
		fprintf(stderr, "uprobe_cost: %llu hits for %ld calls\n",
			(unsigned long long)skel->bss->hits, calls);
		return -1;
	}
	return 0;
}

static void print_variant(const char *name, const double v[3], bool last)
{
	printf("\"%s\": {\"bare_ns\": %.1f, \"uprobe_ns\": %.1f, \"uprobe_uretprobe_ns\": %.1f, "
	       "\"hit_ns\": %.1f, \"pair_ns\": %.1f}%s",
	       name, v[0], v[1], v[2], v[1] - v[0], v[2] - v[0], last ? "" : ", ");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name, *func;
		target_fn fn;
	} variants[] = {
	    {"mov", "ptg_target_mov", ptg_target_mov},	  /* single-stepped */
	    {"push", "ptg_target_push", ptg_target_push}, /* emulated */
	    {"jmp", "ptg_target_jmp", ptg_target_jmp},	  /* emulated */
	    /* a 5-byte nop (USDT's newer form): Linux 6.18 turns its trap into a call */
	    {"nop5", "ptg_target_nop5", ptg_target_nop5},
	};
	long calls = argc > 1 ? strtol(argv[1], NULL, 0) : 500000;
	int repeats = argc > 2 ? atoi(argv[2]) : 5;
	struct uprobe_cost_bpf *skel;
	double v[4][3];
	int err = 1;
	size_t i;

	if (calls <= 0 || repeats < 1 || repeats > MAX_REPEATS) {
		fprintf(stderr, "usage: uprobe_cost [calls] [repeats <= %d]\n", MAX_REPEATS);
		return 2;
	}
	skel = uprobe_cost_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "uprobe_cost: cannot load BPF programs: %s\n", strerror(errno));
		return 1;
	}
	if (check_hits(skel, 10000))
		goto cleanup;
	for (i = 0; i < 4; i++) {
		if (measure(skel, variants[i].func, variants[i].fn, calls, repeats, v[i]))
			goto cleanup;
	}
	printf("{\"calls\": %ld, \"repeats\": %d, ", calls, repeats);
	for (i = 0; i < 4; i++)
		print_variant(variants[i].name, v[i], i == 3);
	printf("}\n");
	err = 0;
cleanup:
	uprobe_cost_bpf__destroy(skel);
	return err;
}
