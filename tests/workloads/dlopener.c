// SPDX-License-Identifier: MIT
/*
 * ptg_dlopen(): a library loaded as the object this is linked into would
 * load it, so that that object's RUNPATH applies (a RUNPATH is searched only
 * for its own object's lookups, and ctypes' dlopen is _ctypes.so's). Built
 * by tests/integration/test_late_search.py into an executable
 * (workloads/pylaunch.c) or a shared library.
 */
#include <dlfcn.h>

static void *volatile last;

void *ptg_dlopen(const char *name)
{
	/* not a tail call: the loader takes the caller from the return address */
	last = dlopen(name, RTLD_NOW);
	return last;
}
