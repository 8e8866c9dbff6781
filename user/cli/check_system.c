// SPDX-License-Identifier: MIT
/*
 * check's lines about this machine: the kernel and each BPF feature the
 * probes use (docs/kernels.md's table, through user/proc/kfeat.h: the probes
 * the loaders use to pick an object), its security settings, the
 * capabilities held, the agents, and the cost of a uprobe hit.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/trusted.h"
#include "cli/check.h"
#include "proc/kfeat.h"
#include "proc/syscheck.h"
#include "python/pyframe.h"
#include "record/record_cost.h"
#include "tracer/trapcost.h"
#include "tracer/uprobe_multi.h"

#define CAP_SYS_PTRACE	       19
#define CAP_SYS_ADMIN	       21
#define CAP_SYS_RESOURCE       24
#define CAP_PERFMON	       38
#define CAP_BPF		       39
#define CAP_CHECKPOINT_RESTORE 40
/* the uprobes of Debian's libtorch's ops, where each holds a perf event (and a file) */
#define SITES_PER_LIBTORCH 5904
#define TRAP_CALLS	   2000

static unsigned int kernel_version(void)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return 0;
	return major << 8 | minor;
}

#define KV(a, b) ((a) << 8 | (b))

/* The first line of path, without its newline, or "" when it cannot be read. */
static const char *read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return buf;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void check_kernel(struct check *c)
{
	unsigned int kv = kernel_version();
	struct utsname u;

	if (uname(&u))
		snprintf(u.release, sizeof(u.release), "?");
	if (kv >= KV(5, 10))
		check_line(c, CHECK_OK, true, "kernel %s (5.10 or newer)", u.release);
	else if (kv >= KV(5, 8))
		check_line(c, CHECK_DEGRADED, true,
			   "kernel %s: older than 5.10, the oldest tested (docs/kernels.md)",
			   u.release);
	else
		check_line(c, CHECK_MISSING, true,
			   "kernel %s: record needs 5.8 or newer (the BPF ring buffer)", u.release);
	if (syscheck_sysfs_has("/kernel/btf/vmlinux"))
		check_line(c, CHECK_OK, true, "BTF of the kernel (/sys/kernel/btf/vmlinux)");
	else
		check_line(c, CHECK_MISSING, true,
			   "BTF of the kernel (/sys/kernel/btf/vmlinux): nothing runs without it "
			   "(CONFIG_DEBUG_INFO_BTF=y)");
	if (syscheck_sysfs_has("/bus/event_source/devices/uprobe/type"))
		check_line(c, CHECK_OK, true, "uprobes (the perf event source)");
	else
		check_line(c, CHECK_MISSING, true,
			   "uprobes: nothing runs without them (CONFIG_UPROBE_EVENTS=y)");
}

/* A feature the verifier must be asked about: unknown without the privileges to ask. */
static bool can_probe(struct check *c, const char *what)
{
	if (c->privileged)
		return true;
	check_line(c, CHECK_UNKNOWN, false, "%s: not probed without CAP_BPF and CAP_PERFMON", what);
	return false;
}

/* as pyframe picks its object (pyframe__can_share(): not the legacy one) */
static void check_loop(struct check *c)
{
	if (!can_probe(c, "bpf_loop (5.17)"))
		return;
	if (!kfeat_loop())
		check_line(
		    c, CHECK_DEGRADED, true,
		    "bpf_loop (5.17): record uses the legacy programs: stack snapshots cut at "
		    "64 frames (counted), sample walks 32 frames, Python calls of one "
		    "process at a time");
	else if (!pyframe__can_share())
		check_line(c, CHECK_DEGRADED, true,
			   "bpf_loop (5.17), but PTG_PYFRAME_LEGACY=1 forces pyframe's legacy "
			   "program");
	else
		check_line(c, CHECK_OK, true, "bpf_loop (5.17)");
}

