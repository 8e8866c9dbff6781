// SPDX-License-Identifier: MIT
/*
 * The agent on Python 3.11, which has no sys.monitoring: a C profile
 * function (PyEval_SetProfile's, as cProfile's) on every thread state, and
 * threading's profile hook for the threads started later; put in and taken
 * out by the session (ptg_pymon_agent.c), under the GIL. The function
 * itself is ptg_pymon_callbacks.c's on_profile().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ptg_pymon_shared.h"

/*
 * Whether this is a 3.11 whose C API has what the above needs. The profile
 * function's slots, PyThreadState.c_profilefunc and c_profileobj, are at
 * the offsets the loader sent.
 */
bool profile_api(void)
{
	const char *v = api.GetVersion ? api.GetVersion() : "";

	return !strncmp(v, "3.11.", 5) && lay.tstate_profilefunc >= 0 && api.SetProfileOf &&
	       api.InterpHead && api.InterpNext && api.ThreadHead && api.ThreadNext &&
	       api.Unicode_AsUTF8 && api.GetModule && api.Unicode_FromString;
}

static void **profile_fn(void *ts)
{
	return (void **)((char *)ts + lay.tstate_profilefunc);
}

static PyObject **profile_obj(void *ts)
{
	return (PyObject **)((char *)ts + lay.tstate_profilefunc + 16);
}

/* Ours: the C profile function, or sys.setprofile's trampoline calling our hook (a new thread). */
static bool profile_ours(void *ts)
{
	return *profile_fn(ts) == (void *)on_profile || (ag.hook && *profile_obj(ts) == ag.hook);
}

/* The threading module if imported (importing it from this thread would make it the main one). */
static PyObject *threading_module(void)
{
	PyObject *name = api.Unicode_FromString("threading"), *m = NULL;

	if (name) {
		m = api.GetModule(name);
		api.DecRef(name);
	}
	api.Err_Clear();
	return m;
}

int hook_threading(PyObject *threading)
{
	PyObject *r = api.CallMethod(threading, "setprofile", "O", ag.hook);

	if (r)
		api.DecRef(r);
	api.Err_Clear();
	return r ? 0 : -1;
}

/* The profile function off every thread state that has ours, threading's hook as it was. */
void profile_uninstall(void)
{
	PyObject *threading = threading_module(), *h;

	for (void *in = api.InterpHead(); in; in = api.InterpNext(in)) {
		for (void *ts = api.ThreadHead(in); ts; ts = api.ThreadNext(ts)) {
			if (profile_ours(ts) && api.SetProfileOf(ts, NULL, NULL))
				api.Err_Clear(); /* an audit hook said no: quiet, not gone */
		}
	}
	h = threading ? api.GetAttrString(threading, "_profile_hook") : NULL;
	if (h && h == ag.hook) {
		PyObject *r = api.CallMethod(threading, "setprofile", "O",
					     ag.old_hook ? ag.old_hook : api.none);

		if (r)
			api.DecRef(r);
	}
	if (h)
		api.DecRef(h);
	if (threading)
		api.DecRef(threading);
	api.Err_Clear();
	if (ag.old_hook)
		api.DecRef(ag.old_hook);
	ag.old_hook = NULL;
	__atomic_store_n(&threading_wait, false, __ATOMIC_RELAXED);
	threading_code = NULL;
	ag.profiling = false;
}

/*
 * Puts the C profile function on every thread state but this agent's, and
 * its hook into threading for the threads started later. Refused, with
 * nothing changed, when any thread has a profile function that is not ours
 * (cProfile, sys.setprofile) or threading's hook is someone's.
 */
int profile_install(char *msg, size_t len)
{
	void *own = api.ThreadState_Get();
	PyObject *threading, *old = NULL;
	bool laid_out;
	int err = 0;

	if (!ag.hook && !(ag.hook = api.CFunction_NewEx(&hook_def, NULL, NULL))) {
		api.Err_Clear();
		snprintf(msg, len, "out of memory");
		return -ENOMEM;
	}
	/* the loader's offsets, tried on this thread's own state first */
	laid_out = !*profile_fn(own) && !*profile_obj(own);
	if (api.SetProfileOf(own, on_profile, ag.hook)) {
		api.Err_Clear();
		snprintf(msg, len, "an audit hook refused sys.setprofile");
		return -EPERM;
	}
	laid_out =
	    laid_out && *profile_fn(own) == (void *)on_profile && *profile_obj(own) == ag.hook;
	if (api.SetProfileOf(own, NULL, NULL))
		api.Err_Clear();
	if (!laid_out) {
		snprintf(msg, len, "PyThreadState is not laid out as the loader's Python 3.11");
		return -EPROTO;
	}
	for (void *in = api.InterpHead(); in && !err; in = api.InterpNext(in)) {
		for (void *ts = api.ThreadHead(in); ts && !err; ts = api.ThreadNext(ts)) {
			if (ts != own && *profile_fn(ts) && !profile_ours(ts))
				err = -EBUSY;
		}
	}
	threading = threading_module();
	if (!err && threading && (old = api.GetAttrString(threading, "_profile_hook")) &&
	    old != api.none && old != ag.hook)
		err = -EBUSY;
	api.Err_Clear();
	if (err) {
		snprintf(msg, len,
			 "a thread already has a profile function (cProfile, sys.setprofile or "
			 "threading.setprofile)");
		goto out;
	}
	if (threading && hook_threading(threading))
		err = -EINVAL;
	ag.old_hook = old && old != ag.hook ? old : NULL;
	old = NULL;
	/* not imported yet: hooked once it is, before it can start a thread */
	__atomic_store_n(&threading_wait, !err && !threading, __ATOMIC_RELAXED);
	threading_code = NULL;
	ag.profiling = true;
	for (void *in = api.InterpHead(); in && !err; in = api.InterpNext(in)) {
		for (void *ts = api.ThreadHead(in); ts && !err; ts = api.ThreadNext(ts)) {
			if (ts != own && api.SetProfileOf(ts, on_profile, ag.hook))
				err = -EPERM;
		}
	}
	if (err) {
		api.Err_Clear();
		snprintf(msg, len, "the interpreter refused the profile function (an audit hook)");
		profile_uninstall();
	}
out:
	if (old)
		api.DecRef(old);
	if (threading)
		api.DecRef(threading);
	return err;
}
