// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "proc/syscheck.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

static bool privileged(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capget, &h, d))
		return geteuid() == 0;
	if (has_cap(d, CAP_SYS_ADMIN) && has_cap(d, CAP_SYS_PTRACE))
		return true;
	return has_cap(d, CAP_BPF) && has_cap(d, CAP_PERFMON) && has_cap(d, CAP_SYS_PTRACE);
}

static bool sysfs_has(const char *rel)
{
	const char *root = getenv("PTRACE_GPU_SYSFS");
	char path[512];

	snprintf(path, sizeof(path), "%s%s", root ? root : "/sys", rel);
	return access(path, F_OK) == 0;
}

int syscheck_tracing(char *err, size_t errlen)
{
	if (!privileged()) {
		snprintf(err, errlen,
			 "tracing needs root (or CAP_BPF, CAP_PERFMON and "
			 "CAP_SYS_PTRACE): run it with sudo");
		return -EPERM;
	}
	if (!sysfs_has("/kernel/btf/vmlinux")) {
		snprintf(err, errlen,
			 "this kernel has no BTF (/sys/kernel/btf/vmlinux): it needs "
			 "CONFIG_DEBUG_INFO_BTF=y");
		return -ENOSYS;
	}
	if (!sysfs_has("/bus/event_source/devices/uprobe/type")) {
		snprintf(err, errlen,
			 "this kernel has no uprobes: it needs CONFIG_UPROBE_EVENTS=y");
		return -ENOSYS;
	}
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_KPROBE, NULL) != 1 ||
	    libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1) {
		snprintf(err, errlen,
			 "this kernel cannot run BPF programs with ring buffers "
			 "(needs Linux 5.8+ with CONFIG_BPF_SYSCALL=y)");
		return -ENOSYS;
	}
	return 0;
}