static void check_bpf_progs(struct check *c)
{
	char jit[16];

	if (can_probe(c, "BPF ring buffer (5.8)")) {
		if (kfeat_ringbuf())
			check_line(c, CHECK_OK, true, "BPF ring buffer (5.8)");
		else
			check_line(c, CHECK_MISSING, true,
				   "BPF ring buffer (5.8): every event goes through it: nothing "
				   "runs");
	}
	if (can_probe(c, "bpf_get_current_task_btf (5.11)"))
		check_line(c, kfeat_task_btf() ? CHECK_OK : CHECK_MISSING, false,
			   "bpf_get_current_task_btf (5.11)%s",
			   kfeat_task_btf() ? ""
					    : ": costs nothing: the untyped task is read with "
					      "BPF_CORE_READ instead");
	if (can_probe(c, "atomics with fetch, cmpxchg (5.12)")) {
		if (kfeat_atomics())
			check_line(c, CHECK_OK, true, "atomics with fetch, cmpxchg (5.12)");
		else if (kfeat_cookies())
			/* the loaders pick the legacy builds by cookies alone */
			check_line(c, CHECK_MISSING, true,
				   "atomics with fetch, cmpxchg (5.12), with BPF cookies (5.15) "
				   "there: the CUDA and op probes do not load");
		else
			check_line(c, CHECK_DEGRADED, true,
				   "atomics with fetch, cmpxchg (5.12): the legacy builds of the "
				   "CUDA and op probes (plain stores, per-CPU call ids)");
	}
	if (can_probe(c, "BPF cookies (5.15)"))
		check_line(c, kfeat_cookies() ? CHECK_OK : CHECK_DEGRADED, true,
			   "BPF cookies (5.15)%s",
			   kfeat_cookies()
			       ? ""
			       : ": the legacy builds find each probe site's cookie in a map; "
				 "Python calls of several processes (-p A,B, --children, --uid, "
				 "--cgroup) are refused");
	check_loop(c);
	if (can_probe(c, "private BPF stacks (6.13)"))
		check_line(c, kfeat_private_stack() ? CHECK_OK : CHECK_MISSING, false,
			   "private BPF stacks (6.13)%s",
			   kfeat_private_stack() ? ""
						 : ": costs nothing: no program relies on them "
						   "(each call chain stays within 512 bytes)");
	/* not asked of the verifier: the kernel's BTF names the kfuncs the preempt builds call */
	check_line(c, kfeat_preempt_kfunc() ? CHECK_OK : CHECK_MISSING, false,
		   "bpf_preempt_disable (6.10)%s",
		   kfeat_preempt_build()   ? ": uprobe programs run with preemption off (the "
					     "preempt builds), as private stacks need"
		   : kfeat_preempt_kfunc() ? ": not needed here (no private stacks to share)"
					   : ": costs nothing: without private stacks no preempted "
					     "program shares one");
	if (!strcmp(read_line("/proc/sys/net/core/bpf_jit_enable", jit, sizeof(jit)), "0"))
		check_line(c, CHECK_DEGRADED, true,
			   "BPF JIT off (net.core.bpf_jit_enable=0): every probe runs interpreted, "
			   "several times slower");
}

static void check_tracepoints(struct check *c)
{
	bool state = kfeat_tp_btf_args("sched_switch") >= 4;
	bool dead = kfeat_tp_btf_args("sched_process_exit") >= 2;

	check_line(c, state ? CHECK_OK : CHECK_MISSING, false, "sched_switch's prev_state (5.18)%s",
		   state ? "" : ": costs nothing: the task's state is read through CO-RE");
	check_line(c, dead ? CHECK_OK : CHECK_MISSING, false,
		   "sched_process_exit's group_dead (after 6.12)%s",
		   dead ? "" : ": costs nothing: signal->live tells the last thread");
}

static void check_uprobe_multi(struct check *c)
{
	struct rlimit r = {};

	getrlimit(RLIMIT_NOFILE, &r);
	if (uprobe_multi_supported()) {
		check_line(c, CHECK_OK, true, "uprobe_multi links (6.6)");
		return;
	}
	/* main() raised the limit as far as it could (base/fdlimit.h) */
	if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < 2 * SITES_PER_LIBTORCH)
		check_line(c, CHECK_DEGRADED, true,
			   "uprobe_multi links (6.6): one perf event and open file per probe site, "
			   "and open files are limited to %llu here: the op probes of a libtorch "
			   "(%d) may not all attach",
			   (unsigned long long)r.rlim_cur, SITES_PER_LIBTORCH);
	else
		check_line(c, CHECK_MISSING, false,
			   "uprobe_multi links (6.6): costs time: one perf event per probe site "
			   "(%d for a libtorch's ops), slower to attach and detach",
			   SITES_PER_LIBTORCH);
}

