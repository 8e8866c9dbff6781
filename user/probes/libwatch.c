// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "libwatch.skel.h"
#include "probes/libwatch.h"
#include "proc/elf_file.h"
#include "proc/libsearch.h"

#define MAX_SUBSCRIBERS 8

/* offered ahead, before it was mapped (and offered again once mapped) */
#define SEEN_AHEAD  1
#define SEEN_MAPPED 2

/* watched libraries a process was counted for (lib_unprobed_window), once each */
#define MAX_COUNTED 8

struct subscriber {
	libwatch_fn fn;
	void *ctx;
};

/* One process watched: where its loader looks, and whether it was scanned once. */
struct lw_proc {
	pid_t pid;
	struct libsearch *search;
	unsigned search_gen; /* of the search path last looked ahead in */
	bool attached;	     /* the first scan is done: what appears now was loaded late */
	dev_t exe_dev;	     /* the image scanned last (a set): one that differs at a */
	ino_t exe_ino;	     /* loader event exec'd since, its exec event not read yet */
	uint64_t counted[MAX_COUNTED]; /* inodes of its unprobed windows, said once each */
	unsigned ncounted;
	bool exec_met; /* its last exec met at an old loader event, before proctree's */
};

/* A loader file probed, in a set: for every process that runs it */
struct lw_ld {
	uint64_t inode;
	struct bpf_link *link;
};

/* A watched library's probes went in at ts. */
struct lw_probed {
	uint64_t ts;
	uint64_t inode;
	char *path;
};

struct libwatch {
	struct tracer *t;
	pid_t pid; /* -1: the processes of a traced set (libwatch__open_set) */
	struct libwatch_bpf *skel;
	struct lw_ld *lds; /* one process: the one loader it runs now; a set: every one */
	size_t nlds;
	struct subscriber subs[MAX_SUBSCRIBERS];
	int nsubs;
	/*
	 * inode -> SEEN_*. One map for a set too: a probe sits on the file for
	 * every process of the set, so a file probed for one is probed for all.
	 */
	struct u64map seen;
	/*
	 * watched library inode -> when its probes went in (CLOCK_MONOTONIC):
	 * a set's process that exec'd before then ran it unprobed, even when
	 * it was probed for another process meanwhile.
	 */
	struct u64map probed_at;
	struct lw_probed *probed; /* the same in order, named: for a process gone before its scan */
	size_t nprobed;
	size_t nmapped;	       /* mappings the last scan read: none when it was gone */
	struct lw_proc *procs; /* one process: procs[0] */
	size_t nprocs;
	struct u64map by_pid; /* pid -> index + 1 in procs */
	struct lw_proc *cur;  /* the process being scanned */
	uint64_t notice_ts;   /* the loader's first notice since the last scan */
	bool at_exec;	      /* a set's process scanned at its exec ... */
	uint64_t exec_ts;     /* ... which it made then */
	uint64_t late;	      /* late libraries mapped before they could be probed */
};

struct find_ld {
	char path[PATH_MAX];
	uint64_t inode;
};

static int find_ld(const struct proc_map *m, void *arg)
{
	struct find_ld *f = arg;
	const char *base = strrchr(m->path, '/');

	if (!base || strncmp(base + 1, "ld-linux", 8))
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	f->inode = m->inode;
	return 1;
}

/*
 * Libraries a target maps late (PyTorch maps libcuda at its first CUDA call)
 * whose first calls matter: probed by path before they are mapped, since a
 * uprobe lives on the file and goes live as the file is mapped, while one
 * attached after the loader's notification misses the calls made meanwhile.
 * libcudart-HASH is the copy older PyTorch wheels bundle.
 */
static const char *const late_libs[] = {"libcuda.so.1", "libcudart.so.1[1-3]*",
					"libcudart-*.so.1[1-3]*", "libtorch_cpu.so*"};

/*
 * Any copy of those, under whatever name a full-path dlopen gives it (the
 * toolkit's stubs/libcuda.so): loaded late without having been found
 * ahead, its first calls may be missing.
 */
