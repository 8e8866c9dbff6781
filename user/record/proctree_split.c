// SPDX-License-Identifier: MIT
/* record --per-process: one trace per process, named by its rank or pid. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "procs/proctree.h"
#include "trace/slice.h"
#include "trace/trace.h"
#include "trace/trace_open.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* Whether another process of the recording that ran Python has the same rank. */
static bool rank_shared(const struct proctree *pt, size_t i, const char *rank)
{
	struct proctree_proc q;

	for (size_t j = 0; j < proctree__nprocs(pt); j++) {
		proctree__proc(pt, j, &q);
		if (j != i && q.ran_python && !strcmp(q.rank, rank))
			return true;
	}
	return false;
}

/*
 * OUT.rank0.ptg as HTA and torch.profiler's tensorboard handler expect one
 * file per rank; DataLoader workers forked by a rank share its RANK, so
 * those that share one get their pid too.
 */
static void proc_path(const struct proctree *pt, size_t i, const struct proctree_proc *p,
		      const char *out, char *buf, size_t len)
{
	size_t n = strlen(out);
	char name[64];

	if (!p->rank[0])
		snprintf(name, sizeof(name), "pid%d", p->pid);
	else if (!p->ran_python || rank_shared(pt, i, p->rank))
		snprintf(name, sizeof(name), "rank%s.pid%d", p->rank, p->pid);
	else
		snprintf(name, sizeof(name), "rank%s", p->rank);
	if (ends_with(out, ".ptg"))
		snprintf(buf, len, "%.*s.%s.ptg", (int)(n - 4), out, name);
	else
		snprintf(buf, len, "%s.%s", out, name);
}

/* Whether pid is in the list A,B,C. */
static bool in_list(const char *list, pid_t pid)
{
	char *end;

	for (const char *s = list; s && *s; s = *end == ',' ? end + 1 : NULL) {
		if (strtol(s, &end, 10) == pid && (*end == ',' || !*end))
			return true;
	}
	return false;
}

static int write_one(const struct proctree_proc *p, const char *in, const char *gpu_pids,
		     const char *path)
{
	char pid[16];
	bool gpu = in_list(gpu_pids, p->pid);
	struct slice_meta meta[] = {
	    {"pid", pid},
	    {"pids", pid},
	    {"cmdline", p->cmdline},
	    {"python.version", p->py_version},
	    {"python.path", p->py_path},
	    /* the process's own GPU activity, if any: export --chrome gives it Kineto's rows */
	    {"cupti.pids", gpu ? pid : ""},
	    /* its rank (idle's cross-rank view); with the world size, Kineto's distributedInfo */
	    {"dist.rank", p->dist_rank},
	    {"dist.world_size", p->world_size},
	};
	size_t n = !p->dist_rank[0] ? 6 : p->world_size[0] ? 8 : 7;

	snprintf(pid, sizeof(pid), "%d", p->pid);
	if (!gpu_pids)
		meta[5] = meta[--n];
	return trace_slice_pid(in, path, (uint32_t)p->pid, meta, n);
}

/* The recording's cupti.pids (NULL if none), read before the traces are cut from it. */
static int gpu_pids_of(const char *in, char **out)
{
	struct trace_reader *r;
	const char *v;
	int err;

	*out = NULL;
	err = trace_open("split", in, &r);
	if (err)
		return err;
	v = trace_reader__meta(r, "cupti.pids");
	if (v && !(*out = strdup(v)))
		err = -ENOMEM;
	trace_reader__close(r);
	return err;
}

int proctree__split(const struct proctree *pt, const char *in, const char *out, bool quiet,
		    proctree_keep_fn keep, void *ctx)
{
	char path[PATH_MAX + 64], *gpu_pids;
	struct proctree_proc p;
	int err, files = 0;

	err = gpu_pids_of(in, &gpu_pids);
	for (size_t i = 0; !err && i < proctree__nprocs(pt); i++) {
		proctree__proc(pt, i, &p);
		/*
		 * a C/C++ program of the job (a launcher, a CUDA tool) with CUDA calls
		 * of its own, or one the user named: its off-CPU time at least
		 */
		if (!p.ran_python && !p.named && !(keep && keep(ctx, p.pid)))
			continue;
		proc_path(pt, i, &p, out, path, sizeof(path));
		err = write_one(&p, in, gpu_pids, path);
		if (err)
			break;
		if (!quiet)
			pr_info("wrote %s (pid %d)", path, p.pid);
		files++;
	}
	free(gpu_pids);
	return err ?: files;
}
