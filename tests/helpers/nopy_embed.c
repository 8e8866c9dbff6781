// SPDX-License-Identifier: MIT
/*
 * A C program that loads libpython only when told to (dlopen, as a program
 * that embeds Python on demand does), then runs a Python function f CALLS
 * times, each through its own PyRun_SimpleString. It says "ready PID" and
 * waits for a line on stdin before the dlopen, and says "python" and waits
 * for another line once the interpreter is initialized, before any f runs.
 *
 * usage: nopy_embed LIBPYTHON CALLS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int wait_line(const char *say)
{
	char line[64];

	printf("%s %d\n", say, (int)getpid());
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

int main(int argc, char **argv)
{
	void (*init)(void);
	int (*run)(const char *);
	int (*fini)(void);
	void *lib;

	if (argc != 3) {
		fprintf(stderr, "usage: nopy_embed LIBPYTHON CALLS\n");
		return 2;
	}
	long calls = atol(argv[2]);

	if (wait_line("ready"))
		return 1;
	lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "nopy_embed: %s\n", dlerror());
		return 1;
	}
	init = (void (*)(void))dlsym(lib, "Py_Initialize");
	run = (int (*)(const char *))dlsym(lib, "PyRun_SimpleString");
	fini = (int (*)(void))dlsym(lib, "Py_FinalizeEx");
	if (!init || !run || !fini)
		return 1;
	init();
	if (run("def f(n):\n    return n * 2\n") || wait_line("python"))
		return 1;
	for (long i = 0; i < calls; i++) {
		if (run("f(3)"))
			return 1;
	}
	printf("done\n");
	fflush(stdout);
	return fini() ? 1 : 0;
}
