/* SPDX-License-Identifier: MIT */
/* Can this process trace here? Privileges and kernel features, one clear message each. */
#ifndef PTG_SYSCHECK_H
#define PTG_SYSCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Returns 0, or a negative errno with a one-line reason: -EPERM without root
 * or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE, -ENOSYS when the kernel lacks
 * BPF, BTF or uprobes. The sysfs root can be moved with PTRACE_GPU_SYSFS
 * (the test suite uses it to play a kernel without BTF or uprobes).
 */
int syscheck_tracing(char *err, size_t errlen);
/* This process's effective capabilities, bit N for CAP N; 0 or a negative errno. */
int syscheck_caps(uint64_t *eff);
/* Whether rel (e.g. "/kernel/btf/vmlinux") exists under /sys, or $PTRACE_GPU_SYSFS. */
bool syscheck_sysfs_has(const char *rel);

#endif /* PTG_SYSCHECK_H */
