// SPDX-License-Identifier: MIT
/*
 * A C program that drives CUDA with no Python in it, for `record` of a
 * non-Python target: LAUNCHES cuLaunchKernel and SYNCS cuStreamSynchronize
 * on the driver it links (tests/fakecuda's libcuda.so.1 here), then SLEEPS
 * sleeps of SLEEP_MS each. With --wait it says "ready PID" and waits for a
 * line on stdin first (as tests/workloads/gate.py does).
 *
 * usage: nopy_cuda [--wait] LAUNCHES SYNCS SLEEPS SLEEP_MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			CUstream stream, void **params, void **extra);
CUresult cuStreamSynchronize(CUstream stream);

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts))
		;
}

int main(int argc, char **argv)
{
	int wait = argc > 1 && !strcmp(argv[1], "--wait");
	char line[64];
	CUstream stream = (CUstream)(unsigned long)7;

	if (argc != 5 + wait) {
		fprintf(stderr, "usage: nopy_cuda [--wait] LAUNCHES SYNCS SLEEPS SLEEP_MS\n");
		return 2;
	}
	long launches = atol(argv[1 + wait]), syncs = atol(argv[2 + wait]);
	long sleeps = atol(argv[3 + wait]), ms = atol(argv[4 + wait]);

	if (wait) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	for (long i = 0; i < launches; i++) {
		/* 1 us of host time, 5 us of "GPU" work on the stream */
		if (cuLaunchKernel(NULL, 5, 1, 1, 1, 1, 1, 1, stream, NULL, NULL))
			return 1;
		if (i < syncs && cuStreamSynchronize(stream))
			return 1;
	}
	for (long i = launches; i < syncs; i++) {
		if (cuStreamSynchronize(stream))
			return 1;
	}
	for (long i = 0; i < sleeps; i++)
		sleep_ms(ms);
	printf("done\n");
	fflush(stdout);
	return 0;
}
