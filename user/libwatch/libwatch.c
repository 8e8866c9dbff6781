// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/u64map.h"
#include "libwatch.skel.h"
#include "libwatch/libwatch.h"
#include "libwatch/libwatch_builds.h"
#include "libwatch/libwatch_int.h"
#include "proc/elf_file.h"
#include "proc/kfeat.h"
#include "proc/libsearch.h"
#include "proc/procopen.h"
#include "tracer/teardown.h"

struct find_ld {
	struct proc_map m;
};

KFEAT_SKEL_OPEN_VARIANT(libwatch_bpf)

static int find_ld(const struct proc_map *m, void *arg)
{
	struct find_ld *f = arg;
	const char *base = strrchr(m->path, '/');

	if (!base || strncmp(base + 1, "ld-linux", 8))
		return 0;
	f->m = *m;
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
 * A watched library's probes are in now (probed_at); from now on the BPF side
 * no longer reports its mappings. A mapping between the two is reported and
 * then found to be later than the probes.
 */
static int mark_probed(struct libwatch *lw, uint64_t inode, const char *path)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	struct lw_probed *n;
	__u8 one = 1;

	if (u64map__get(&lw->probed_at, inode))
		return 0;
	/* full (1024 files): its mappings are reported still, and found probed here */
	bpf_map_update_elem(bpf_map__fd(lw->skel->maps.probed), &inode, &one, BPF_ANY);
	n = realloc(lw->probed, (lw->nprobed + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	lw->probed = n;
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
	bool later = false;
	struct stat st;
	int err = 0;

	snprintf(m.path, sizeof(m.path), "%s/%s", strcmp(dir, "/") ? dir : "", name);
	/*
	 * Resolved inside the target's root (its links lead nowhere outside)
	 * and kept open: the probes go on the file looked at here.
	 */
	if (proc_root_path(lw->cur->pid, m.path, true, path, sizeof(path)) || stat(path, &st))
		return 0;
	m.inode = st.st_ino;
	m.dev = st.st_dev;
	clean_path(m.path); /* named as maps will name it; opened as the loader will open it */
	if (u64map__get(&lw->seen, m.inode))
		return 0;
	/* mapped already: its probes could fire at once, so they wait for the scan */
	if (lw->mapped_now && u64map__get(lw->mapped_now, m.inode))
		return 0;
	if (u64map__put(&lw->seen, m.inode, SEEN_AHEAD))
		return -ENOMEM;
	err = libsearch__add_object(lw->cur->search, m.path, path);
	for (int j = 0; !err && j < lw->nsubs; j++) {
		err = lw->subs[j].fn(lw->subs[j].ctx, &m, path, 0);
		if (err == LIBWATCH_WHEN_MAPPED)
			later = true;
		err = err > 0 ? 0 : err;
	}
	/* not in the BPF side's probed map: a held thread that maps it waits at the notice */
	if (!err && later)
		return u64map__put(&lw->seen, m.inode, SEEN_WHEN_MAPPED);
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
 * Each thread of process pid stopped at a loader notice now (the held map
 * has a few entries: one per thread that waits): fn, until it returns true.
 */
static bool for_each_held(const struct libwatch *lw, pid_t pid,
			  bool (*fn)(int fd, __u32 tid, void *arg), void *arg)
{
	int fd = bpf_map__fd(lw->skel->maps.held);
	__u32 key, next, *prev = NULL;
	struct ptg_lib_held h;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(fd, &key, &h) && h.tgid == (__u32)pid && fn(fd, key, arg))
			return true;
	}
	return false;
}

static bool any_held(int fd, __u32 tid, void *arg)
{
	(void)fd, (void)tid, (void)arg;
	return true;
}

/*
 * Whether a thread of the process (each one a holder has under ptrace)
 * waits at a loader notice now, until libwatch__held_stop() resumes it: a
 * scan for an earlier notice, read late, may be the one that finds what it
 * mapped, and that is no window either.
 */
bool libwatch__waits_at_notice(const struct libwatch *lw, pid_t pid)
{
	return lw && for_each_held(lw, pid, any_held, NULL);
}

/* m, the first time it is seen mapped: to the subscribers, and said if it came late. */
static int offer_mapped(struct libwatch *lw, const struct proc_map *m)
{
	char path[PATH_MAX + 32];
	uint64_t bias, *seen;
	bool unprobed, held, later;
	int err = 0;

	seen = u64map__get(&lw->seen, m->inode);
	if (seen && *seen == SEEN_MAPPED)
		return 0;
	later = seen && *seen == SEEN_WHEN_MAPPED;
	/*
	 * Late: mapped after the first scan (or by a set's process that ran
	 * on from its exec), and never offered. One probed already, ahead or
	 * for another process, may still have been mapped before its probes
	 * went in: the BPF side reports that (lw_on_lib_map()).
	 */
	unprobed = (lw->at_exec || lw->cur->attached) && (!seen || later) &&
		   lw_is_watched_lib(m->path) && !lw_window_said(lw, lw->cur->pid, m->inode);
	if (u64map__put(&lw->seen, m->inode, SEEN_MAPPED))
		return -ENOMEM;
	/* opened as mapped (procopen.h), and kept: subscribers attach to that very file */
	if (proc_map_path(lw->cur->pid, m, path, sizeof(path)) ||
	    elf_load_bias(path, m->start, m->offset, &bias))
		return 0; /* not an ELF object we can read: nothing to probe there */
	/* what it loads next is looked up along its own RPATH/RUNPATH */
	err = libsearch__add_object(lw->cur->search, m->path, path);
	for (int i = 0; !err && i < lw->nsubs; i++)
		err = lw->subs[i].fn(lw->subs[i].ctx, m, path, bias);
	if (!err && lw_is_watched_lib(m->path))
		err = mark_probed(lw, m->inode, m->path);
	held = unprobed && (lw->notice_held || libwatch__waits_at_notice(lw, lw->cur->pid));
	if (!err && held)
		pr_info("libwatch: pid %d loaded %s %s: it waited at the loader's notice until "
			"probed",
			lw->cur->pid, m->path,
			later ? "(probed only once mapped)" : "from outside its search path");
	else if (!err && unprobed)
		err = lw_note_unprobed(lw, m->inode, m->path,
				       *u64map__get(&lw->probed_at, m->inode), later);
	return err;
}

/*
 * Each executable mapping: to the per-process subscribers after the others,
 * so that one that lets go of a held process (to give it the CUPTI agent)
 * does so once the library's probes are in.
 */
static int on_map(const struct proc_map *m, void *arg)
{
	struct libwatch *lw = arg;
	int err;

	if (m->perms[2] != 'x' || m->path[0] != '/' || !m->inode)
		return 0;
	err = offer_mapped(lw, m);
	for (int i = 0; !err && i < lw->npsubs; i++)
		err = lw->psubs[i].fn(lw->psubs[i].ctx, lw->cur->pid, m);
	return err;
}

static int scan(struct libwatch *lw, struct lw_proc *p)
{
	int err;

	lw->cur = p;
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

static int notice(struct libwatch *lw, const struct ptg_event *e);

/*
 * The loader's notice (or an exec): what the process maps now. A notice
 * that stopped its thread (a = 1) is handled while the thread waits: what
 * it maps is probed before its first instruction, however it was loaded.
 */
static int on_notice(struct libwatch *lw, const struct ptg_event *e)
{
	int err;

	if (e->aux != PTG_LIB_EXEC && u64map__put(&lw->last_notice, e->tid, e->a == 1 ? e->ts : 0))
		return -ENOMEM;
	lw->notice_held = e->aux != PTG_LIB_EXEC && e->a == 1;
	err = notice(lw, e);
	lw->notice_held = false;
	return err;
}

static int notice(struct libwatch *lw, const struct ptg_event *e)
{
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
	if (e->aux == PTG_LIB_EXEC) {
		err = exec_proc(lw, p);
		/* the kernel's dev_t: 12 bits of major above 20 of minor */
		if (lw->pid >= 0 && lw->exec_fn)
			lw->exec_fn(lw->exec_ctx, makedev(e->b >> 20, e->b & 0xfffff), (ino_t)e->a,
				    e->ts);
		return err;
	}
	/*
	 * A loader event of a set's process read after it exec'd (the event
	 * came before the exec; a shell started by record -- CMD sends its
	 * last one once let go): proctree's exec event is next in the ring,
	 * and there the process is held while its new image is scanned.
	 * Scanning it here would probe its libraries while it runs on.
	 */
	if (lw->pid < 0 && exe_changed(p)) {
		lw->notice_ts = 0;
		return 0;
	}
	return scan(lw, p);
}

void libwatch__on_exec(struct libwatch *lw, libwatch_exec_fn fn, void *ctx)
{
	lw->exec_fn = fn;
	lw->exec_ctx = ctx;
}

static int handle_event(struct tracer *t, void *ctx, const struct ptg_event *e, size_t size)
{
	struct libwatch *lw = ctx;

	(void)t;
	if (e->aux == PTG_LIB_MAP)
		return lw_on_lib_map(lw, e, size);
	return on_notice(lw, e);
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
	if (kfeat_preempt_build()) {
		size_t size;
		const void *data = libwatch_preempt_elf(&size);

		lw->skel = libwatch_bpf__open_variant(data, size);
	} else {
		lw->skel = libwatch_bpf__open();
	}
	if (!lw->skel) {
		err = -errno;
		goto cleanup;
	}
	lw->skel->rodata->filter_tgids = traced_fd >= 0;
	lw->skel->rodata->recorder_tgid = (__u32)getpid();
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
	/* a set's members are in traced_fd only once their first scan is done */
	if (pid < 0)
		lw_attach_unprobed(lw);
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

int libwatch__subscribe_proc(struct libwatch *lw, libwatch_proc_fn fn, void *ctx)
{
	if (lw->npsubs == MAX_SUBSCRIBERS)
		return -E2BIG;
	lw->psubs[lw->npsubs++] = (struct proc_subscriber){.fn = fn, .ctx = ctx};
	return 0;
}

/*
 * The probe on the loader process p runs, unless that file is probed
 * already. One process: on it alone, in place of the loader it ran before
 * an exec. A set: on the file for every process, filtered in BPF.
 */
static int attach_ld(struct libwatch *lw, struct lw_proc *p)
{
	struct find_ld ld;
	char path[PATH_MAX + 32];
	struct bpf_link *link;
	struct lw_ld *n;
	int err;

	/* a static executable has no dynamic loader, and then maps nothing later */
	if (proc_maps__for_each(p->pid, find_ld, &ld) != 1)
		return 0;
	for (size_t i = 0; i < lw->nlds; i++) {
		if (lw->lds[i].inode == ld.m.inode)
			return 0;
	}
	/* the probe goes on the loader file mapped there, kept open (procopen.h) */
	err = proc_map_path(p->pid, &ld.m, path, sizeof(path));
	if (err == -ENOMEM)
		return err;
	if (err) {
		if (err != -ENOENT && err != -ESRCH)
			pr_warn("libwatch: libraries pid %d loads later are not watched: %s: %s",
				p->pid, ld.m.path, strerror(-err));
		return 0;
	}
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	link = bpf_program__attach_uprobe_opts(lw->skel->progs.dl_debug_state, lw->pid, path, 0,
					       &opts);
	if (!link) {
		err = -errno;
		log_libbpf_flush();
		pr_err("libwatch: cannot attach to %s: %s", ld.m.path, strerror(-err));
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
	lw->lds[lw->nlds++] = (struct lw_ld){.inode = ld.m.inode, .link = link};
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

static int note_mapped(const struct proc_map *m, void *ctx)
{
	return m->inode && u64map__put(ctx, m->inode, 1) ? -ENOMEM : 0;
}

int libwatch__look_ahead(struct libwatch *lw)
{
	struct lw_proc *p = &lw->procs[0];
	struct u64map mapped = {};
	int err;

	err = proc_maps__for_each(p->pid, note_mapped, &mapped);
	if (!err) {
		lw->cur = p;
		lw->mapped_now = &mapped;
		err = probe_ahead(lw);
		lw->mapped_now = NULL;
		/* the first scan looks again, along the RUNPATHs of what is mapped too */
		p->search_gen = UINT_MAX;
	}
	u64map__free(&mapped);
	/* gone: the attach says so */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

int libwatch__attach(struct libwatch *lw)
{
	int err = attach_exec(lw) ?: attach_proc(lw, &lw->procs[0]);

	/* after the first scan: what was mapped before it is no window of the recording */
	if (!err)
		lw_attach_unprobed(lw);
	return err;
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
	for (int i = 0; !err && i < lw->npsubs; i++)
		err = lw->psubs[i].fn(lw->psubs[i].ctx, p->pid, NULL);
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

int libwatch__exec_pid(void *ctx, pid_t pid, uint64_t exec_ts)
{
	struct libwatch *lw = ctx;
	struct lw_proc *p = NULL;
	int err;

	err = proc_of(lw, pid, &p);
	lw->at_exec = true;
	lw->exec_ts = exec_ts;
	err = err ?: exec_proc(lw, p);
	lw->at_exec = false;
	/*
	 * Gone, or a zombie, before its exec was read: what it mapped unprobed
	 * the BPF side reported, and that is read next (lw_on_lib_map()).
	 */
	return err == -ENOENT || err == -ESRCH ? 0 : err;
}

bool libwatch__held_stop(struct libwatch *lw, pid_t pid, pid_t tid)
{
	struct ptg_event e = {
	    .pid = (__u32)pid, .tid = (__u32)tid, .kind = PTG_EV_LIB_CHANGE, .a = 1};
	__u32 key = (__u32)tid;
	struct ptg_lib_held h;
	uint64_t *last;
	int fd, err = 0;

	if (!lw)
		return false;
	fd = bpf_map__fd(lw->skel->maps.held);
	if (bpf_map_lookup_elem(fd, &key, &h) || h.tgid != (__u32)pid)
		return false;
	e.ts = h.ts;
	/*
	 * The notice, in its place among the events before it; else (the stop
	 * was met while an event was being handled, or the notice was lost)
	 * the process as it is now. The thread waits until the entry goes (an
	 * earlier notice's scan, read now, may be what finds the library: no
	 * window either).
	 */
	if (!tracer__reading(lw->t))
		tracer__poll(lw->t, 0);
	last = u64map__get(&lw->last_notice, (uint64_t)tid);
	if (!last || *last != e.ts)
		err = on_notice(lw, &e);
	bpf_map_delete_elem(fd, &key);
	if (err)
		pr_warn("libwatch: pid %d, stopped at the loader's notice: %s", pid,
			strerror(-err));
	return true;
}

static bool delete_held(int fd, __u32 tid, void *arg)
{
	(void)arg;
	bpf_map_delete_elem(fd, &tid);
	return false;
}

void libwatch__held_gone(struct libwatch *lw, pid_t pid)
{
	if (lw)
		for_each_held(lw, pid, delete_held, NULL);
}

int libwatch__watch_python(struct libwatch *lw, pid_t pid, bool on)
{
	int fd = lw ? bpf_map__fd(lw->skel->maps.nopy) : -1;
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (fd < 0)
		return 0;
	if (!on)
		return bpf_map_delete_elem(fd, &key) && errno != ENOENT ? -errno : 0;
	return bpf_map_update_elem(fd, &key, &one, BPF_ANY) ? -errno : 0;
}

int libwatch__probed_ahead(struct libwatch *lw, uint64_t inode, const char *path)
{
	return lw ? mark_probed(lw, inode, path) : 0;
}

void libwatch__detach(struct libwatch *lw)
{
	for (size_t i = 0; i < lw->nlds; i++)
		teardown_link(lw->lds[i].link);
	lw->nlds = 0;
	bpf_link__destroy(lw->skel->links.lib_exec);
	lw->skel->links.lib_exec = NULL;
	bpf_link__destroy(lw->skel->links.lib_exit);
	lw->skel->links.lib_exit = NULL;
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
	free(lw->windows);
	for (size_t i = 0; i < lw->nprocs; i++)
		libsearch__free(lw->procs[i].search);
	free(lw->procs);
	free(lw->lds);
	u64map__free(&lw->by_pid);
	u64map__free(&lw->last_notice);
	free(lw);
}
