// SPDX-License-Identifier: MIT
/*
 * The late libraries a process ran with no probe on them, for a while
 * (docs/late-libs.md, "A library that cannot be found ahead"): each window
 * is said on stderr and counted (loss lib_unprobed_window), once per
 * process and file, whether a scan found it or the BPF side reported it.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "base/log.h"
#include "libwatch.skel.h"
#include "libwatch/libwatch_int.h"

/*
 * Any copy of the late libraries (libwatch.c's late_libs), under whatever
 * name a full-path dlopen gives it (the toolkit's stubs/libcuda.so): loaded
 * late without having been found ahead, its first calls may be missing.
 */
static const char *const watched_libs[] = {"libcuda.so*", "libcudart.so*", "libcudart-*.so*",
					   "libtorch_cpu.so*"};

bool lw_is_watched_lib(const char *path)
{
	const char *base = strrchr(path, '/');

	for (size_t i = 0; i < sizeof(watched_libs) / sizeof(watched_libs[0]); i++) {
		if (!fnmatch(watched_libs[i], base ? base + 1 : path, 0))
			return true;
	}
	return false;
}

bool lw_window_said(const struct libwatch *lw, pid_t pid, uint64_t inode)
{
	for (size_t i = 0; i < lw->nwindows; i++) {
		if (lw->windows[i].pid == pid && lw->windows[i].inode == inode)
			return true;
	}
	return false;
}

