/* SPDX-License-Identifier: MIT */
/*
 * What a subscriber of the library watch hears (libwatch.h), apart from
 * the watch itself, so that the watcher's state (libwatch_int.h) holds the
 * subscribers without the watch's functions.
 */
#ifndef PTG_LIBWATCH_TYPES_H
#define PTG_LIBWATCH_TYPES_H

#include <stdint.h>
#include <sys/types.h>

#include "proc/procfs.h"

/*
 * A newly seen executable mapping of the file at m->path; attach_path opens
 * the same file from here; bias = runtime address - link-time address.
 * A library the target would load late (libcuda, libcudart, libtorch_cpu)
 * is offered ahead, before it is mapped, each copy found along its loader's
 * search order (libsearch.h): then m->start and m->end are 0 and bias is 0;
 * it is offered again when mapped. One mapped after attach that was not
 * found ahead, or mapped before its probes went in, is said on stderr and
 * counted (loss lib_unprobed_window), once per process and file.
 * Returns 0, or -errno to stop recording; offered ahead, LIBWATCH_WHEN_MAPPED
 * says it was not probed: it is offered once mapped as one not found ahead
 * (a held thread waits at the loader's notice, another's window is said).
 */
#define LIBWATCH_WHEN_MAPPED 1
typedef int (*libwatch_fn)(void *ctx, const struct proc_map *m, const char *attach_path,
			   uint64_t bias);
/*
 * One process: fn(ctx, dev, ino, ts) after each exec of it was scanned (its
 * event read, the process may have run on, or ended, since), with the file
 * the exec ran (as stat(2) names it) and when (CLOCK_MONOTONIC ns). (One
 * subscriber: libwatch__on_exec.)
 */
typedef void (*libwatch_exec_fn)(void *ctx, dev_t dev, ino_t ino, uint64_t ts);
/*
 * Which process maps what, for a subscriber that acts in each process (the
 * CUPTI agent goes into every process of a set that maps libcuda), where a
 * libwatch_fn hears of a file once for all: fn hears of each executable
 * mapping of pid at each scan of pid (so: cheap checks only), after the
 * libwatch_fn subscribers heard of it (a new library's probes are in), and
 * with m NULL when pid exec'd (what it had mapped is gone). Returns as
 * libwatch_fn.
 */
typedef int (*libwatch_proc_fn)(void *ctx, pid_t pid, const struct proc_map *m);

#endif /* PTG_LIBWATCH_TYPES_H */
