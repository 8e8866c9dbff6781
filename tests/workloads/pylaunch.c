// SPDX-License-Identifier: MIT
/*
 * A Python interpreter whose executable is its own: Python's main, linked
 * to libpython, with the DT_RUNPATH or DT_RPATH the test builds it with.
 * ptg_dlopen() lets a script load a library as the executable would (a
 * RUNPATH is searched only for its own object's lookups, and ctypes'
 * dlopen is _ctypes.so's).
 */
#include <Python.h>
#include <dlfcn.h>

static void *volatile last;

void *ptg_dlopen(const char *name)
{
	/* not a tail call: the loader takes the caller from the return address */
	last = dlopen(name, RTLD_NOW);
	return last;
}

int main(int argc, char **argv)
{
	return Py_BytesMain(argc, argv);
}
