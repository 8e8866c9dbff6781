// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "proc/kfeat.h"
#include "proc/syscheck.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

int syscheck_caps(uint64_t *eff)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capget, &h, d))
		return -errno;
	*eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	return 0;
}

static bool has_cap(uint64_t eff, int cap)
{
	return eff >> cap & 1;
}

static bool privileged(void)
{
	uint64_t eff;

	if (syscheck_caps(&eff))
		return geteuid() == 0;
	if (has_cap(eff, CAP_SYS_ADMIN) && has_cap(eff, CAP_SYS_PTRACE))
		return true;
	return has_cap(eff, CAP_BPF) && has_cap(eff, CAP_PERFMON) && has_cap(eff, CAP_SYS_PTRACE);
}

bool syscheck_sysfs_has(const char *rel)
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
	if (!syscheck_sysfs_has("/kernel/btf/vmlinux")) {
		snprintf(err, errlen,
			 "this kernel has no BTF (/sys/kernel/btf/vmlinux): it needs "
			 "CONFIG_DEBUG_INFO_BTF=y");
		return -ENOSYS;
	}
	if (!syscheck_sysfs_has("/bus/event_source/devices/uprobe/type")) {
		snprintf(err, errlen,
			 "this kernel has no uprobes: it needs CONFIG_UPROBE_EVENTS=y");
		return -ENOSYS;
	}
	if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_KPROBE, NULL) != 1 || !kfeat_ringbuf()) {
		snprintf(err, errlen,
			 "this kernel cannot run BPF programs with ring buffers "
			 "(needs Linux 5.8+ with CONFIG_BPF_SYSCALL=y)");
		return -ENOSYS;
	}
	return 0;
}
