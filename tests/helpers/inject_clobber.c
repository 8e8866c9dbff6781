// SPDX-License-Identifier: MIT
/*
 * A hostile library for tests/integration/test_kill_safe.py to load: its
 * constructor and inject_clobber_call() leave the calling thread's FP state
 * and signal mask changed (every vector register, MXCSR's and the x87's
 * rounding, SIGUSR1 blocked). Whatever the borrowed thread ran, the target
 * must get its own state back, alive tracer or dead.
 */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

__attribute__((target("avx"))) static void clobber_avx(void)
{
	__asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
			 "vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"
			 "vpcmpeqd %%ymm2, %%ymm2, %%ymm2\n\t"
			 "vpcmpeqd %%ymm3, %%ymm3, %%ymm3\n\t"
			 "vpcmpeqd %%ymm4, %%ymm4, %%ymm4\n\t"
			 "vpcmpeqd %%ymm5, %%ymm5, %%ymm5\n\t"
			 "vpcmpeqd %%ymm6, %%ymm6, %%ymm6\n\t"
			 "vpcmpeqd %%ymm7, %%ymm7, %%ymm7\n\t"
			 "vpcmpeqd %%ymm8, %%ymm8, %%ymm8\n\t"
			 "vpcmpeqd %%ymm9, %%ymm9, %%ymm9\n\t"
			 "vpcmpeqd %%ymm10, %%ymm10, %%ymm10\n\t"
			 "vpcmpeqd %%ymm11, %%ymm11, %%ymm11\n\t"
			 "vpcmpeqd %%ymm12, %%ymm12, %%ymm12\n\t"
			 "vpcmpeqd %%ymm13, %%ymm13, %%ymm13\n\t"
			 "vpcmpeqd %%ymm14, %%ymm14, %%ymm14\n\t"
			 "vpcmpeqd %%ymm15, %%ymm15, %%ymm15" ::
			     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			       "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
			       "xmm15");
}

static void clobber(void)
{
	/* round toward zero in SSE and x87: a target that keeps these computes otherwise */
	uint32_t mxcsr = 0x1f80 | 0x6000;
	uint16_t cw = 0x037f | 0x0c00;
	sigset_t set;

	__asm__ volatile("ldmxcsr %0" ::"m"(mxcsr));
	__asm__ volatile("fldcw %0" ::"m"(cw));
	if (__builtin_cpu_supports("avx"))
		clobber_avx();
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, 0);
}

__attribute__((constructor)) static void inject_clobber_init(void)
{
	clobber();
}

/* arg "spin": then stays 5 ms in the call, so that a kill often comes while it runs */
__attribute__((visibility("default"))) int inject_clobber_call(const char *arg)
{
	struct timespec t0, t;

	clobber();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while (!strcmp(arg, "spin") &&
	       (t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 5000000);
	return 7;
}