/* pid ran the library inode unprobed for a while: counted (lib_unprobed_window), once. */
static int count_window(struct libwatch *lw, pid_t pid, uint64_t inode)
{
	struct lw_window *n = realloc(lw->windows, (lw->nwindows + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	lw->windows = n;
	n[lw->nwindows++] = (struct lw_window){.pid = pid, .inode = inode};
	lw->late++;
	return 0;
}

/*
 * A late library mapped without having been found ahead (dlopen of a full
 * path off the search path): its probes went in (at probed) only after the
 * loader's notice reached us, so the calls made meanwhile are missing. The
 * window is said and counted, never left silent; once per process and file.
 */
int lw_note_unprobed(struct libwatch *lw, uint64_t inode, const char *path, uint64_t probed,
		     bool later)
{
	int err = count_window(lw, lw->cur->pid, inode);
	const char *hint;

	if (err)
		return err;
	if (lw->at_exec) {
		pr_warn("libwatch: pid %d exec'd a program that links %s, not probed before, and "
			"ran %.1f ms from its exec until it was probed: its calls meanwhile are "
			"not in the trace",
			lw->cur->pid, path,
			probed > lw->exec_ts ? (probed - lw->exec_ts) / 1e6 : 0.0);
		return 0;
	}
	/* one process, not held: --hold would have made the loading thread wait */
	hint = lw->pid >= 0 ? " (record --hold makes the loading thread wait for its probes)" : "";
	if (later)
		pr_warn("libwatch: %s was probed %.1f ms after the loader's notice of its mapping "
			"(without uprobe_multi its probes are not put on ahead: minutes to take "
			"out): its calls meanwhile are not in the trace%s",
			path,
			lw->notice_ts && probed > lw->notice_ts ? (probed - lw->notice_ts) / 1e6
								: 0.0,
			hint);
	else
		pr_warn("libwatch: %s was loaded from outside the target's search path "
			"and probed %.1f ms after the loader's notice: its calls meanwhile are "
			"not in the trace%s",
			path,
			lw->notice_ts && probed > lw->notice_ts ? (probed - lw->notice_ts) / 1e6
								: 0.0,
			hint);
	return 0;
}

/* The path the library inode was probed by, else NULL. */
static const char *probed_path(const struct libwatch *lw, uint64_t inode)
{
	for (size_t i = 0; i < lw->nprobed; i++) {
		if (lw->probed[i].inode == inode)
			return lw->probed[i].path;
	}
	return NULL;
}

/*
 * The BPF side found that pid had a watched library (inode a) mapped at
 * e->ts with no probe on it: at a loader notice, before the code of what
 * was just mapped ran (b PTG_LIB_MAP_NOTICE, or _HELD when that notice
 * stopped the thread), or as the process ended (b PTG_LIB_MAP_EXIT). Its calls from
 * then until the probes went in are not in the trace, whatever the scans
 * saw: it was probed ahead while it ran on, or it ended before anyone
 * looked. The notice itself was read just before (its scan said what it
 * says of a late library); what no scan said is said here. Once per
 * process and file.
 */
int lw_on_lib_map(struct libwatch *lw, const struct ptg_event *e, size_t size)
{
	const struct ptg_lib_map_event *m = (const void *)e;
	pid_t pid = (pid_t)e->pid;
	char name[PTG_LIB_NAME_LEN];
	const char *path;
	char exe[64];
	struct stat st;
	uint64_t *at;

	if (size < sizeof(*m))
		return 0;
	memcpy(name, m->name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	if (!lw_is_watched_lib(name) || lw_window_said(lw, pid, e->a))
		return 0;
	at = u64map__get(&lw->probed_at, e->a);
	if (at && *at <= e->ts)
		return 0; /* in before: the BPF map is put just after */
	/*
	 * Its thread waited at the notice (read just before) until the notice
	 * was handled: probed then, before it ran on. The last notice of the
	 * thread is this report's: the two are read in the order they were made.
	 */
	if (at && m->e.b == PTG_LIB_MAP_HELD && u64map__get(&lw->last_notice, e->tid) &&
	    *u64map__get(&lw->last_notice, e->tid))
		return 0;
	path = probed_path(lw, e->a) ?: name;
	/* a zombie has no exe either: its mappings are gone */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	if (at)
		pr_warn("libwatch: pid %d had %s mapped %.1f ms before its probes went in: its "
			"calls meanwhile are not in the trace",
			pid, path, (*at - e->ts) / 1e6);
	else if (e->b == PTG_LIB_MAP_EXIT || stat(exe, &st))
		pr_warn("libwatch: pid %d had %s (inode %llu) mapped and ended before it could be "
			"probed: its calls are not in the trace",
			pid, path, (unsigned long long)e->a);
	else
		pr_warn("libwatch: pid %d has %s mapped, which could not be probed: its calls are "
			"not in the trace",
			pid, path);
	return count_window(lw, pid, e->a);
}

/* Whether the kernel has the VMA iterator the BPF side reports unprobed libraries with. */
static bool have_vma_iter(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool ret = btf && btf__find_by_name_kind(btf, "bpf_iter_task_vma_new", BTF_KIND_FUNC) > 0;

	btf__free(btf);
	return ret;
}

/*
 * From now on the watched libraries a process has mapped with no probe on
 * them are reported, at its loader's notices (the uprobe reports them) and
 * when it ends (lib_exit). Without that the late libraries are still probed,
 * but a window no scan saw (a process that ran on, or ended, before it was
 * looked at) would go unsaid: that is said once instead.
 */
void lw_attach_unprobed(struct libwatch *lw)
{
	const char *what = "sched_process_exit";
	int err = 0;

	if (lw->skel->links.lib_exit)
		return;
	lw->skel->links.lib_exit = bpf_program__attach(lw->skel->progs.lib_exit);
	if (!lw->skel->links.lib_exit) {
		err = -errno;
	} else if (!have_vma_iter()) {
		what = "bpf_iter_task_vma";
		err = -EOPNOTSUPP;
	}
	if (!err)
		return;
	log_libbpf_flush();
	pr_warn("libwatch: cannot see what a process has mapped from the kernel (%s: %s): the "
		"calls to a CUDA or PyTorch library that a process mapped before its probes "
		"went in may be missing without a further note",
		what, strerror(-err));
}
