// SPDX-License-Identifier: MIT
/*
 * What an exact in-process recorder costs when its sys.monitoring callbacks
 * are C, as an agent injected into the target would register them: each
 * frame start, resume, return, yield, unwind and throw of every thread
 * becomes a 24-byte record (event, thread, code object, CLOCK_MONOTONIC) in
 * a buffer, and each code object is kept alive at first sight (so its
 * address is never reused while recording). A benchmark module, built by
 * bench/hotpath_ab.py --inprocess for each interpreter (3.12+) and used by
 * bench/workloads/benchlib.py --mode monitoring-c:
 *
 *   cc -O2 -shared -fPIC -I$(python3 -c 'import sysconfig;
 *       print(sysconfig.get_paths()["include"])') moncost.c -o ptg_moncost.so
 *
 * Records go round a 1 MiB buffer (a recorder ships them from there); take()
 * returns how many were written and starts() how many frames started.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define RECORDS (1u << 16)
#define SEEN	(1u << 16)

struct record {
	uint32_t kind;
	uint32_t tid;
	uint64_t code;
	uint64_t ts;
};

static struct record buf[RECORDS];
static uint64_t written, started;
static PyObject *seen[SEEN]; /* open addressing, code objects kept alive */
static size_t nseen;
static __thread uint32_t my_tid;

static void keep(PyObject *code)
{
	size_t h = ((uintptr_t)code >> 4) & (SEEN - 1);

	while (seen[h]) {
		if (seen[h] == code)
			return;
		h = (h + 1) & (SEEN - 1);
	}
	if (nseen >= SEEN / 2)
		return; /* full: a recorder would grow it */
	Py_INCREF(code);
	seen[h] = code;
	nseen++;
}

static PyObject *put(uint32_t kind, PyObject *const *args, Py_ssize_t nargs)
{
	struct record *r;
	struct timespec ts;

	if (nargs < 1)
		Py_RETURN_NONE;
	if (!my_tid)
		my_tid = (uint32_t)syscall(SYS_gettid);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	r = &buf[written++ & (RECORDS - 1)];
	r->kind = kind;
	r->tid = my_tid;
	r->code = (uintptr_t)args[0];
	r->ts = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (kind == 1) {
		keep(args[0]);
		started++;
	}
	Py_RETURN_NONE;
}

#define CALLBACK(name, kind)                                                                       \
	static PyObject *name(PyObject *self, PyObject *const *args, Py_ssize_t nargs)             \
	{                                                                                          \
		(void)self;                                                                        \
		return put(kind, args, nargs);                                                     \
	}

CALLBACK(on_start, 1)
CALLBACK(on_resume, 2)
CALLBACK(on_return, 3)
CALLBACK(on_yield, 4)
CALLBACK(on_unwind, 5)
CALLBACK(on_throw, 6)

static PyObject *take(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return Py_BuildValue("(KK)", (unsigned long long)written, (unsigned long long)started);
}

static PyMethodDef methods[] = {
    {"start", (PyCFunction)(void (*)(void))on_start, METH_FASTCALL, NULL},
    {"resume", (PyCFunction)(void (*)(void))on_resume, METH_FASTCALL, NULL},
    {"ret", (PyCFunction)(void (*)(void))on_return, METH_FASTCALL, NULL},
    {"yield_", (PyCFunction)(void (*)(void))on_yield, METH_FASTCALL, NULL},
    {"unwind", (PyCFunction)(void (*)(void))on_unwind, METH_FASTCALL, NULL},
    {"throw", (PyCFunction)(void (*)(void))on_throw, METH_FASTCALL, NULL},
    {"take", take, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "ptg_moncost", NULL, -1, methods};

PyMODINIT_FUNC PyInit_ptg_moncost(void)
{
	return PyModule_Create(&module);
}
