/* SPDX-License-Identifier: MIT */
/*
 * Which objects a target has mapped, now and later: subscribers hear of each
 * executable object once, when recording starts or when the dynamic loader
 * maps it (a uprobe on ld.so's _dl_debug_state wakes the scan), or when it
 * execs a new image (sched_process_exec).
 */
#ifndef PTG_LIBWATCH_H
#define PTG_LIBWATCH_H

#include <stdbool.h>
#include <sys/types.h>

#include "libwatch/libwatch_types.h"
#include "proc/procfs.h"
#include "tracer/tracer.h"

struct libwatch;

/* Watches the libraries of pid; subscribers hear of them (libwatch_types.h). */
int libwatch__open(struct tracer *t, pid_t pid, struct libwatch **out);
/*
 * The same for the processes of a set (record -p A,B, --children): those
 * in the BPF hash of tgids traced_fd (user/procs/proctree.c). Each loader
 * file is probed once, for every process, and each process's own search
 * path is looked ahead along; a library file is offered once, whichever
 * process maps it first, since probes on it are on it for all of them.
 */
int libwatch__open_set(struct tracer *t, int traced_fd, struct libwatch **out);
/*
 * A set's process to watch from now on: reports what it has mapped and
 * offers ahead what it would load late. Processes that join the set later
 * are met at their first loader event or exec (libwatch__exec_pid(): a set
 * hears of execs from proctree, which holds the process meanwhile, not from
 * an exec program of its own, whose event would be read once the process
 * has run on, perhaps into a later exec, while a long scan of a new
 * libtorch blocks the loop).
 */
int libwatch__add_pid(struct libwatch *lw, pid_t pid);

/* fn hears of each executable object once (libwatch_types.h). */
int libwatch__subscribe(struct libwatch *lw, libwatch_fn fn, void *ctx);
/* One process: fn after each exec of it was scanned (libwatch_types.h). One subscriber. */
void libwatch__on_exec(struct libwatch *lw, libwatch_exec_fn fn, void *ctx);
/* fn hears of each executable mapping of each process (libwatch_types.h). */
int libwatch__subscribe_proc(struct libwatch *lw, libwatch_proc_fn fn, void *ctx);
/*
 * One process, before the probes that fire at once go in: offers ahead the
 * late libraries that the target has not mapped (their probes cannot fire
 * before it maps them). Scanning PyTorch's ops takes up to seconds, which a
 * busy target would spend filling the ring buffer if it came after its
 * Python probes. libwatch__attach() then looks again (along the RUNPATHs of
 * what is mapped as well) and offers what is mapped.
 */
int libwatch__look_ahead(struct libwatch *lw);
/* One process: offers the late libraries ahead, attaches to ld.so, reports what is mapped. */
int libwatch__attach(struct libwatch *lw);
/*
 * After the target exec'd: probes its new loader, offers the late libraries
 * of its new root and reports what the new image has mapped. Called on the
 * exec event the BPF side sends, and by whoever holds the target at its exec.
 */
int libwatch__exec(struct libwatch *lw);
/*
 * A set's process pid exec()'d at exec_ts (a proctree_exec_fn, while
 * proctree holds it): the same for it as libwatch__exec() for one process.
 * It ran unheld from its exec until proctree stopped it: a late library its
 * new image maps that was never probed is said on stderr with that window
 * and counted (lib_unprobed_window). Any other window (probed after it was
 * mapped, or a process gone before it was looked at) the BPF side reports
 * from the process's mappings at its loader notices and at its end.
 */
int libwatch__exec_pid(void *lw, pid_t pid, uint64_t exec_ts);
/*
 * Thread tid of process pid, which we hold under ptrace, took a SIGURG stop: whether the
 * loader probe stopped it (bpf/libwatch.bpf.c), at a notice where it had
 * mapped a CUDA or PyTorch library no probe was on yet, a full-path dlopen
 * from off its search path. If so, that library is probed before this
 * returns true, and the caller resumes the thread without the signal: its
 * first call into the library is then recorded.
 */
bool libwatch__held_stop(struct libwatch *lw, pid_t pid, pid_t tid);
/*
 * The holder let go of pid: a stop at a notice that one of its threads
 * took on the way (its signal passed on, ignored) is over, and no later
 * scan is to take a thread as waiting.
 */
void libwatch__held_gone(struct libwatch *lw, pid_t pid);
/* Whether a thread of held process pid waits at a loader notice now. */
bool libwatch__waits_at_notice(const struct libwatch *lw, pid_t pid);
/*
 * Held process pid runs no Python yet (on), or does now (off): while on, a
 * libpython it maps with no probe on it stops it at the notice as well, so
 * that its interpreter is found and probed before its first instruction.
 */
int libwatch__watch_python(struct libwatch *lw, pid_t pid, bool on);
/* A file whose probes are in already (a libpython probed ahead): no stop for it. */
int libwatch__probed_ahead(struct libwatch *lw, uint64_t inode, const char *path);
void libwatch__detach(struct libwatch *lw);
void libwatch__destroy(struct libwatch *lw);

#endif /* PTG_LIBWATCH_H */
