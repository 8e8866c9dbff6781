// SPDX-License-Identifier: MIT
/*
 * A C program that embeds Python on demand and calls it at once: it says
 * "ready PID" and waits for a line on stdin, then dlopen()s LIBPYTHON (a
 * name without a slash is looked up along the loader's search path, a
 * path is taken as it is), initializes the interpreter and runs one script
 * that calls f CALLS times, the first right away: no pause anywhere for a
 * tracer to catch up. It says "done N" with N the calls f counted itself.
 *
 * usage: embed_first LIBPYTHON CALLS
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* f's calls are counted by the script itself: the oracle the trace is checked against */
static const char script[] = "calls = 0\n"
			     "def f(n):\n"
			     "    global calls\n"
			     "    calls += 1\n"
			     "def main(n):\n"
			     "    for i in range(n):\n"
			     "        f(i)\n"
			     "main(%ld)\n"
			     "print('done', calls, flush=True)\n";

int main(int argc, char **argv)
{
	void (*init)(void);
	int (*run)(const char *);
	int (*fini)(void);
	char code[sizeof(script) + 32], line[64];
	long calls;
	void *lib;

	if (argc != 3) {
		fprintf(stderr, "usage: embed_first LIBPYTHON CALLS\n");
		return 2;
	}
	calls = atol(argv[2]);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "embed_first: %s\n", dlerror());
		return 1;
	}
	init = (void (*)(void))dlsym(lib, "Py_Initialize");
	run = (int (*)(const char *))dlsym(lib, "PyRun_SimpleString");
	fini = (int (*)(void))dlsym(lib, "Py_FinalizeEx");
	if (!init || !run || !fini) {
		fprintf(stderr, "embed_first: %s is not libpython\n", argv[1]);
		return 1;
	}
	snprintf(code, sizeof(code), script, calls);
	init();
	if (run(code))
		return 1;
	return fini() ? 1 : 0;
}
