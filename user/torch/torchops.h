/* SPDX-License-Identifier: MIT */
/*
 * The user-space side of bpf/torchops.bpf.c: when the target maps a PyTorch
 * library (at start or later, through libwatch), finds its op entry points
 * (opscan), attaches one uprobe_multi link to all their sites, and turns the
 * events into OP_ENTER / OP_EXIT records nested in the threads' stacks of
 * Python frames and ops, each ENTER carrying its nn.Module path (modpath).
 */
#ifndef PTG_TORCHOPS_H
#define PTG_TORCHOPS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "libwatch/libwatch.h"
#include "torch/modpath.h"
#include "tracer/tracer.h"

struct torchops;

struct torchops_stats {
	uint64_t calls;		 /* OP_ENTER records written */
	uint64_t callback_calls; /* of them, from an agent's RecordFunction callback */
	uint64_t dropped;	 /* events the ring buffer had no room for */
	uint64_t unmatched;	 /* exits of ops entered before recording (or lost) */
	uint64_t unwound;	 /* ops closed by the stack rules: left by an exception */
	uint32_t libs;		 /* libraries probed */
	uint32_t mapped;	 /* PyTorch libraries the target mapped, probed or not */
	uint32_t ops;		 /* op entry points probed */
	uint32_t sites;		 /* uprobe sites (entries, rets, tail jumps) */
	uint64_t scan_ns;	 /* disassembly of the libraries */
	uint64_t attach_ns;	 /* attaching their probes */
	bool multi;		 /* attached through uprobe_multi links */
};

/* mp may be NULL (no module paths). quiet: no line per library on stderr. */
int torchops__open(struct tracer *t, pid_t pid, struct modpath *mp, bool quiet,
		   struct torchops **out);
/*
 * The same for several processes (record -p A,B, --children): each PyTorch
 * library file is probed once, for processes pids (npids 0: every process
 * that maps it), and only the ops of the processes in the BPF hash of
 * tgids traced_fd (user/procs/proctree.c) are recorded; no module paths.
 */
int torchops__open_shared(struct tracer *t, int traced_fd, const pid_t *pids, size_t npids,
			  bool quiet, struct torchops **out);
/* The libwatch subscriber: probes every PyTorch library the target maps. */
int torchops__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias);
/* Module paths from mp from now on: a Python interpreter found after the start. */
void torchops__set_modpath(struct torchops *ops, struct modpath *mp);
/*
 * record --in-process with the agent's RecordFunction callback in process
 * pid: its ops come through torchops__op(), and its libraries are not
 * probed from now on (none at all, once no process is left to probe);
 * probes already on them for pid come out. Those must not have fired: a
 * set calls it before proctree__attach() lets its events through.
 */
void torchops__in_process(struct torchops *ops, pid_t pid);
/*
 * record -- CMD: pid's ops go to the RecordFunction callback at its first
 * op (bpf/torchops.bpf.c, handover): that op stops its thread, if the
 * thread is our tracee, with a SIGURG it would ignore. Once armed, a
 * PyTorch library gets one probe (on at::getStepCallbacksUnlessEmpty),
 * not its op probes, unless it lacks that function.
 * torchops__handover_stopped(): whether tid's SIGURG stop is that;
 * torchops__handover_done(): the agent's callback is in (agent), or it is
 * not and the op probes go in, the stopping op written from what the
 * trigger saw; torchops__handover_poll(): 1 when the first op could not
 * stop its thread and the op probes went in now (its ops until then are
 * counted lost), 0 when nothing happened. Where the first op ran on
 * another thread that could be stopped, that thread waits in its own
 * SIGURG stop (torchops__handover_thread_stopped()) while
 * torchops__handover_thread_done() puts the op probes in, its op
 * included.
 */
int torchops__handover_arm(struct torchops *ops, pid_t pid);
bool torchops__handover_stopped(struct torchops *ops, pid_t pid, pid_t tid);
int torchops__handover_done(struct torchops *ops, pid_t pid, bool agent);
int torchops__handover_poll(struct torchops *ops, pid_t pid);
bool torchops__handover_thread_stopped(struct torchops *ops, pid_t pid, pid_t tid);
int torchops__handover_thread_done(struct torchops *ops, pid_t pid);
/*
 * An op's entry or exit recorded in the target (user/python/pymon.c): sym
 * names an entry (PTG_SYM_OP; unused for an exit); key orders it as a
 * stack pointer would (a nested op's is lower) and pairs the exit with the
 * entry: an op's depth on its thread.
 */
int torchops__op(struct torchops *ops, uint32_t pid, uint32_t tid, uint64_t ts, bool enter,
		 uint64_t key, uint32_t sym);
void torchops__detach(struct torchops *ops);
void torchops__stats(const struct torchops *ops, struct torchops_stats *st);
void torchops__destroy(struct torchops *ops);

#endif /* PTG_TORCHOPS_H */