/* "[none] integrity confidentiality": the word in brackets */
static void check_lockdown(struct check *c)
{
	char line[128], *open, *close;

	read_line("/sys/kernel/security/lockdown", line, sizeof(line));
	open = strchr(line, '[');
	close = open ? strchr(open, ']') : NULL;
	if (!open || !close) {
		check_line(c, CHECK_OK, true, "lockdown: none (no /sys/kernel/security/lockdown)");
		return;
	}
	*close = '\0';
	if (strcmp(open + 1, "confidentiality"))
		check_line(c, CHECK_OK, true, "lockdown: %s", open + 1);
	else
		check_line(c, CHECK_MISSING, true,
			   "lockdown: confidentiality: the kernel refuses BPF programs that read "
			   "kernel memory: record's probes do not load");
}

static void check_settings(struct check *c)
{
	bool perfmon = check_has_cap(c, CAP_PERFMON) || check_has_cap(c, CAP_SYS_ADMIN);
	bool bpf = check_has_cap(c, CAP_BPF) || check_has_cap(c, CAP_SYS_ADMIN);
	char v[32];

	check_lockdown(c);
	read_line("/proc/sys/kernel/perf_event_paranoid", v, sizeof(v));
	check_line(c, perfmon ? CHECK_OK : CHECK_MISSING, true, "kernel.perf_event_paranoid = %s%s",
		   v[0] ? v : "?",
		   perfmon ? " (no matter with CAP_PERFMON)"
			   : ": without CAP_PERFMON, uprobes are refused at any setting");
	read_line("/proc/sys/kernel/unprivileged_bpf_disabled", v, sizeof(v));
	check_line(c, bpf ? CHECK_OK : CHECK_MISSING, true,
		   "kernel.unprivileged_bpf_disabled = %s%s", v[0] ? v : "?",
		   bpf ? " (no matter with CAP_BPF)"
		       : ": without CAP_BPF, no tracing program loads at any setting");
	read_line("/proc/sys/kernel/yama/ptrace_scope", v, sizeof(v));
	if (!v[0])
		check_line(c, CHECK_OK, true, "YAMA ptrace_scope: no YAMA");
	else if (!strcmp(v, "3"))
		check_line(c, CHECK_MISSING, true,
			   "YAMA ptrace_scope = 3: no process may be traced, root's neither: "
			   "record cannot read a target's memory (/proc/PID/mem) nor bring an "
			   "agent in");
	else if (!strcmp(v, "2") && !check_has_cap(c, CAP_SYS_PTRACE))
		check_line(c, CHECK_MISSING, true,
			   "YAMA ptrace_scope = 2: only CAP_SYS_PTRACE may read a target's memory");
	else
		check_line(c, CHECK_OK, true, "YAMA ptrace_scope = %s", v);
}

static void check_caps(struct check *c)
{
	bool admin = check_has_cap(c, CAP_SYS_ADMIN);
	bool bpf = check_has_cap(c, CAP_BPF), perfmon = check_has_cap(c, CAP_PERFMON);
	bool multi = uprobe_multi_supported();

	if (bpf || admin)
		check_line(c, CHECK_OK, true, "CAP_BPF%s", bpf ? "" : " (CAP_SYS_ADMIN stands in)");
	else
		check_line(c, CHECK_MISSING, true,
			   "CAP_BPF: no BPF program loads: record and "
			   "sample are refused");
	if (perfmon || admin)
		check_line(c, CHECK_OK, true, "CAP_PERFMON%s",
			   perfmon ? "" : " (CAP_SYS_ADMIN stands in)");
	else
		check_line(c, CHECK_MISSING, true,
			   "CAP_PERFMON: no uprobe, tracepoint or perf event: record and sample "
			   "are refused");
	if (admin)
		check_line(c, CHECK_OK, true, "CAP_SYS_ADMIN");
	else
		check_line(c, CHECK_MISSING, !(bpf && perfmon), "CAP_SYS_ADMIN%s",
			   bpf && perfmon ? ": costs nothing: CAP_BPF and CAP_PERFMON do its work"
					  : ": needed where CAP_BPF or CAP_PERFMON is missing");
	check_line(c, check_has_cap(c, CAP_SYS_PTRACE) ? CHECK_OK : CHECK_MISSING, true,
		   "CAP_SYS_PTRACE%s",
		   check_has_cap(c, CAP_SYS_PTRACE)
		       ? ""
		       : ": no target's memory (code objects' names) nor agent: record is refused");
	if (check_has_cap(c, CAP_SYS_RESOURCE))
		check_line(c, CHECK_OK, true, "CAP_SYS_RESOURCE");
	else if (multi && kernel_version() >= KV(5, 11))
		check_line(c, CHECK_MISSING, false,
			   "CAP_SYS_RESOURCE: costs nothing here: uprobe_multi links need no "
			   "open file per probe site, and BPF memory is not counted against "
			   "RLIMIT_MEMLOCK (5.11+)");
	else
		check_line(
		    c, CHECK_DEGRADED, true,
		    "CAP_SYS_RESOURCE: %s cannot be raised past its hard limit",
		    multi ? "RLIMIT_MEMLOCK, which BPF maps count against before 5.11,"
			  : "the open-file limit, one file per probe site before uprobe_multi,");
	if (check_has_cap(c, CAP_CHECKPOINT_RESTORE) || admin)
		check_line(c, CHECK_OK, true, "CAP_CHECKPOINT_RESTORE%s",
			   check_has_cap(c, CAP_CHECKPOINT_RESTORE) ? ""
								    : " (CAP_SYS_ADMIN stands in)");
	else
		check_line(
		    c, CHECK_MISSING, false,
		    "CAP_CHECKPOINT_RESTORE: costs little: /proc/PID/map_files is closed, so "
		    "an agent's loader finds the target's libc by its path in the target's "
		    "root");
}

