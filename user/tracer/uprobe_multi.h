/* SPDX-License-Identifier: MIT */
/*
 * Multi-uprobe links (BPF_TRACE_UPROBE_MULTI, Linux 6.6), which Debian's
 * libbpf 1.1 and linux/bpf.h predate: one link holds many probes of one
 * file, and closing it waits for one RCU grace period instead of one per
 * probe (about 0.1 s each here).
 */
#ifndef PTG_UPROBE_MULTI_H
#define PTG_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct bpf_link;

/* expected_attach_type of a program attached this way */
#define PTG_BPF_TRACE_UPROBE_MULTI 48

/* Whether the running kernel knows the attach type (from its BTF). */
bool uprobe_multi_supported(void);
/*
 * Attaches prog_fd at cnt file offsets of path in process pid, each with its
 * BPF cookie (cookies may be NULL); retprobe for return probes. Returns the
 * link fd or a negative errno.
 */
int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, uint32_t cnt, bool retprobe, pid_t pid);

/*
 * The processes a probe family attaches in, as its open takes them: one
 * pid, or (pid -1) the npids of a set, where npids 0 means every process
 * (one entry, -1: a probe on the file alone). *out is the caller's to free.
 */
int uprobe_pids(pid_t pid, const pid_t *pids, size_t npids, pid_t **out, size_t *n);

/*
 * Without uprobe_multi: what closing one per-site uprobe costs on this
 * kernel (a tracepoint grace period), measured once by destroying link, a
 * probe the caller attached for it; later calls destroy link and return
 * the first measure. ns.
 */
uint64_t uprobe_site_close_ns(struct bpf_link *link);

#endif /* PTG_UPROBE_MULTI_H */
