// SPDX-License-Identifier: MIT
/*
 * The sampler's processes: which ones to sample (-p, or every Python
 * process with -a), their interpreter and layout, their entry in the BPF
 * procs map, and their end. The sampling loop itself is in user/sample/sample.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/array.h"
#include "base/log.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "sample.skel.h"
#include "sample/sample_procs.h"
#include "sample/sample_resolve.h"

/* Field 22 of /proc/PID/stat: tells a process from a later one with the same pid. */
static int proc_starttime(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: fields count from the last ')' */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EIO;
	*out = strtoull(p + 1, NULL, 10);
	return 0;
}

struct sproc *sampler_proc(struct sampler *s, uint32_t tgid)
{
	uint64_t *idx = u64map__get(&s->proc_idx, tgid);

	return idx ? s->procs[*idx - 1] : NULL;
}

static void proc_bpf_value(const struct sproc *sp, struct ptg_sample_proc *v)
{
	const struct py_version_info *vi = sp->py.info;

	memset(v, 0, sizeof(*v));
	v->runtime_addr = sp->py.runtime_addr;
	v->off = vi->off;
	/*
	 * The code block's start is where the fingerprint fields begin. -E2BIG
	 * is about record's buffers: the sampler reads its own windows.
	 */
	(void)py_offsets_blocks(&v->off, vi->code_adaptive);
}

static int proc_register(struct sampler *s, struct sproc *sp)
{
	struct ptg_sample_proc v;
	uint32_t key = (uint32_t)sp->pid;
	int err;

	if (array_grow((void **)&s->procs, &s->procs_cap, s->nprocs + 1, sizeof(*s->procs)) ||
	    u64map__put(&s->proc_idx, key, s->nprocs + 1))
		return -ENOMEM;
	s->procs[s->nprocs++] = sp;
	proc_bpf_value(sp, &v);
	err = bpf_map_update_elem(bpf_map__fd(s->skel->maps.procs), &key, &v, BPF_ANY);
	if (err) {
		err = -errno;
		pr_err("sample: cannot add pid %d to the BPF map: %s", sp->pid, strerror(-err));
	}
	return err;
}

#define MAX_TMPLS 32

struct tmpl_match {
	struct sampler *s;
	struct py_interp *py;
	struct proc_map *map; /* the interpreter's first mapping in this process */
};

static int match_tmpl(const struct proc_map *m, void *arg)
{
	struct tmpl_match *tm = arg;

	if (m->offset || m->path[0] != '/')
		return 0;
	for (size_t i = 0; i < tm->s->ntmpls; i++) {
		const struct interp_tmpl *t = &tm->s->tmpls[i];

		if (t->inode != m->inode || strcmp(t->py.path, m->path))
			continue;
		/* the same file: only where it is loaded differs (0 for a non-PIE executable) */
		*tm->py = t->py;
		*tm->map = *m;
		tm->py->bias = t->py.bias + (m->start - t->start);
		tm->py->runtime_addr = t->py.runtime_addr - t->py.bias + tm->py->bias;
		return 1;
	}
	return 0;
}

static int tmpl_start(const struct proc_map *m, void *arg)
{
	struct interp_tmpl *t = arg;

	if (m->offset || strcmp(m->path, t->py.path))
		return 0;
	t->start = m->start;
	t->inode = m->inode;
	return 1;
}

/*
 * py_interp__find() reads the interpreter's ELF file, a few milliseconds;
 * with -a on a host that starts Python processes all day, each file is read
 * once and later processes only look up where they mapped it.
 */
static int find_interp(struct sampler *s, pid_t pid, struct py_interp *py, char *err, size_t errlen)
{
	struct tmpl_match tm = {s, py, NULL};
	struct interp_tmpl *t;
	int ret;

	if (s->ntmpls && !(tm.map = malloc(sizeof(*tm.map))))
		return -ENOMEM;
	ret = s->ntmpls ? proc_maps__for_each(pid, match_tmpl, &tm) : 0;
	if (ret == 1) {
		py->pid = pid;
		/* the same path and inode, but its own mapping: opened as mapped, checked again */
		ret = proc_map_path(pid, tm.map, py->attach_path, sizeof(py->attach_path));
		free(tm.map);
		if (ret)
			snprintf(err, errlen, "cannot open %s of process %d: %s", py->path, pid,
				 strerror(-ret));
		return ret;
	}
	free(tm.map);
	ret = py_interp__find(pid, py, err, errlen);
	if (ret || s->ntmpls >= MAX_TMPLS)
		return ret;
	if (!s->tmpls && !(s->tmpls = calloc(MAX_TMPLS, sizeof(*s->tmpls))))
		return 0;
	t = &s->tmpls[s->ntmpls];
	t->py = *py;
	if (proc_maps__for_each(pid, tmpl_start, t) == 1)
		s->ntmpls++;
	return 0;
}

