// SPDX-License-Identifier: MIT
/*
 * The CUPTI agent in each process of a set (record -p A,B, --children,
 * --uid, --cgroup): which processes map NVIDIA's driver and get the agent
 * injected, once per process image; which agents are still awaited; the
 * GPU activity of each process in record's summary. The connections
 * themselves are gpu.c's, one decoder per agent as for one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "gpu/cupti_decode.h"
#include "gpu/cupti_int.h"
#include "gpu/cupti_set.h"
#include "proc/procfs.h"
#include "proc/procopen.h"

#ifdef PTG_HAVE_CUPTI

int cupti__start_set(struct cupti *c, struct trace_writer *w, int set_fd, bool launched)
{
	struct peer_rule r = {.set = true, .launched = launched};

	if (!c)
		return 0;
	/* our own copy: the reader looks peers up until cupti__free(), after proctree is gone */
	r.set_fd = fcntl(set_fd, F_DUPFD_CLOEXEC, 0);
	if (r.set_fd < 0)
		return -errno;
	mtx_lock(&c->lock);
	c->rule = r;
	mtx_unlock(&c->lock);
	cupti_wake_reader(c);
	c->w = w;
	c->is_set = true;
	c->launched = launched;
	c->started = true;
	return 0;
}

static struct set_proc *find_proc(struct cupti *c, pid_t pid)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		if (c->procs[i].pid == pid)
			return &c->procs[i];
	}
	return NULL;
}

static struct set_proc *new_proc(struct cupti *c)
{
	struct set_proc *n = realloc(c->procs, (c->nprocs + 1) * sizeof(*n));

	if (!n)
		return NULL;
	c->procs = n;
	c->procs[c->nprocs] = (struct set_proc){};
	return &c->procs[c->nprocs++];
}

/* The path we open, then the one maps shows (for messages) after its NUL, in one allocation. */
static char *driver_names(const char *open_path, const char *name)
{
	size_t a = strlen(open_path) + 1, b = strlen(name) + 1;
	char *s = malloc(a + b);

	if (s) {
		memcpy(s, open_path, a);
		memcpy(s + a, name, b);
	}
	return s;
}

int cupti__on_proc_map(void *ctx, pid_t pid, const struct proc_map *m)
{
	struct cupti *c = ctx;
	char path[PATH_MAX + 32];
	struct set_proc *p;
	const char *base;
	uint64_t start;
	int err;

	/* -- CMD: each process loads the agent itself, through CUDA_INJECTION64_PATH */
	if (!c || !c->is_set || c->launched)
		return 0;
	p = find_proc(c, pid);
	if (!m) {
		/* exec: the new image has no agent, and gets one if it maps the driver */
		if (p) {
			free(p->driver);
			*p = c->procs[--c->nprocs];
		}
		return 0;
	}
	base = strrchr(m->path, '/');
	if (!base || strncmp(base + 1, "libcuda.so", 10))
		return 0;
	/* gone already: nothing to inject into */
	if (proc_start_time(pid, &start))
		return 0;
	/* each scan of pid meets its libcuda again: once per process */
	if (p && p->start_time == start)
		return 0;
	p = p ?: new_proc(c);
	if (!p)
		return -ENOMEM;
	free(p->driver);
	/*
	 * Whether it is NVIDIA's is read at injection: here, in the middle of
	 * libwatch's scan, it would delay the probes of what the process just
	 * mapped, and its first calls would go unseen.
	 */
	*p = (struct set_proc){.pid = pid, .start_time = start, .state = SP_DONE};
	/* opened as mapped and kept (procopen.h): read after the process may be gone */
	err = proc_map_path(pid, m, path, sizeof(path));
	if (err)
		return err == -ENOMEM ? err : 0;
	p->driver = driver_names(path, m->path);
	p->state = SP_DUE;
	return p->driver ? 0 : -ENOMEM;
}

/* Whether p maps NVIDIA's driver, said once for a stand-in: CUPTI works with no other. */
static bool is_nvidia(struct cupti *c, struct set_proc *p)
{
	bool ret = cupti_nvidia_driver(p->driver);

	if (!ret && !c->quiet && !c->not_nvidia_said)
		pr_info("%s is not NVIDIA's driver: no CUPTI agent",
			p->driver + strlen(p->driver) + 1);
	c->not_nvidia_said |= !ret;
	free(p->driver);
	p->driver = NULL;
	return ret;
}

