// SPDX-License-Identifier: MIT
/*
 * The Python part of a recording: its probes when the target runs Python
 * from the start, and those of an interpreter that comes later (an exec, a
 * libpython it maps), found through user/record/target.c.
 */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "probes/libwatch.h"
#include "probes/modpath.h"
#include "probes/pyframe.h"
#include "probes/torchops.h"
#include "proc/procfs.h"
#include "record/record.h"
#include "record/steps.h"
#include "record/target.h"
#include "trace/trace.h"

/* pyframe, then what reads the stacks it keeps: module paths and steps. */
int record_open_python(struct recording *rc)
{
	int ret = pyframe__open(&rc->py, rc->tracer, &rc->pf);

	if (!ret && !rc->o->no_ops)
		ret = modpath__open(rc->tracer, &rc->py, &rc->mp);
	if (!ret)
		ret = steps__open(rc->tracer, &rc->py, &rc->o->steps, &rc->steps);
	return ret;
}

/* target.h: the target runs Python from now on (an exec, a libpython it mapped). */
static int late_python(void *ctx, const struct py_interp *py, const char *how)
{
	struct recording *rc = ctx;
	char buf[4096];
	uint64_t ts;
	int ret;

	rc->py = *py;
	ret = record_open_python(rc);
	if (!ret) {
		ts = now_ns(CLOCK_MONOTONIC);
		pyframe__set_start_ts(rc->pf, ts);
		ret = pyframe__attach(rc->pf);
	}
	if (!ret)
		torchops__set_modpath(rc->ops, rc->mp);
	if (ret) {
		/* what did open stays until the end: the tracer still has its handlers */
		pyframe__detach(rc->pf);
		return ret;
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)ts);
	ret = trace_writer__meta(rc->w, "python", strcmp(how, "exec") ? "mapped" : "exec");
	ret = ret ?: trace_writer__meta(rc->w, "python.version", rc->py.version);
	ret = ret ?: trace_writer__meta(rc->w, "python.path", rc->py.path);
	ret = ret ?: trace_writer__meta(rc->w, "python.since_monotonic_ns", buf);
	/* an exec changed it: the last value is the one reports show */
	if (!ret && !proc_cmdline(rc->pid, buf, sizeof(buf)))
		ret = trace_writer__meta(rc->w, "cmdline", buf);
	if (rc->py.warning[0])
		pr_warn("%s", rc->py.warning);
	/* -- CMD that exec'd Python: said as for a Python command, all in place before it runs */
	if (!rc->o->quiet && rc->child && !strcmp(how, "exec"))
		pr_info("recording pid %d (Python %s, %s)", rc->pid, rc->py.version, rc->py.path);
	else if (!rc->o->quiet)
		pr_info("pid %d runs Python %s (%s) since %s: recording its calls", rc->pid,
			rc->py.version, rc->py.path,
			strcmp(how, "exec") ? "it mapped it" : "its exec");
	return ret;
}

/* What follows a process with no Python at start: an exec or a libpython later. */
int record_open_target(struct recording *rc)
{
	struct target_opts to = {
	    .pid = rc->pid,
	    .held = rc->child && !rc->py.info,
	    .has_python = rc->py.info,
	    .libs = rc->libs,
	    .fn = late_python,
	    .ctx = rc,
	};
	int ret = target__new(&to, &rc->tg);

	return ret ?: rc->py.info ? 0 : libwatch__subscribe(rc->libs, target__on_lib, rc->tg);
}
