// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"

#include "tracer/uprobe_multi.h"

#define UPROBE_MULTI_RETURN 1

/* union bpf_attr as BPF_LINK_CREATE reads it for uprobe_multi */
struct uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__u64 path;
	__u64 offsets;
	__u64 ref_ctr_offsets;
	__u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
	__u32 pad;
};

bool uprobe_multi_supported(void)
{
	static int known = -1;
	struct btf *btf;
	int id;

	if (known >= 0)
		return known;
	known = 0;
	/* the per-site path of kernels before 6.6, on any kernel: to test it here */
	if (getenv("PTG_NO_UPROBE_MULTI"))
		return false;
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return false;
	id = btf__find_by_name_kind(btf, "bpf_attach_type", BTF_KIND_ENUM);
	if (id > 0) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_enum *e = btf_enum(t);

		for (int i = 0; i < btf_vlen(t); i++, e++) {
			if (!strcmp(btf__name_by_offset(btf, e->name_off),
				    "BPF_TRACE_UPROBE_MULTI"))
				known = e->val == PTG_BPF_TRACE_UPROBE_MULTI;
		}
	}
	btf__free(btf);
	return known;
}

int uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets,
			const uint64_t *cookies, uint32_t cnt, bool retprobe, pid_t pid)
{
	struct uprobe_multi_attr a = {
	    .prog_fd = (__u32)prog_fd,
	    .attach_type = PTG_BPF_TRACE_UPROBE_MULTI,
	    .path = (uintptr_t)path,
	    .offsets = (uintptr_t)offsets,
	    .cookies = (uintptr_t)cookies,
	    .cnt = cnt,
	    .multi_flags = retprobe ? UPROBE_MULTI_RETURN : 0,
	    .pid = (__u32)pid,
	};
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));

	return fd < 0 ? -errno : fd;
}

int uprobe_pids(pid_t pid, const pid_t *pids, size_t npids, pid_t **out, size_t *n)
{
	size_t cnt = pid >= 0 ? 1 : npids ? npids : 1;
	pid_t *p = calloc(cnt, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p[0] = pid;
	for (size_t i = 0; pid < 0 && i < npids; i++)
		p[i] = pids[i];
	*out = p;
	*n = cnt;
	return 0;
}

uint64_t uprobe_site_close_ns(struct bpf_link *link)
{
	static uint64_t ns;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);

	bpf_link__destroy(link);
	if (!ns && link)
		ns = now_ns(CLOCK_MONOTONIC) - t0;
	return ns;
}
