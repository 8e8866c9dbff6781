// SPDX-License-Identifier: MIT
/*
 * A C program with no Python that loads a CUDA driver by the path it is
 * given (dlopen of a full path, found on no search path) only when told
 * to, and calls it at once: LAUNCHES cuLaunchKernel and SYNCS
 * cuStreamSynchronize with no pause between the load and the first call.
 * It says "ready PID" and waits for a line on stdin before the dlopen.
 *
 * usage: nopy_dlopen LIBCUDA LAUNCHES SYNCS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*launch_fn)(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
			 unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			 void *stream, void **params, void **extra);
typedef int (*sync_fn)(void *stream);

int main(int argc, char **argv)
{
	void *stream = (void *)(unsigned long)7;
	char line[64];
	launch_fn launch;
	sync_fn sync;
	void *lib;

	if (argc != 4) {
		fprintf(stderr, "usage: nopy_dlopen LIBCUDA LAUNCHES SYNCS\n");
		return 2;
	}
	long launches = atol(argv[2]), syncs = atol(argv[3]);

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "nopy_dlopen: %s\n", dlerror());
		return 1;
	}
	launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
	sync = (sync_fn)dlsym(lib, "cuStreamSynchronize");
	if (!launch || !sync)
		return 1;
	for (long i = 0; i < launches; i++) {
		if (launch(NULL, 5, 1, 1, 1, 1, 1, 1, stream, NULL, NULL))
			return 1;
		if (i < syncs && sync(stream))
			return 1;
	}
	printf("done\n");
	fflush(stdout);
	return 0;
}
