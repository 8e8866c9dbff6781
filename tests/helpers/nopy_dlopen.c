// SPDX-License-Identifier: MIT
/*
 * A C program with no Python that loads a CUDA driver by the path it is
 * given (dlopen of a full path, found on no search path) only when told
 * to, and calls it at once: LAUNCHES cuLaunchKernel and SYNCS
 * cuStreamSynchronize with no pause between the load and the first call.
 * It says "ready PID" and waits for a line on stdin before the dlopen.
 *
 * The load and the calls are made by the main thread, or by a thread of
 * its own: "early", started before it says ready (there when a recorder
 * attaches), or "late", started once told to go (after the attach).
 *
 * usage: nopy_dlopen LIBCUDA LAUNCHES SYNCS [early|late]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*launch_fn)(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
			 unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			 void *stream, void **params, void **extra);
typedef int (*sync_fn)(void *stream);

static const char *path;
static long launches, syncs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t told = PTHREAD_COND_INITIALIZER;
static int go;

static int load_and_call(void)
{
	void *stream = (void *)(unsigned long)7;
	launch_fn launch;
	sync_fn sync;
	void *lib;

	lib = dlopen(path, RTLD_NOW);
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
	return 0;
}

static void *worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!go)
		pthread_cond_wait(&told, &lock);
	pthread_mutex_unlock(&lock);
	return (void *)(long)load_and_call();
}

int main(int argc, char **argv)
{
	const char *mode = argc == 5 ? argv[4] : "main";
	pthread_t th;
	char line[64];
	void *ret;

	if ((argc != 4 && argc != 5) ||
	    (strcmp(mode, "main") && strcmp(mode, "early") && strcmp(mode, "late"))) {
		fprintf(stderr, "usage: nopy_dlopen LIBCUDA LAUNCHES SYNCS [early|late]\n");
		return 2;
	}
	path = argv[1];
	launches = atol(argv[2]);
	syncs = atol(argv[3]);
	if (!strcmp(mode, "early") && pthread_create(&th, NULL, worker, NULL))
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	if (!strcmp(mode, "main")) {
		if (load_and_call())
			return 1;
	} else {
		if (!strcmp(mode, "late") && pthread_create(&th, NULL, worker, NULL))
			return 1;
		pthread_mutex_lock(&lock);
		go = 1;
		pthread_cond_signal(&told);
		pthread_mutex_unlock(&lock);
		if (pthread_join(th, &ret) || ret)
			return 1;
	}
	printf("done\n");
	fflush(stdout);
	return 0;
}
