// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

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

bool kfeat_preempt_build(void)
{
	/*
	 * Only where a program can get a private stack that a preempted one
	 * would share: kernels before that (6.12) also refuse the global
	 * subprograms' calls with preemption off
	 */
	return kfeat_private_stack() && kfeat_preempt_kfunc();
}

bool kfeat_preempt_kfunc(void)
{
	static int known = -1;
	struct btf *btf;

	if (known >= 0)
		return known;
	btf = btf__load_vmlinux_btf();
	known = btf && btf__find_by_name_kind(btf, "bpf_preempt_disable", BTF_KIND_FUNC) > 0 &&
		btf__find_by_name_kind(btf, "bpf_preempt_enable", BTF_KIND_FUNC) > 0;
	btf__free(btf);
	return known;
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

bool kfeat_ringbuf(void)
{
	static int known = -1;

	if (known < 0)
		known = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	return known;
}

bool kfeat_task_btf(void)
{
	static int known = -1;

	if (known < 0)
		known = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_current_task_btf,
						NULL) == 1;
	return known;
}

/* constants only: a value that does not fit a field is a compile-time warning */
#define insn(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV0(reg) insn(BPF_ALU64 | BPF_MOV | BPF_K, (reg), 0, 0, 0)
#define EXIT()	  insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

/* Whether the verifier takes insns as a kprobe program (the type of uprobe programs). */
static bool loads(const struct bpf_insn *insns, size_t n)
{
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ptg_kfeat", "GPL", insns, n, NULL);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

bool kfeat_atomics(void)
{
	static int known = -1;
	/* *(u64 *)(r10 - 8) = 0; r1 = atomic_fetch_add(r10 - 8, r1): BPF_XADD before 5.12 */
	const struct bpf_insn insns[] = {
	    MOV0(1),
	    insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, -8, 0),
	    insn(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_10, BPF_REG_1, -8, BPF_ADD | BPF_FETCH),
	    MOV0(0),
	    EXIT(),
	};

	if (known < 0)
		known = loads(insns, sizeof(insns) / sizeof(insns[0]));
	return known;
}

bool kfeat_private_stack(void)
{
	static int known = -1;
	/*
	 * A program and the subprogram it calls, 400 bytes of stack each: the
	 * verifier refuses 800 bytes in one chain ("combined stack size"), unless
	 * it gives each frame of 64 bytes or more a private stack.
	 */
	const struct bpf_insn insns[] = {
	    MOV0(1),
	    insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, -400, 0),
	    insn(BPF_JMP | BPF_CALL, 0, BPF_PSEUDO_CALL, 0, 2),
	    MOV0(0),
	    EXIT(),
	    MOV0(1),
	    insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, -400, 0),
	    MOV0(0),
	    EXIT(),
	};

	if (known < 0)
		known = loads(insns, sizeof(insns) / sizeof(insns[0]));
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