void cupti_set_inject(struct cupti *c)
{
	uint64_t start;

	for (size_t i = 0; i < c->nprocs; i++) {
		struct set_proc *p = &c->procs[i];

		if (p->state != SP_DUE)
			continue;
		p->state = SP_DONE;
		if (!is_nvidia(c, p))
			continue;
		/* exited (or its pid is another's) since it mapped the driver: no GPU work to see
		 */
		if (proc_start_time(p->pid, &start) || start != p->start_time)
			continue;
		if (cupti_inject(c, p->pid, p->start_time))
			continue;
		p->state = SP_EXPECT;
		p->inject_ms = now_ms(CLOCK_MONOTONIC);
	}
}

void cupti_set_free(struct cupti *c)
{
	for (size_t i = 0; i < c->nprocs; i++)
		free(c->procs[i].driver);
	free(c->procs);
	c->procs = NULL;
	c->nprocs = 0;
}

void cupti_set_timeouts(struct cupti *c)
{
	uint64_t now = now_ms(CLOCK_MONOTONIC);

	for (size_t i = 0; i < c->nprocs; i++) {
		struct set_proc *p = &c->procs[i];

		if (p->state != SP_EXPECT || now - p->inject_ms <= CONNECT_WAIT_MS)
			continue;
		p->state = SP_DONE;
		cupti_warn_no_connect(p->pid);
	}
}

void cupti_set_connected(struct cupti *c, pid_t pid)
{
	struct set_proc *p = find_proc(c, pid);

	if (p && p->state == SP_EXPECT)
		p->state = SP_DONE;
}

bool cupti_set_waiting(const struct cupti *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		if (c->procs[i].state == SP_EXPECT)
			return true;
	}
	return false;
}

static void add_stats(struct cupti_decode_stats *t, const struct cupti_decode_stats *s)
{
	t->kernels += s->kernels;
	t->memcpys += s->memcpys;
	t->memsets += s->memsets;
	t->syncs += s->syncs;
	t->api_calls += s->api_calls;
	t->api_joined += s->api_joined;
	t->cupti_dropped += s->cupti_dropped;
}

/* Whether conns[i] is the first active one of its pid: a pid is counted once. */
static bool first_of_pid(const struct cupti *c, int i)
{
	for (int j = 0; j < i; j++) {
		if (c->conns[j].dec && c->conns[j].active && c->conns[j].peer == c->conns[i].peer)
			return false;
	}
	return true;
}

int cupti_sum_stats(const struct cupti *c, pid_t pid, struct cupti_decode_stats *t)
{
	int procs = 0;

	/* an exec'd process may have had an agent in each image: one connection each */
	for (int i = 0; i < MAX_CONNS; i++) {
		const struct conn *k = &c->conns[i];

		if (!k->dec || !k->active || (pid && k->peer != pid))
			continue;
		procs += first_of_pid(c, i);
		add_stats(t, cupti_decoder__stats(k->dec));
	}
	return procs;
}

int cupti_pids_meta(struct cupti *c)
{
	char buf[4096];
	size_t len = 0;
	int n;

	for (int i = 0; i < MAX_CONNS; i++) {
		const struct conn *k = &c->conns[i];

		if (!k->dec || !k->active || !first_of_pid(c, i))
			continue;
		n = snprintf(buf + len, sizeof(buf) - len, "%s%d", len ? "," : "", k->peer);
		/* a list cut short still says "several" */
		if (n < 0 || (size_t)n >= sizeof(buf) - len)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return trace_writer__meta(c->w, "cupti.pids", buf);
}

void cupti_summary_procs(const struct cupti *c)
{
	struct cupti_decode_stats t;

	for (int i = 0; i < MAX_CONNS; i++) {
		const struct conn *k = &c->conns[i];

		if (!k->dec || !k->active || !first_of_pid(c, i))
			continue;
		t = (struct cupti_decode_stats){};
		cupti_sum_stats(c, k->peer, &t);
		pr_info("  GPU of pid %d: %llu kernels, %llu copies, %llu memsets, %llu syncs, "
			"%llu CUDA calls",
			k->peer, (unsigned long long)t.kernels, (unsigned long long)t.memcpys,
			(unsigned long long)t.memsets, (unsigned long long)t.syncs,
			(unsigned long long)t.api_calls);
	}
}

bool cupti__has_pid(void *ctx, pid_t pid)
{
	const struct cupti *c = ctx;

	for (int i = 0; c && i < MAX_CONNS; i++) {
		if (c->conns[i].dec && c->conns[i].peer == pid)
			return true;
	}
	return false;
}

#endif /* PTG_HAVE_CUPTI */
