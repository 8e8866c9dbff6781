// SPDX-License-Identifier: MIT
/*
 * record -- CMD of one Python process: its calls move from the uprobes to
 * the in-process agent where its script starts. An agent can go in only
 * once the interpreter runs (it needs its GIL), so the interpreter's own
 * start (site, encodings, what -m imports first) is the uprobes'; then a
 * probe on PySys_Audit() stops the main thread at Py_RunMain's audit event
 * "cpython.run_*" (bpf/pyframe.bpf.c, py_audit), where no Python frame is
 * on its stack. There, with everything the probes sent read, the agent
 * goes into that thread (which lends it the GIL: ptg_pymon_let_in()), the
 * uprobes come out, and the thread goes on: the script's first frame is
 * the agent's first. The trace is cut at one instant: the uprobes' events
 * before it, the agent's after, nothing twice and nothing missing.
 *
 * On 3.11 the agent is a C profile function on each thread, which reaches
 * a thread the script starts from its run() on (threading's profile hook,
 * as cProfile and torch.profiler): the calls of threading's bootstrap
 * before it are the uprobes' alone, as with record -p. Not where another
 * thread runs Python at that point, inside frames the uprobes saw begin
 * (the agent looks, under the GIL: PTG_PYMON_ALONE): said, and the
 * uprobes keep the process.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "pyinterp/launch.h"
#include "python/pyframe.h"
#include "python/pymon.h"
#include "ptrace_gpu/events.h"
#include "record/record.h"
#include "tracer/tracer.h"

bool record_py_handover(const struct record_opts *o, const struct py_interp *py, char *why,
			size_t len)
{
	if (!o->cmd || o->children || o->by_uid || o->cgroup || o->py_from != RECORD_PY_AUTO)
		return false;
	/* --hold, --per-process: recorded as a set (user/procs/proctree.c), by the uprobes */
	if (record_is_tree(o) || !py) {
		snprintf(why, len, "-- CMD with --hold or --per-process");
		return false;
	}
	/* a launcher (env, sh, a chroot): what it execs is looked at then */
	if (!py->info) {
		snprintf(why, len,
			 "-- CMD runs no Python yet: a Python it execs goes in-process "
			 "where its script starts");
		return true;
	}
	return pymon__check(py, why, len) == 0;
}

static void stays(struct recording *rc, const char *why)
{
	snprintf(rc->py_why, sizeof(rc->py_why), "-- CMD: the agent did not go in: %s", why);
	if (!rc->o->quiet)
		pr_info("pid %d: python calls stay on the uprobes: %s", rc->pid, why);
}

/*
 * The main thread stopped where its script starts: everything the uprobes
 * sent is read first (its stack is empty), then the agent goes in; the
 * uprobes come out only once it is in, so either way no call is missing.
 */
static void hand_over(struct recording *rc, pid_t tid, uint64_t ts)
{
	struct pymon *pm = NULL;
	char agent[128] = "";
	uint64_t cut;
	int err;

	/* PyTorch's ops went to an op agent before the script started (a .pth that imports it) */
	if (rc->pm) {
		stays(rc, "an agent of its ops alone is in already");
		return;
	}
	err = tracer__poll(rc->tracer, 0);
	if (err < 0) {
		stays(rc, strerror(-err));
		return;
	}
	err = pymon__open(&rc->py, rc->tracer, rc->o->agent_ring_mb, rc->start_time, &pm);
	if (err) {
		stays(rc, "its ring or stack reader could not be made");
		return;
	}
	pymon__hold(pm, tid);
	/* the uprobes' from here on are cut off once it is in, at the instant it says */
	pymon__since(pm, UINT64_MAX);
	/* its ops: the agent's callback from the first (record_python.c, on_urg) */
	pymon__set_ops(pm, rc->o->op_probes || rc->o->no_ops ? NULL : rc->ops);
	pymon__fall_back(pm);
	err = pymon__attach(pm);
	if (err) {
		stays(rc, pymon__failure(pm) ?: strerror(-err));
		/* its handlers stay registered: they read nothing of it */
		pymon__drop(pm);
		rc->dropped_pm = pm;
		return;
	}
	/*
	 * The cut: the agent's callbacks were in at began, and no frame of any
	 * thread began between the two (it held the GIL, and found no other
	 * thread in Python: PTG_PYMON_ALONE); the stopped thread ran none since ts
	 */
	cut = pymon__began(pm) > ts ? pymon__began(pm) : ts;
	pymon__since(pm, cut);
	pyframe__hand_over(rc->pf, cut);
	rc->pm = pm;
	rc->o->in_process = true;
	rc->py_why[0] = '\0';
	if (!rc->o->quiet) {
		pymon__describe(pm, agent, sizeof(agent));
		pr_info("pid %d: python calls in-process from its script's start (%s); its "
			"interpreter's start-up by uprobes",
			rc->pid, agent);
	}
}

static enum launch_urg on_urg(void *ctx, pid_t pid, pid_t tid)
{
	struct recording *rc = ctx;
	uint64_t ts = 0;

	if (!rc->py_handover || rc->py_handover_done || pid != rc->pid || tid != pid ||
	    pyframe__handover_state(rc->pf, pid, &ts) != PTG_PY_HANDOVER_STOPPED)
		return LAUNCH_URG_NOT_OURS;
	rc->py_handover_done = true;
	pyframe__handover_off(rc->pf, pid);
	hand_over(rc, tid, ts);
	return LAUNCH_URG_RESUME;
}

int record_arm_py_handover(struct recording *rc)
{
	int err;

	if (!rc->py_handover)
		return 0;
	err = pyframe__handover_arm(rc->pf, rc->pid);
	if (!err)
		err = launch__on_urg(on_urg, rc);
	if (err) {
		pyframe__handover_off(rc->pf, rc->pid);
		rc->py_handover_done = true; /* what the child was held for: nothing now */
		snprintf(rc->py_why, sizeof(rc->py_why),
			 "-- CMD: no stop at its script's start for the agent (%s)",
			 err == -ENOENT ? "no PySys_Audit in its interpreter" : strerror(-err));
	}
	return 0;
}

/* Not stopped for it: the script never started (an embedder), or could not be stopped. */
void record_py_handover_end(struct recording *rc)
{
	uint64_t ts = 0;

	if (!rc->py_handover || rc->py_handover_done)
		return;
	if (pyframe__handover_state(rc->pf, rc->pid, &ts) == PTG_PY_HANDOVER_UNSTOPPED) {
		rc->py_handover_done = true;
		pyframe__handover_off(rc->pf, rc->pid);
		stays(rc, "its main thread could not be stopped at its script's start (a SIGURG "
			  "handler, or SIGURG blocked)");
	}
}
