/* SPDX-License-Identifier: MIT */
/*
 * Private to libwatch.c and libwatch_unprobed.c: the watcher's state, and
 * what the second says and counts of the libraries a process ran unprobed.
 */
#ifndef PTG_LIBWATCH_INT_H
#define PTG_LIBWATCH_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/u64map.h"
#include "libwatch/libwatch_types.h"
#include "tracer/tracer.h"

#define MAX_SUBSCRIBERS 8

/* offered ahead, before it was mapped (and offered again once mapped) */
#define SEEN_AHEAD  1
#define SEEN_MAPPED 2
/* offered ahead and not probed (LIBWATCH_WHEN_MAPPED): probed only once mapped */
#define SEEN_WHEN_MAPPED 3

struct subscriber {
	libwatch_fn fn;
	void *ctx;
};

struct proc_subscriber {
	libwatch_proc_fn fn;
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
};

/* A library a process ran unprobed for a while: said and counted once (lib_unprobed_window). */
struct lw_window {
	pid_t pid;
	uint64_t inode;
};

/* A loader file probed, in a set: for every process that runs it */
struct lw_ld {
	uint64_t inode;
	struct bpf_link *link;
};

/* A watched library probed: its name, for a process that had it mapped unprobed. */
struct lw_probed {
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
	struct proc_subscriber psubs[MAX_SUBSCRIBERS];
	int npsubs;
	/*
	 * inode -> SEEN_*. One map for a set too: a probe sits on the file for
	 * every process of the set, so a file probed for one is probed for all.
	 */
	struct u64map seen;
	/*
	 * watched library inode -> when its probes went in (CLOCK_MONOTONIC);
	 * also in the BPF map probed, so that a mapping of one that is not in
	 * yet is reported (PTG_LIB_MAP), whoever maps it and whenever it is read.
	 */
	struct u64map probed_at;
	struct lw_probed *probed; /* the same, named */
	size_t nprobed;
	struct lw_window *windows; /* the unprobed windows said */
	size_t nwindows;
	struct lw_proc *procs; /* one process: procs[0] */
	size_t nprocs;
	struct u64map by_pid; /* pid -> index + 1 in procs */
	struct lw_proc *cur;  /* the process being scanned */
	uint64_t notice_ts;   /* the loader's first notice since the last scan */
	bool at_exec;	      /* a set's process scanned at its exec ... */
	uint64_t exec_ts;     /* ... which it made then */
	uint64_t late;	      /* late libraries mapped before they could be probed */
	bool notice_held;     /* the notice being handled stopped its thread until now */
	/*
	 * tid -> its last notice's ts when that notice stopped it, else 0:
	 * the reports that follow a notice tell whether its thread waited
	 */
	struct u64map last_notice;
	libwatch_exec_fn exec_fn;
	void *exec_ctx;
	/* libwatch__look_ahead(): inodes the target maps now, left to the first scan */
	struct u64map *mapped_now;
};

/* A library file name the watcher cares about once mapped (libcuda, libcudart, libtorch_cpu). */
bool lw_is_watched_lib(const char *path);
/* Whether pid's window for the library inode was said already. */
bool lw_window_said(const struct libwatch *lw, pid_t pid, uint64_t inode);
/*
 * The late library inode (path) mapped by lw->cur was probed only at probed
 * (CLOCK_MONOTONIC), after the loader's notice or its exec: said and counted.
 */
/* later: found ahead, but probed only once mapped (LIBWATCH_WHEN_MAPPED) */
int lw_note_unprobed(struct libwatch *lw, uint64_t inode, const char *path, uint64_t probed,
		     bool later);
/* The BPF side's PTG_LIB_MAP report: a watched library mapped with no probe on it. */
int lw_on_lib_map(struct libwatch *lw, const struct ptg_event *e, size_t size);
/* From the first scan on, the BPF side reports such mappings (or says once that it cannot). */
void lw_attach_unprobed(struct libwatch *lw);

#endif /* PTG_LIBWATCH_INT_H */
