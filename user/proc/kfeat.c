// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <sys/utsname.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "base/log.h"
#include "proc/kfeat.h"

int kfeat_tp_btf_args(const char *name)
{
	char tname[128];
	const struct btf_type *t;
	struct btf *btf;
	int id, n = -ENOENT;

	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	btf = btf__load_vmlinux_btf();
	if (!btf)
		return -errno;
	/* typedef void (*btf_trace_NAME)(void *__data, ARGS...) */
	id = btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF);
	t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	t = t ? btf__type_by_id(btf, t->type) : NULL;
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	if (t && btf_is_func_proto(t) && btf_vlen(t) > 0)
		n = btf_vlen(t) - 1;
	btf__free(btf);
	return n;
}

bool kfeat_loop(void)
{
	static int known = -1;

	if (known < 0)
		known = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, NULL) == 1;
	return known;
}

bool kfeat_cookies(void)
{
	static int known = -1;

	if (known < 0)
		known = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie,
						NULL) == 1;
	return known;
}

int kfeat_missing(const char *what, const char *feature, const char *since)
{
	struct utsname u;

	if (uname(&u))
		u.release[0] = '\0';
	pr_err("%s: needs %s (Linux %s); this kernel is %s", what, feature, since,
	       u.release[0] ? u.release : "unknown");
	return -EOPNOTSUPP;
}
