/* SPDX-License-Identifier: MIT */
/*
 * Taking probes out off the recording's path. Before Linux 6.6 (no
 * uprobe_multi links) every uprobe site is a perf event of its own, and
 * closing one waits for a tracepoint grace period (perf_uprobe_destroy ->
 * tracepoint_synchronize_unregister(), under event_mutex: two closes never
 * overlap), 0.1-0.2 s each on the VMs measured: ~80 sites for Python and
 * CUDA are 10-20 s, PyTorch's 5,904 op sites 11 minutes. A uprobe_multi
 * link waits for one grace period too.
 *
 * With teardown_defer() on (record, once recording stops), what the probe
 * families hand here is closed by teardown_run() once the trace is
 * written: in this process when they are few (uprobe_multi links), else by
 * a child left behind, so that the user does not wait for it. Off (every
 * other user, and record until it stops: probes replaced at an exec must be
 * gone before their successors fire), it is closed at once, as before.
 *
 * The price: a recording that attaches per-site probes while such a child
 * still closes waits for its closes (both take event_mutex), and until the
 * child is done its probes stay in (their programs write to a ring buffer
 * nobody reads).
 */
#ifndef PTG_TEARDOWN_H
#define PTG_TEARDOWN_H

#include <stdbool.h>
#include <stddef.h>

struct bpf_link;

void teardown_defer(bool on);
/* Destroys link (NULL is nothing), now or deferred. */
void teardown_link(struct bpf_link *link);
/* Closes fd (a link's; negative is nothing), now or deferred. */
void teardown_fd(int fd);
/* How many wait for teardown_run(). */
size_t teardown_pending(void);
/*
 * Closes what waits: here when they are few, else in a detached child (its
 * own session, stdio on /dev/null, every descriptor but the anonymous
 * inodes the links are made of closed) that this process does not wait
 * for. Call it last. Returns the child's pid, 0 when none was needed, or a
 * negative errno (then everything was closed here).
 */
int teardown_run(void);

#endif /* PTG_TEARDOWN_H */
