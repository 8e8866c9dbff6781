// SPDX-License-Identifier: MIT
/*
 * Where a recording's Python calls come from: the sys.monitoring agent in
 * the target (about cProfile's cost a call) wherever it can go, else the
 * uprobes on the eval loop (two traps a call, 1-20 us on the machines
 * measured: docs/benchmarks.md); and the one line that says which, and why.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "python/pymon.h"
#include "record/record.h"

/* What takes the uprobes for all the processes, whatever they run; NULL if nothing. */
static const char *set_needs_probes(const struct record_opts *o)
{
	/* processes that join later have no agent: one source for the whole set */
	if (o->children)
		return "--children";
	if (o->by_uid)
		return "--uid";
	if (o->cgroup)
		return "--cgroup";
	return NULL;
}

int record_choose_python(struct recording *rc, const struct py_interp *const *pys, size_t n)
{
	struct record_opts *o = rc->o;
	const char *set = set_needs_probes(o);
	char err[sizeof(rc->py_why) - 64] = "";
	int ret = 0;

	o->in_process = false;
	if (o->py_from == RECORD_PY_UPROBES) {
		/* a retry after the agent's refusal keeps that reason */
		if (!rc->py_why[0])
			snprintf(rc->py_why, sizeof(rc->py_why), "--uprobes");
		return 0;
	}
	/* --in-process with these was refused with the options already */
	if (set) {
		snprintf(rc->py_why, sizeof(rc->py_why), "%s", set);
		return 0;
	}
	/*
	 * A command's first calls come before an agent could go in (it needs
	 * the interpreter started, to take its GIL): the uprobes take them, and
	 * the agent the rest from where its script starts
	 */
	if (o->cmd) {
		/* a set (proctree.c) has none, then one each: its own check says so */
		rc->py_handover =
		    record_py_handover(o, n == 1 ? pys[0] : NULL, rc->py_why, sizeof(rc->py_why));
		if (rc->py_handover && pys[0]->info)
			snprintf(rc->py_why, sizeof(rc->py_why),
				 "-- CMD: until its script starts, then in-process");
		else if (!rc->py_why[0])
			snprintf(rc->py_why, sizeof(rc->py_why), "-- CMD");
		return 0;
	}
	for (size_t i = 0; i < n && !ret; i++)
		ret = pymon__check(pys[i], err, sizeof(err));
	if (ret && o->py_from == RECORD_PY_AGENT) {
		pr_err("record --in-process: %s", err);
		return ret;
	}
	if (ret) {
		snprintf(rc->py_why, sizeof(rc->py_why), "%s", err);
		return 0;
	}
	o->in_process = true;
	rc->py_why[0] = '\0';
	return 0;
}

void record_say_python(const struct recording *rc)
{
	char agent[256] = "";

	if (rc->o->quiet)
		return;
	if (!rc->o->in_process) {
		pr_info("python calls: uprobes (%s)", rc->py_why);
		return;
	}
	pymon__describe(rc->pm, agent, sizeof(agent));
	pr_info("python calls: in-process (%s%s)", agent,
		rc->o->py_from == RECORD_PY_AGENT ? ", --in-process" : "");
}