static const char *const watched_libs[] = {"libcuda.so*", "libcudart.so*", "libcudart-*.so*",
					   "libtorch_cpu.so*"};

static bool is_watched_lib(const char *path)
{
	const char *base = strrchr(path, '/');

	for (size_t i = 0; i < sizeof(watched_libs) / sizeof(watched_libs[0]); i++) {
		if (!fnmatch(watched_libs[i], base ? base + 1 : path, 0))
			return true;
	}
	return false;
}

/* A watched library's probes are in now (probed_at). */
static int mark_probed(struct libwatch *lw, uint64_t inode, const char *path)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	struct lw_probed *n;

	if (u64map__get(&lw->probed_at, inode))
		return 0;
	n = realloc(lw->probed, (lw->nprobed + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	lw->probed = n;
	n[lw->nprobed].ts = now;
	n[lw->nprobed].inode = inode;
	n[lw->nprobed].path = strdup(path);
	if (!n[lw->nprobed].path || u64map__put(&lw->probed_at, inode, now)) {
		free(n[lw->nprobed].path);
		return -ENOMEM;
	}
	lw->nprobed++;
	return 0;
}

/*
 * Offers subscribers the file dir/name of the target's root, when it was
 * not offered yet; its RPATH/RUNPATH joins the search path (a PyTorch
 * wheel's libtorch points at the nvidia/<name>/lib folders of other wheels).
 */
static int offer_ahead(void *ctx, const char *dir, const char *name)
{
	struct libwatch *lw = ctx;
	struct proc_map m = {.perms = "r-xp"};
	char path[PATH_MAX + 32];
	struct stat st;
	int err = 0;

	snprintf(m.path, sizeof(m.path), "%s/%s", strcmp(dir, "/") ? dir : "", name);
	snprintf(path, sizeof(path), "/proc/%d/root%s", lw->cur->pid, m.path);
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return 0;
	m.inode = st.st_ino;
	clean_path(m.path); /* named as maps will name it; opened as the loader will open it */
	if (u64map__get(&lw->seen, m.inode))
		return 0;
	if (u64map__put(&lw->seen, m.inode, SEEN_AHEAD))
		return -ENOMEM;
	err = libsearch__add_object(lw->cur->search, m.path, path);
	for (int j = 0; !err && j < lw->nsubs; j++)
		err = lw->subs[j].fn(lw->subs[j].ctx, &m, path, 0);
	return err ?: mark_probed(lw, m.inode, m.path);
}

/*
 * Offers subscribers the late libraries the target would load, before it
 * maps them: every copy on its search path, since which one the loader
 * takes depends on who calls dlopen; bias 0 since nothing is mapped yet
 * (subscribers that attach by file offset need none). Each is offered
 * again once mapped, for those that need it mapped (CUPTI): the others
 * remember what they probed. Again whenever the search path grew.
 */
static int probe_ahead(struct libwatch *lw)
{
	struct lw_proc *p = lw->cur;
	int err = 0;

	while (!err && p->search_gen != libsearch__generation(p->search)) {
		p->search_gen = libsearch__generation(p->search);
		for (size_t i = 0; !err && i < sizeof(late_libs) / sizeof(late_libs[0]); i++)
			err = libsearch__find(p->search, late_libs[i], offer_ahead, lw);
	}
	return err;
}

/*
 * A late library mapped without having been found ahead (dlopen of a full
 * path off the search path): its probes went in (at probed) only after the
 * loader's notice reached us, so the calls made meanwhile are missing. The
 * window is said and counted, never left silent; once per process and file.
 */
static void note_unprobed(struct libwatch *lw, uint64_t inode, const char *path, uint64_t probed)
{
	struct lw_proc *p = lw->cur;

	lw->late++;
	if (p->ncounted < MAX_COUNTED)
		p->counted[p->ncounted++] = inode;
	if (lw->at_exec) {
		/* exec_ts 0: met at a loader event of its old image, its exec not read yet */
		uint64_t from = lw->exec_ts ?: lw->notice_ts;

		pr_warn("libwatch: pid %d exec'd a program that links %s, not probed before, and "
			"ran %s%.1f ms from its exec until it was probed: its calls meanwhile "
			"are not in the trace",
			lw->cur->pid, path, lw->exec_ts ? "" : "up to ",
			from && probed > from ? (probed - from) / 1e6 : 0.0);
		return;
	}
	pr_warn("libwatch: %s was loaded from outside the target's search path "
		"and probed %.1f ms after the loader's notice: its calls meanwhile are not "
		"in the trace",
		path,
		lw->notice_ts && probed > lw->notice_ts ? (probed - lw->notice_ts) / 1e6 : 0.0);
}

static bool counted(const struct lw_proc *p, uint64_t inode)
{
	for (unsigned i = 0; i < p->ncounted; i++) {
		if (p->counted[i] == inode)
			return true;
	}
	return false;
}

/*
 * A set's process scanned at its exec ran from that exec until it was held
 * (or, met at a loader event of its old image, from before its exec): a
 * watched library whose probes went in after that, for it or for another
 * process of the set, may have been called meanwhile.
 */
static bool exec_window(struct libwatch *lw, const struct proc_map *m)
{
	uint64_t since = lw->exec_ts ?: lw->notice_ts;
	uint64_t *at = u64map__get(&lw->probed_at, m->inode);

	return lw->at_exec && is_watched_lib(m->path) && !counted(lw->cur, m->inode) &&
	       (!at || *at > since);
}

static int on_map(const struct proc_map *m, void *arg)
{
	struct libwatch *lw = arg;
	char path[PATH_MAX + 32];
	uint64_t bias, *seen, *at;
	bool unprobed;
	int err = 0;

	lw->nmapped++;
	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->inode)
		return 0;
	seen = u64map__get(&lw->seen, m->inode);
	if (seen && *seen == SEEN_MAPPED) {
		/* probed already, maybe only after this process's exec */
		at = u64map__get(&lw->probed_at, m->inode);
		if (at && exec_window(lw, m))
			note_unprobed(lw, m->inode, m->path, *at);
		return 0;
	}
	/* late: mapped after the first scan, not found ahead; or at an exec, above */
	unprobed = lw->at_exec ? exec_window(lw, m)
			       : lw->cur->attached && !seen && is_watched_lib(m->path);
	if (u64map__put(&lw->seen, m->inode, SEEN_MAPPED))
		return -ENOMEM;
	proc_target_path(lw->cur->pid, m->path, m->inode, path, sizeof(path));
	if (elf_load_bias(path, m->start, m->offset, &bias))
		return 0; /* not an ELF object we can read: nothing to probe there */
	/* what it loads next is looked up along its own RPATH/RUNPATH */
	err = libsearch__add_object(lw->cur->search, m->path, path);
	for (int i = 0; !err && i < lw->nsubs; i++)
		err = lw->subs[i].fn(lw->subs[i].ctx, m, path, bias);
	if (!err && is_watched_lib(m->path))
		err = mark_probed(lw, m->inode, m->path);
	if (!err && unprobed)
		note_unprobed(lw, m->inode, m->path, *u64map__get(&lw->probed_at, m->inode));
	return err;
}

