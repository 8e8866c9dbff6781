/* SPDX-License-Identifier: MIT */
/*
 * What a process set tells its users (proctree.h), apart from the set
 * itself, so that the set's state (proctree_int.h) holds the callbacks
 * without the set's functions.
 */
#ifndef PTG_PROCTREE_TYPES_H
#define PTG_PROCTREE_TYPES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * fn(ctx, pid, exec_ts) runs for each process of the set that exec()'d,
 * while it is held past its new loader (its linked libraries mapped) where
 * it could be held: probes on what it maps (libcuda) then see its calls
 * from there on. It ran unheld from its exec (exec_ts, the event's
 * CLOCK_MONOTONIC time) until the event was read, which fn may say. Its
 * return value is not an error of the recording.
 */
typedef int (*proctree_exec_fn)(void *ctx, pid_t pid, uint64_t exec_ts);
/*
 * fn(ctx, pid, on): held process pid of the set runs no Python (on), so
 * that a libpython it maps itself (a program that embeds Python) is to
 * stop it at the loader's notice; or it runs Python, or is ours no more
 * (off).
 */
typedef void (*proctree_nopy_fn)(void *ctx, pid_t pid, bool on);
/* proctree__frames_elsewhere(): a member whose agent went with the image its exec replaced */
typedef void (*proctree_gone_fn)(void *ctx, pid_t pid);

#endif /* PTG_PROCTREE_TYPES_H */
