// SPDX-License-Identifier: MIT
/*
 * The metadata a recording writes at its start: where and what it records,
 * the clocks, and for one process its pid in a container and its rank; and
 * before that, the trace a killed recorder left where this one is to go.
 */
#include <limits.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/outfile.h"
#include "proc/procfs.h"
#include "record/record.h"
#include "trace/trace.h"

/*
 * The rank of a distributed job, as torchrun and torch.distributed's env://
 * give it to each process, so that export can say which rank a trace is of
 * (HTA tells the traces of a job apart by it).
 */
static int write_dist_meta(struct recording *rc)
{
	char rank[24], world[24];
	int err;

	/* RANK alone still names the trace's rank for idle's cross-rank view */
	if (proc_environ_number(rc->pid, "RANK", rank, sizeof(rank)))
		return 0;
	err = trace_writer__meta(rc->w, "dist.rank", rank);
	if (err || proc_environ_number(rc->pid, "WORLD_SIZE", world, sizeof(world)))
		return err;
	return trace_writer__meta(rc->w, "dist.world_size", world);
}

/*
 * A target in a container: its pid in each pid namespace, ours first, the
 * container's own last ("12345 1"), as NStgid in /proc/PID/status lists them.
 */
static int write_nspid_meta(struct recording *rc)
{
	struct proc_ns_ids ids;
	char buf[PROC_NS_MAX * 11];
	size_t n = 0;

	if (proc_ns_ids(rc->pid, rc->pid, &ids) || ids.levels < 2)
		return 0;
	for (unsigned int i = 0; i < ids.levels; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%u", i ? " " : "", ids.pid[i]);
	return trace_writer__meta(rc->w, "nspid", buf);
}

int write_meta(struct recording *rc)
{
	struct trace_writer *w = rc->w;
	char buf[4096];
	struct utsname u;
	int err = 0;

	uname(&u);
	err = err ?: trace_writer__meta(w, "source", "ptrace-gpu record");
	err = err ?: trace_writer__meta(w, "ptrace-gpu.version", PTG_VERSION);
	err = err ?: trace_writer__meta(w, "host", u.nodename);
	snprintf(buf, sizeof(buf), "%s %s %s", u.sysname, u.release, u.machine);
	err = err ?: trace_writer__meta(w, "kernel", buf);
	snprintf(buf, sizeof(buf), "%d", rc->pid);
	err = err ?: trace_writer__meta(w, "pid", buf);
	if (proc_cmdline(rc->pid, buf, sizeof(buf)))
		buf[0] = '\0';
	err = err ?: trace_writer__meta(w, "cmdline", buf);
	if (rc->py.info) {
		err = err ?: trace_writer__meta(w, "python.version", rc->py.version);
		err = err ?: trace_writer__meta(w, "python.path", rc->py.path);
	} else {
		err = err ?: trace_writer__meta(w, "python", "none");
	}
	err = err ?: trace_writer__meta(w, "clock", "CLOCK_MONOTONIC");
	/* one pair of readings maps every monotonic timestamp to wall time */
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)now_ns(CLOCK_REALTIME));
	err = err ?: trace_writer__meta(w, "start.realtime_ns", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rc->start_ts);
	err = err ?: trace_writer__meta(w, "start.monotonic_ns", buf);
	/* a trace of several processes is of no one process: --per-process writes each its own */
	err = err ?: (rc->tree ? 0 : write_nspid_meta(rc));
	return err ?: (rc->tree ? 0 : write_dist_meta(rc));
}

/*
 * A recorder killed before its rename leaves its trace in a hidden temporary
 * file, which reads up to its last complete chunk: say where it is. Never
 * removed: a recorder still writing it would look the same.
 */
void note_leftover(const char *out)
{
	char left[PATH_MAX];

	/* said even with -q, as before: a hidden trace on disk is not a status line */
	if (outfile_leftover(out, left, sizeof(left)))
		pr_err("note: %s is the trace of a recording killed before its "
		       "end, or of one still under way; report reads it; remove it when done",
		       left);
}