static int scan(struct libwatch *lw, struct lw_proc *p)
{
	int err;

	lw->cur = p;
	lw->nmapped = 0;
	err = proc_maps__for_each(p->pid, on_map, lw);
	lw->notice_ts = 0;
	/* the process may be gone by the time its last loader event is read */
	if (err == -ENOENT || err == -ESRCH)
		return 0;
	/* a newly mapped object's RUNPATH may show where the next dlopen looks */
	return err ?: probe_ahead(lw);
}

/* The process pid of a set: met at its first loader event or exec if not added. */
static int proc_of(struct libwatch *lw, pid_t pid, struct lw_proc **out)
{
	uint64_t *i = u64map__get(&lw->by_pid, (uint64_t)pid);
	struct lw_proc *n;
	int err;

	if (i) {
		*out = &lw->procs[*i - 1];
		return 0;
	}
	n = realloc(lw->procs, (lw->nprocs + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	lw->procs = n;
	n = &lw->procs[lw->nprocs];
	*n = (struct lw_proc){.pid = pid, .search_gen = UINT_MAX}; /* look ahead at least once */
	err = libsearch__open(pid, &n->search);
	if (err)
		return err;
	if (u64map__put(&lw->by_pid, (uint64_t)pid, lw->nprocs + 1)) {
		libsearch__free(n->search);
		return -ENOMEM;
	}
	lw->nprocs++;
	*out = n;
	return 0;
}

static int exec_proc(struct libwatch *lw, struct lw_proc *p);
static int attach_proc(struct libwatch *lw, struct lw_proc *p);

/* Whether a set's process runs another image than at its last scan; remembers this one. */
static bool exe_changed(struct lw_proc *p)
{
	char link[64];
	struct stat st;
	bool changed;

	snprintf(link, sizeof(link), "/proc/%d/exe", p->pid);
	if (stat(link, &st))
		return false; /* gone, or a kernel thread: its scan says so */
	changed = p->exe_ino && (st.st_dev != p->exe_dev || st.st_ino != p->exe_ino);
	p->exe_dev = st.st_dev;
	p->exe_ino = st.st_ino;
	return changed;
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct libwatch *lw = ctx;
	struct lw_proc *p = &lw->procs[0];
	int err;

	if (e->aux != PTG_LIB_EXEC && !lw->notice_ts)
		lw->notice_ts = e->ts;
	if (lw->pid < 0) {
		err = proc_of(lw, (pid_t)e->pid, &p);
		/* a member gone before it was met: nothing of it to probe */
		if (err == -ENOENT || err == -ESRCH)
			return 0;
		if (err)
			return err;
		/*
		 * A member met first here: a fork that loads a library (an exec
		 * is met at its exec). What it maps that was not seen, in it or
		 * its parent, it loaded late.
		 */
		if (!p->attached && e->aux != PTG_LIB_EXEC) {
			p->attached = true;
			return attach_proc(lw, p);
		}
	}
	if (e->aux == PTG_LIB_EXEC)
		return exec_proc(lw, p);
	/*
	 * A loader event of a set's process read after it exec'd (the event
	 * came before the exec; proctree's exec event is next in the ring):
	 * its new image is met here, as at its exec, its start unknown.
	 */
	if (lw->pid < 0 && exe_changed(p)) {
		p->exec_met = true;
		lw->at_exec = true;
		lw->exec_ts = 0;
		err = exec_proc(lw, p);
		lw->at_exec = false;
		return err;
	}
	return scan(lw, p);
}

static int write_losses(struct tracer *t, void *ctx)
{
	struct libwatch *lw = ctx;
	int err = 0;

	if (lw->skel->bss->lost)
		err = trace_writer__lost(tracer__writer(t), PTG_LOST_LIB_EVENT, UINT32_MAX,
					 lw->skel->bss->lost);
	if (!err && lw->late)
		err = trace_writer__lost(tracer__writer(t), PTG_LOST_LIB_UNPROBED_WINDOW,
					 UINT32_MAX, lw->late);
	return err;
}

/* pid -1 with traced_fd: the processes of that set (libwatch__open_set) */
static int open_common(struct tracer *t, pid_t pid, int traced_fd, struct libwatch **out)
{
	struct libwatch *lw;
	struct lw_proc *p;
	int err;

	lw = calloc(1, sizeof(*lw));
	if (!lw)
		return -ENOMEM;
	lw->t = t;
	lw->pid = pid;
	if (pid >= 0) {
		err = proc_of(lw, pid, &p);
		if (err) {
			pr_err("libwatch: cannot read the target's library search path: %s",
			       strerror(-err));
			libwatch__destroy(lw);
			return err;
		}
	}
	lw->skel = libwatch_bpf__open();
	if (!lw->skel) {
		err = -errno;
		goto cleanup;
	}
	lw->skel->rodata->filter_tgids = traced_fd >= 0;
	err = bpf_map__reuse_fd(lw->skel->maps.events, tracer__ringbuf_fd(t));
	if (!err && traced_fd >= 0)
		err = bpf_map__reuse_fd(lw->skel->maps.tgids, traced_fd);
	err = err ?: libwatch_bpf__load(lw->skel);
	if (!err && pid >= 0) {
		__u32 tgid = (__u32)pid;
		__u8 one = 1;

		if (bpf_map_update_elem(bpf_map__fd(lw->skel->maps.tgids), &tgid, &one, BPF_ANY))
			err = -errno;
	}
	err = err
		  ?: tracer__on(t, PTG_EV_LIB_CHANGE, PTG_EV_LIB_CHANGE, handle_event, write_losses,
				lw);
	if (err)
		goto cleanup;
	*out = lw;
	return 0;
cleanup:
	log_libbpf_flush();
	pr_err("libwatch: cannot load the loader probe: %s", strerror(-err));
	libwatch__destroy(lw);
	return err;
}

int libwatch__open(struct tracer *t, pid_t pid, struct libwatch **out)
{
	return open_common(t, pid, -1, out);
}

int libwatch__open_set(struct tracer *t, int traced_fd, struct libwatch **out)
{
	return open_common(t, -1, traced_fd, out);
}

int libwatch__subscribe(struct libwatch *lw, libwatch_fn fn, void *ctx)
{
	if (lw->nsubs == MAX_SUBSCRIBERS)
		return -E2BIG;
	lw->subs[lw->nsubs++] = (struct subscriber){.fn = fn, .ctx = ctx};
	return 0;
}

/*
 * The probe on the loader process p runs, unless that file is probed
 * already. One process: on it alone, in place of the loader it ran before
 * an exec. A set: on the file for every process, filtered in BPF.
 */
static int attach_ld(struct libwatch *lw, struct lw_proc *p)
{
	struct find_ld ld = {};
	char path[PATH_MAX + 32];
	struct bpf_link *link;
	struct lw_ld *n;
	int err;

	/* a static executable has no dynamic loader, and then maps nothing later */
	if (proc_maps__for_each(p->pid, find_ld, &ld) != 1)
		return 0;
	for (size_t i = 0; i < lw->nlds; i++) {
		if (lw->lds[i].inode == ld.inode)
			return 0;
	}
	proc_target_path(p->pid, ld.path, ld.inode, path, sizeof(path));
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	link = bpf_program__attach_uprobe_opts(lw->skel->progs.dl_debug_state, lw->pid, path, 0,
					       &opts);
	if (!link) {
		err = -errno;
		log_libbpf_flush();
		pr_err("libwatch: cannot attach to %s: %s", ld.path, strerror(-err));
		return err;
	}
	if (lw->pid >= 0 && lw->nlds) {
		bpf_link__destroy(lw->lds[0].link);
		lw->nlds = 0;
	}
	n = realloc(lw->lds, (lw->nlds + 1) * sizeof(*n));
	if (!n) {
		bpf_link__destroy(link);
		return -ENOMEM;
	}
	lw->lds = n;
	lw->lds[lw->nlds++] = (struct lw_ld){.inode = ld.inode, .link = link};
	return 0;
}

static int attach_exec(struct libwatch *lw)
{
	int err;

	if (lw->skel->links.lib_exec)
		return 0;
	lw->skel->links.lib_exec = bpf_program__attach(lw->skel->progs.lib_exec);
	if (!lw->skel->links.lib_exec) {
		err = -errno;
		log_libbpf_flush();
		pr_err("libwatch: cannot attach to sched_process_exec: %s", strerror(-err));
		return err;
	}
	return 0;
}

static int attach_proc(struct libwatch *lw, struct lw_proc *p)
{
	int err = attach_ld(lw, p);

	exe_changed(p);
	/* the mapped objects' RUNPATHs first, then ahead along the whole search path */
	err = err ?: scan(lw, p);
	p->attached = true;
	return err;
}

int libwatch__attach(struct libwatch *lw)
{
	return attach_exec(lw) ?: attach_proc(lw, &lw->procs[0]);
}

int libwatch__add_pid(struct libwatch *lw, pid_t pid)
{
	struct lw_proc *p;
	int err;

	err = proc_of(lw, pid, &p);
	if (!err && !p->attached)
		err = attach_proc(lw, p);
	/* gone already: nothing of it to probe */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

static int exec_proc(struct libwatch *lw, struct lw_proc *p)
{
	struct libsearch *search;
	int err;

	/* a new image: its own environment, executable and RUNPATHs to search along */
	err = libsearch__open(p->pid, &search);
	if (!err) {
		libsearch__free(p->search);
		p->search = search;
		p->search_gen = UINT_MAX;
	}
	/* what the new image's loader mapped before its first instruction was not loaded late */
	p->attached = false;
	exe_changed(p);
	err = err ?: attach_ld(lw, p);
	err = err ?: scan(lw, p);
	p->attached = true;
	/* gone already: exited right after its exec */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

int libwatch__exec(struct libwatch *lw)
{
	return exec_proc(lw, &lw->procs[0]);
}

/*
 * pid was gone (or a zombie) before its exec was read: what it mapped is
 * unknown. A watched library whose probes went in after its exec (for
 * another process of the set) may be one it ran unprobed.
 */
static void note_gone(struct libwatch *lw, const struct lw_proc *p, pid_t pid, uint64_t exec_ts)
{
	size_t first = 0, n = 0;

	/* not those said already, at a loader event read after this exec */
	for (size_t i = 0; i < lw->nprobed; i++) {
		if (lw->probed[i].ts > exec_ts && !(p && counted(p, lw->probed[i].inode)) &&
		    n++ == 0)
			first = i;
	}
	if (!n)
		return;
	lw->late++;
	pr_warn("libwatch: pid %d exec'd and exited before it could be looked at, and %s%s was "
		"probed only %.1f ms after that exec: if it ran %s, its calls are not in the trace",
		pid, lw->probed[first].path, n > 1 ? " (and others)" : "",
		(lw->probed[first].ts - exec_ts) / 1e6, n > 1 ? "those" : "that library");
}

int libwatch__exec_pid(void *ctx, pid_t pid, uint64_t exec_ts)
{
	struct libwatch *lw = ctx;
	struct lw_proc *p = NULL;
	int err;

	lw->nmapped = 0;
	err = proc_of(lw, pid, &p);
	/*
	 * Met already at a loader event of its old image, read after this
	 * exec: said then, and what was probed since was probed ahead of it.
	 */
	if (!err && p->exec_met) {
		p->exec_met = false;
		err = exec_proc(lw, p);
		return err == -ENOENT || err == -ESRCH ? 0 : err;
	}
	lw->at_exec = true;
	lw->exec_ts = exec_ts;
	err = err ?: exec_proc(lw, p);
	lw->at_exec = false;
	/* no mapping read: gone, or a zombie, before its exec was read */
	if ((!err || err == -ENOENT || err == -ESRCH) && !lw->nmapped)
		note_gone(lw, p, pid, exec_ts);
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

void libwatch__detach(struct libwatch *lw)
{
	for (size_t i = 0; i < lw->nlds; i++)
		bpf_link__destroy(lw->lds[i].link);
	lw->nlds = 0;
	bpf_link__destroy(lw->skel->links.lib_exec);
	lw->skel->links.lib_exec = NULL;
}

void libwatch__destroy(struct libwatch *lw)
{
	if (!lw)
		return;
	if (lw->skel)
		libwatch__detach(lw);
	libwatch_bpf__destroy(lw->skel);
	u64map__free(&lw->seen);
	u64map__free(&lw->probed_at);
	for (size_t i = 0; i < lw->nprobed; i++)
		free(lw->probed[i].path);
	free(lw->probed);
	for (size_t i = 0; i < lw->nprocs; i++)
		libsearch__free(lw->procs[i].search);
	free(lw->procs);
	free(lw->lds);
	u64map__free(&lw->by_pid);
	free(lw);
}
