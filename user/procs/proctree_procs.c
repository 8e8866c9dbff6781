// SPDX-License-Identifier: MIT
/*
 * The processes of a set, by pid: the table every event looks its process
 * up in, and what names each process's own trace. Below proctree.c (the
 * BPF side, routing), proctree_hold.c (ptrace) and proctree_roots.c (the
 * processes a set starts with).
 */
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "proc/procfs.h"
#include "procs/proctree_int.h"

/* Every Python event looks its process up: by a hash, not a walk of all forks so far. */
struct tree_proc *tree_find_proc(struct proctree *pt, pid_t pid)
{
	uint64_t *i;

	if (pt->last && pt->procs[pt->last - 1].pid == pid)
		return &pt->procs[pt->last - 1];
	i = u64map__get(&pt->by_pid, (uint64_t)pid);
	if (!i)
		return NULL;
	pt->last = *i;
	return &pt->procs[*i - 1];
}

/*
 * What names the process's own trace: its command line and its rank
 * (torchrun and torch.distributed's env:// give RANK and WORLD_SIZE; a
 * LOCAL_RANK alone names the file). Kept if the process is gone already.
 */
void tree_read_identity(struct tree_proc *p)
{
	char buf[4096];

	if (proc_cmdline(p->pid, buf, sizeof(buf)))
		return;
	free(p->cmdline);
	p->cmdline = strdup(buf);
	proc_environ_number(p->pid, "RANK", p->dist_rank, sizeof(p->dist_rank));
	memcpy(p->rank, p->dist_rank, sizeof(p->rank));
	if (!p->rank[0])
		proc_environ_number(p->pid, "LOCAL_RANK", p->rank, sizeof(p->rank));
	proc_environ_number(p->pid, "WORLD_SIZE", p->world, sizeof(p->world));
}

struct tree_proc *tree_new_proc(struct proctree *pt, pid_t pid, int pidfd)
{
	struct tree_proc *n;

	n = realloc(pt->procs, (pt->nprocs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	pt->procs = n;
	/* a pid given back and taken again names the newest entry */
	if (u64map__put(&pt->by_pid, (uint64_t)pid, pt->nprocs + 1))
		return NULL;
	n = &pt->procs[pt->nprocs++];
	*n = (struct tree_proc){.pid = pid, .pidfd = pidfd};
	return n;
}
