// SPDX-License-Identifier: MIT
/*
 * A C program with neither Python nor CUDA: SLEEPS sleeps of SLEEP_MS each,
 * so that its trace holds off-CPU intervals only. --wait as nopy_cuda.c.
 *
 * usage: nopy_plain [--wait] SLEEPS SLEEP_MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int wait = argc > 1 && !strcmp(argv[1], "--wait");
	char line[64];

	if (argc != 3 + wait) {
		fprintf(stderr, "usage: nopy_plain [--wait] SLEEPS SLEEP_MS\n");
		return 2;
	}
	long sleeps = atol(argv[1 + wait]), ms = atol(argv[2 + wait]);

	if (wait) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	for (long i = 0; i < sleeps; i++) {
		struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

		while (nanosleep(&ts, &ts))
			;
	}
	printf("done\n");
	fflush(stdout);
	return 0;
}