int sampler_add_pid(struct sampler *s, pid_t pid, char *err, size_t errlen)
{
	struct sproc *sp = calloc(1, sizeof(*sp));
	char path[64], comm[64], interp[64];
	struct proc_ns_ids ids;
	int ret;

	if (!sp)
		return -ENOMEM;
	sp->memfd = -1;
	if (sampler_proc(s, (uint32_t)pid) && sampler_proc(s, (uint32_t)pid)->alive) {
		free(sp);
		return 0; /* given twice */
	}
	ret = find_interp(s, pid, &sp->py, err, errlen);
	if (!ret)
		ret = proc_starttime(pid, &sp->starttime);
	if (ret)
		goto cleanup;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	sp->memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (proc_comm(pid, pid, comm, sizeof(comm)))
		snprintf(comm, sizeof(comm), "%d", pid);
	snprintf(interp, sizeof(interp), "CPython %s", sp->py.version);
	sp->pid = pid;
	if (!proc_ns_ids(pid, pid, &ids) && ids.levels > 1)
		sp->ns_pid = ids.pid[ids.levels - 1];
	sp->alive = true;
	sp->last_gen = s->gen;
	sp->comm = tables_str(&s->t, comm);
	sp->interp = tables_str(&s->t, interp);
	if (!sp->comm || !sp->interp) {
		ret = -ENOMEM;
		goto cleanup;
	}
	/* the mappings now: native stacks still resolve after the process ended */
	if (s->o.native)
		proc_syms__load(s->syms, pid, &sp->syms);
	ret = proc_register(s, sp);
	if (ret)
		return ret; /* registered: freed with the sampler */
	if (s->o.verbose)
		pr_debug("sample: pid %d (%s, Python %s)", pid, comm, sp->py.version);
	return 0;
cleanup:
	sproc_free(sp);
	return ret;
}

static uint64_t exe_hash(pid_t pid)
{
	char path[64], exe[PATH_MAX];
	uint64_t h = 14695981039346656037ull;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, sizeof(exe));
	if (n <= 0)
		return 1; /* kernel threads have none */
	return u64map_hash(h, exe, (size_t)n) | 1;
}

/* -a: a pid not seen before, or one that ran exec since, is looked at once. */
static void scan_pid(struct sampler *s, pid_t pid)
{
	struct sproc *sp = sampler_proc(s, (uint32_t)pid);
	uint64_t h, *seen;
	char err[512] = "";
	int ret;

	if (pid == getpid() || (sp && sp->alive))
		return;
	h = exe_hash(pid);
	seen = u64map__get(&s->others, (uint64_t)pid);
	if (seen && *seen == h)
		return;
	ret = sampler_add_pid(s, pid, err, sizeof(err));
	if (!ret)
		return;
	if (u64map__put(&s->others, (uint64_t)pid, h))
		return;
	/* said once per process: the pid stays in others until it runs something else */
	/* -ESRCH, -ENOENT: it ended while being looked at */
	if (ret == -EPROTONOSUPPORT ||
	    (s->o.verbose && ret != -ENOEXEC && ret != -ESRCH && ret != -ENOENT))
		pr_warn("sample: skipping pid %d: %s", pid, err[0] ? err : strerror(-ret));
}

void sampler_scan_all(struct sampler *s)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (isdigit((unsigned char)de->d_name[0]))
			scan_pid(s, (pid_t)strtol(de->d_name, NULL, 10));
	}
	closedir(d);
}

void sampler_check_exits(struct sampler *s)
{
	for (size_t i = 0; i < s->nprocs; i++) {
		struct sproc *sp = s->procs[i];
		uint64_t st;
		uint32_t key;

		if (!sp->alive || (proc_starttime(sp->pid, &st) == 0 && st == sp->starttime))
			continue;
		sp->alive = false;
		key = (uint32_t)sp->pid;
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.procs), &key);
		if (sp->memfd >= 0)
			close(sp->memfd);
		sp->memfd = -1;
		if (s->o.verbose)
			pr_debug("sample: pid %d (%s) ended", sp->pid, sp->comm);
	}
}

size_t sampler__live(const struct sampler *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nprocs; i++)
		n += s->procs[i]->alive;
	return n;
}