/* Where an agent is and whether it would be loaded (trusted_open_own(), as record). */
static void check_agent(struct check *c, const char *env, const char *name, const char *gives,
			const char *without)
{
	char path[4096] = "", why[4096 + 128];
	int fd = trusted_open_own(env, name, path, sizeof(path), why, sizeof(why));

	if (fd >= 0) {
		close(fd);
		check_line(c, CHECK_OK, true, "%s: %s (%s)", name, path, gives);
	} else {
		check_line(c, CHECK_DEGRADED, true, "%s refused: %s: %s", name, why, without);
	}
}

static void check_agents(struct check *c)
{
#ifdef PTG_HAVE_CUPTI
	check_agent(c, "PTG_CUPTI_AGENT", "libptg_cupti.so", "GPU activity, by CUPTI",
		    "record has no GPU activity");
#else
	check_line(c, CHECK_DEGRADED, true,
		   "libptg_cupti.so: not built (no CUPTI where this ptrace-gpu was built): record "
		   "has no GPU activity");
#endif
	check_agent(c, "PTG_PYMON_AGENT", "libptg_pymon.so",
		    "Python calls of record -p in-process, PyTorch ops by RecordFunction",
		    "record -p takes Python calls and PyTorch ops from uprobes alone, and "
		    "--in-process is refused");
}

void check_system(struct check *c)
{
	check_kernel(c);
	check_bpf_progs(c);
	check_tracepoints(c);
	check_uprobe_multi(c);
	check_settings(c);
	check_caps(c);
	check_agents(c);
}

void check_trap_cost(struct check *c)
{
	struct trapcost tc;
	char err[512];

	if (!c->privileged) {
		check_line(c, CHECK_UNKNOWN, false,
			   "uprobe hit cost: not measured without CAP_BPF and CAP_PERFMON");
		return;
	}
	if (trapcost_measure(TRAP_CALLS, &tc, err, sizeof(err))) {
		check_line(c, CHECK_MISSING, true, "uprobe hit: %s: record cannot probe", err);
		return;
	}
	/*
	 * the kind of instruction pyframe's probes sit on: what each Python call
	 * pays twice; over record's warning threshold it is a cost, not a lack
	 */
	if (2 * tc.hit_ns > RECORD_COST_WARN_NS)
		check_line(c, CHECK_DEGRADED, false,
			   "uprobe hit: %.0f ns here (%lu calls, single-stepped as at the eval "
			   "loop's handlers): a Python call recorded by uprobes costs ~%.1f us; "
			   "record --in-process -p PID costs ~0.5 us",
			   tc.hit_ns, tc.calls, 2 * tc.hit_ns / 1e3);
	else
		check_line(
		    c, CHECK_OK, true,
		    "uprobe hit: %.0f ns here, on a single-stepped instruction as at the eval "
		    "loop's handlers (%lu calls); a recorded Python call costs two hits and "
		    "its BPF programs",
		    tc.hit_ns, tc.calls);
}
