// SPDX-License-Identifier: MIT
/*
 * A Python interpreter whose executable is its own: Python's main, linked
 * to libpython, with the DT_RUNPATH or DT_RPATH the test builds it with,
 * and with workloads/dlopener.c's ptg_dlopen() exported (-rdynamic).
 */
#include <Python.h>

int main(int argc, char **argv)
{
	return Py_BytesMain(argc, argv);
}
