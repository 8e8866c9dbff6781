// SPDX-License-Identifier: MIT
/* Python frame probes: attach, detach, feed their events to the stack engine (pystack.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/log.h"
#include "proc/elf_file.h"
#include "proc/kfeat.h"
#include "proc/probesite.h"
#include "proc/procfs.h"
#include "ptrace_gpu/events.h"
#include "pyinterp/pycode.h"
#include "python/pyframe.h"
#include "python/pyframe_builds.h"
#include "python/pystack.h"
#include "tracer/teardown.h"
#include "tracer/uprobe_multi.h"
/* after the headers that define the types of its globals */
#include "pyframe.skel.h"

/* RESUME, return and yield handlers, PyTraceBack_Here and code_dealloc */
#define MAX_SITES (3 * PY_MAX_HANDLERS + 2)
_Static_assert(MAX_SITES <= PTG_PY_MAX_SITES, "a site's number must fit its cookie");
_Static_assert(PROBESITE_NR_REGS == PTG_PY_NR_REGS, "one register numbering for both sides");

/* The probes of one process, or of the file in every process (pid -1). */
struct pyframe_att {
	pid_t pid;
	int fds[2];			       /* multi links: probe sites, eval loop return */
	struct bpf_link *links[MAX_SITES + 1]; /* one per site otherwise */
	int nlinks;
};

struct pyframe {
	struct pyframe_bpf *skel;
	bool multi;		  /* the kernel has multi-uprobe links */
	bool legacy;		  /* the build without bpf_loop and cookies (pyframe_legacy.c) */
	struct pyframe_att *atts; /* one per process probed, or one for the file (pid -1) */
	size_t natts;
	struct py_interp py;
	struct tracer *t;
	bool shared;		/* for the processes of a traced set (pyframe__open_shared) */
	struct pystack *ps;	/* the replay of the events into stacks */
	struct bpf_link *audit; /* pyframe__handover_arm(): py_audit on PySys_Audit() */
	uint64_t until_ts;	/* pyframe__hand_over(): its events from then on are not ours */
};

/* The BPF side's per-CPU loss counters (events.h) as the trace names them. */
static const enum ptg_lost bpf_losses[PTG_LOSS_NR_KINDS] = {
    [PTG_LOSS_PY_EVENT] = PTG_LOST_PY_EVENT,	 [PTG_LOSS_PY_STACK] = PTG_LOST_PY_STACK,
    [PTG_LOSS_PY_READ] = PTG_LOST_PY_FRAME_READ, [PTG_LOSS_PY_DEPTH] = PTG_LOST_PY_STACK_DEPTH,
    [PTG_LOSS_PY_CODE] = PTG_LOST_PY_CODE_NAMES,
};
/* The resolver of the stack engine: code objects read from /proc/PID/mem. */
static int read_code(void *ctx, int fd, uint64_t code, struct py_code_info *out)
{
	const struct pyframe *pf = ctx;

	return py_read_code(fd, pf->py.info, code, out);
}

void pyframe__forget(struct pyframe *pf, pid_t pid)
{
	if (pf)
		pystack__forget(pf->ps, (uint32_t)pid);
}

int pyframe__handle(struct pyframe *pf, const struct ptg_event *e, size_t size)
{
	return pystack__handle(pf->ps, e, size);
}

static int handle_event(struct tracer *tr, void *ctx, const struct ptg_event *e, size_t size)
{
	const struct pyframe *pf = ctx;

	(void)tr;
	/* handed over: the agent's events come the same way */
	if (pf->until_ts && e->ts >= pf->until_ts)
		return 0;
	return pyframe__handle(ctx, e, size);
}

int pyframe__write_losses(struct pyframe *pf)
{
	const struct pyframe_bpf__bss *bss = pf->skel->bss;
	struct trace_writer *w = tracer__writer(pf->t);
	int err = 0;

	for (int cpu = 0; !err && cpu < PTG_MAX_CPUS; cpu++) {
		for (int k = 0; !err && k < PTG_LOSS_NR_KINDS; k++) {
			uint64_t n = bss->losses[cpu][k];

			if (n && bpf_losses[k])
				err = trace_writer__lost(w, bpf_losses[k], cpu, n);
		}
	}
	return err ?: pystack__write_losses(pf->ps, w);
}

static int write_losses(struct tracer *t, void *ctx)
{
	(void)t;
	return pyframe__write_losses(ctx);
}

static bool env_is_1(const char *name)
{
	const char *v = getenv(name);

	return v && !strcmp(v, "1");
}

KFEAT_SKEL_OPEN_VARIANT(pyframe_bpf)

/* PTG_PYFRAME_LEGACY=1: the legacy build on any kernel, for its tests */
static bool use_legacy(void)
{
	return !kfeat_loop() || env_is_1("PTG_PYFRAME_LEGACY");
}

bool pyframe__can_share(void)
{
	return !use_legacy();
}

/*
 * The object as built, or before bpf_loop (5.17) its legacy build, which
 * takes each site's cookie from the py_sites map (attach_probes) and so
 * serves one process at a time: probes on a file, for a set of processes,
 * need cookies and bpf_get_func_ip. From 6.10 its preempt build.
 */
static int open_bpf(struct pyframe *pf)
{
	const void *data;
	size_t size;
	int err;

	pf->legacy = use_legacy();
	if (pf->legacy && pf->shared)
		return kfeat_missing(
		    "pyframe: Python calls of several processes (-p A,B, --children, --uid, "
		    "--cgroup)",
		    kfeat_cookies() ? "bpf_loop" : "BPF cookies",
		    kfeat_cookies() ? "5.17" : "5.15");
	if (pf->legacy) {
		data = pyframe_legacy_elf(&size);
		pf->skel = pyframe_bpf__open_variant(data, size);
	} else if (kfeat_preempt_build()) {
		data = pyframe_preempt_elf(&size);
		pf->skel = pyframe_bpf__open_variant(data, size);
	} else {
		pf->skel = pyframe_bpf__open();
	}
	if (pf->skel)
		return 0;
	err = -errno;
	log_libbpf_flush();
	pr_err("pyframe: cannot open BPF object: %s", strerror(-err));
	return err;
}

static int open_common(const struct py_interp *py, struct tracer *t, int traced_fd,
		       struct pyframe **out)
{
	struct pystack_resolver res;
	struct pyframe *pf;
	int err;

	pf = calloc(1, sizeof(*pf));
	if (!pf)
		return -ENOMEM;
	res = (struct pystack_resolver){.ctx = pf,
					.open_proc = py_mem_open,
					.close_proc = py_mem_close,
					.read_code = read_code};
	pf->py = *py;
	pf->t = t;
	pf->shared = traced_fd >= 0;
	err = pystack__new(t, &res, &pf->ps);
	if (err)
		goto cleanup;
	if (!pf->shared && (err = pystack__add_proc(pf->ps, (uint32_t)py->pid))) {
		pr_err("pyframe: cannot open /proc/%d/mem: %s", py->pid, strerror(-err));
		goto cleanup;
	}
	err = open_bpf(pf);
	if (err)
		goto cleanup;
	pf->skel->rodata->off = py->info->off;
	err = py_offsets_blocks(&pf->skel->rodata->off, py->info->code_adaptive);
	if (err) {
		pr_err("pyframe: Python %s's structs do not fit the BPF read buffers",
		       py->info->name);
		goto cleanup;
	}
	pf->skel->rodata->runtime_addr = py->runtime_addr;
	memcpy((void *)pf->skel->rodata->resume_ops, py->ops.resume, sizeof(py->ops.resume));
	pf->skel->rodata->resume_where_mask = py->info->resume_where_mask;
	pf->skel->rodata->resume_not_a_call = py->info->resume_not_a_call;
	pf->multi = uprobe_multi_supported();
	if (pf->multi) {
		bpf_program__set_expected_attach_type(pf->skel->progs.py_probe,
						      PTG_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(pf->skel->progs.py_eval_ret,
						      PTG_BPF_TRACE_UPROBE_MULTI);
	}
	pf->skel->rodata->filter_tgids = pf->shared;
	pf->skel->rodata->recorder_tgid = (__u32)getpid();
	pf->skel->rodata->verify_regs = env_is_1("PTG_PYFRAME_VERIFY");
	pf->skel->rodata->code_frees = py->code_free_off != 0;
	if (!py->code_free_off)
		pr_warn("pyframe: %s: code_dealloc not found: a code object made where a freed one "
			"was, with a name string where the freed name was, may get the freed one's "
			"name",
			py->path);
	err = bpf_map__reuse_fd(pf->skel->maps.events, tracer__ringbuf_fd(t));
	if (!err && pf->shared)
		err = bpf_map__reuse_fd(pf->skel->maps.traced, traced_fd);
	if (!err)
		err = pyframe_bpf__load(pf->skel);
	if (err) {
		log_libbpf_flush();
		pr_err("pyframe: cannot load BPF programs: %s", strerror(-err));
		goto cleanup;
	}
	*out = pf;
	return 0;
cleanup:
	pyframe__destroy(pf);
	return err;
}

int pyframe__open(const struct py_interp *py, struct tracer *t, struct pyframe **out)
{
	int err = open_common(py, t, -1, out);

	if (err)
		return err;
	err =
	    tracer__on_stack(t, PTG_EV_PY_START, PTG_EV_PY_CODE, handle_event, write_losses, *out);
	if (err) {
		pyframe__destroy(*out);
		*out = NULL;
	}
	return err;
}

int pyframe__open_shared(const struct py_interp *py, struct tracer *t, int traced_fd,
			 struct pyframe **out)
{
	return open_common(py, t, traced_fd, out);
}

const struct py_interp *pyframe__interp(const struct pyframe *pf)
{
	return &pf->py;
}

/*
 * With probes on the file (shared), each cookie also says where _PyRuntime
 * is from the site (PTG_PY_COOKIE): link-time addresses, so the same for
 * every process that maps the file.
 */
static int add_deltas(const struct py_interp *py, const uint64_t *offs, uint64_t *cookies, int n)
{
	uint64_t runtime = py->runtime_addr - py->bias, vmo;
	struct elf_file *ef;
	int err;

	err = elf_file__open(py->attach_path, &ef);
	if (err)
		return err;
	for (int i = 0; !err && i < n; i++) {
		int64_t delta;

		err = elf_file__segment_bias(ef, offs[i], &vmo);
		delta = (int64_t)(runtime - (offs[i] + vmo));
		/* one file's text and data: never 2 GiB apart */
		if (!err && (delta < INT32_MIN || delta > INT32_MAX))
			err = -E2BIG;
		cookies[i] |= PTG_PY_COOKIE(0, 0, 0, delta);
	}
	elf_file__close(ef);
	return err;
}

/*
 * The cookie of a handler's site: its number, and the register that holds
 * the frame there unless the frame is to come from the thread state
 * (PTG_PYFRAME_NO_REGS=1, for measuring what the registers save).
 */
static uint64_t site_cookie(enum ptg_py_probe probe, int site, int8_t reg)
{
	bool no_regs = env_is_1("PTG_PYFRAME_NO_REGS");

	if (reg < 0 || no_regs)
		return PTG_PY_COOKIE(probe, site, 0, 0);
	return PTG_PY_COOKIE(
	    probe, site,
	    ((reg & ~PY_REG_TSTATE) + 1) | (reg & PY_REG_TSTATE ? PTG_PY_REG_TSTATE : 0), 0);
}

/* The probe sites of the interpreter and what each does (its BPF cookie). */
static int probe_sites(const struct py_interp *py, uint64_t *offs, uint64_t *cookies)
{
	int n = 0;

	for (int i = 0; i < py->nresume; i++, n++) {
		offs[n] = py->resume_offs[i];
		cookies[n] = site_cookie(PTG_PY_PROBE_RESUME, n, py->resume_regs[i]);
	}
	for (int i = 0; i < py->nreturn; i++, n++) {
		offs[n] = py->return_offs[i];
		cookies[n] = site_cookie(PTG_PY_PROBE_RETURN, n, py->return_regs[i]);
	}
	for (int i = 0; i < py->nyield; i++, n++) {
		offs[n] = py->yield_offs[i];
		cookies[n] = site_cookie(PTG_PY_PROBE_YIELD, n, py->yield_regs[i]);
	}
	offs[n] = py->traceback_off;
	cookies[n] = site_cookie(PTG_PY_PROBE_TRACEBACK, n, -1);
	if (py->code_free_off) {
		offs[++n] = py->code_free_off;
		cookies[n] = site_cookie(PTG_PY_PROBE_CODE_FREE, n, -1);
	}
	return ++n;
}

/*
 * The legacy build's cookies (pf->legacy): each site's, under its address
 * in process pid, before the site is attached. The sites are link-time
 * file offsets; py->bias is pid's load bias.
 */
static int put_sites(struct pyframe *pf, pid_t pid, const uint64_t *offs, const uint64_t *cookies,
		     int n)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(pf->skel->obj, "py_sites"));
	struct elf_file *ef;
	uint64_t vmo;
	int err;

	if (fd < 0)
		return -ENOENT;
	err = elf_file__open(pf->py.attach_path, &ef);
	if (err)
		return err;
	for (int i = 0; !err && i < n; i++) {
		struct ptg_py_site_key key = {.tgid = (uint32_t)pid};

		err = elf_file__segment_bias(ef, offs[i], &vmo);
		key.addr = offs[i] + vmo + pf->py.bias;
		if (!err && bpf_map_update_elem(fd, &key, &cookies[i], BPF_ANY))
			err = -errno;
	}
	elf_file__close(ef);
	return err;
}

static int attach_one(struct pyframe_att *a, const char *path, struct bpf_program *prog, bool ret,
		      uint64_t off, uint64_t cookie)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret, .bpf_cookie = cookie);
	struct bpf_link *link;

	if (a->nlinks == MAX_SITES + 1)
		return -E2BIG;
	link = bpf_program__attach_uprobe_opts(prog, a->pid, path, off, &opts);
	if (!link)
		return -errno;
	a->links[a->nlinks++] = link;
	return 0;
}

static int attach_multi(struct pyframe *pf, struct pyframe_att *a, const uint64_t *offs,
			const uint64_t *cookies, int n, uint64_t eval_cookie)
{
	struct pyframe_bpf *s = pf->skel;
	const char *path = pf->py.attach_path;
	pid_t pid = a->pid < 0 ? 0 : a->pid; /* uprobe_multi: 0 is every process */
	int fd;

	fd = uprobe_multi_attach(bpf_program__fd(s->progs.py_probe), path, offs, cookies,
				 (uint32_t)n, false, pid);
	if (fd < 0)
		return fd;
	a->fds[0] = fd;
	fd = uprobe_multi_attach(bpf_program__fd(s->progs.py_eval_ret), path, &pf->py.eval_off,
				 &eval_cookie, 1, true, pid);
	if (fd < 0)
		return fd;
	a->fds[1] = fd;
	return 0;
}

static int attach_probes(struct pyframe *pf, struct pyframe_att *a)
{
	uint64_t offs[MAX_SITES + 1], cookies[MAX_SITES + 1];
	int n = probe_sites(&pf->py, offs, cookies), err = 0;

	/* the eval loop's return probe last, with a cookie of its own */
	offs[n] = pf->py.eval_off;
	cookies[n] = 0;
	if (pf->shared)
		err = add_deltas(&pf->py, offs, cookies, n + 1);
	if (err)
		return err; /* cannot be: the interpreter's finder read the sites from this file */
	/* the legacy build's in py_sites: a kernel without cookies refuses one on a link */
	if (pf->legacy && !(err = put_sites(pf, a->pid, offs, cookies, n)))
		memset(cookies, 0, sizeof(cookies));
	if (!err && pf->multi)
		return attach_multi(pf, a, offs, cookies, n, cookies[n]);
	for (int i = 0; !err && i < n; i++)
		err = attach_one(a, pf->py.attach_path, pf->skel->progs.py_probe, false, offs[i],
				 cookies[i]);
	/* C code calls the eval loop, no C++ exception unwinds through it: a uretprobe is safe */
	return err
		   ?: attach_one(a, pf->py.attach_path, pf->skel->progs.py_eval_ret, true, offs[n],
				 cookies[n]);
}

static int attach_tracepoints(struct pyframe *pf)
{
	struct pyframe_bpf *s = pf->skel;

	if (!s->links.py_thread_exit &&
	    !(s->links.py_thread_exit = bpf_program__attach(s->progs.py_thread_exit)))
		return -errno;
	if (!s->links.py_exec && !(s->links.py_exec = bpf_program__attach(s->progs.py_exec)))
		return -errno;
	return 0;
}

int pyframe__attach_pid(struct pyframe *pf, pid_t pid)
{
	struct pyframe_att *n;
	int err;

	for (size_t i = 0; i < pf->natts; i++) {
		if (pf->atts[i].pid == pid || pf->atts[i].pid < 0)
			return 0;
	}
	n = realloc(pf->atts, (pf->natts + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	pf->atts = n;
	n = &pf->atts[pf->natts++];
	*n = (struct pyframe_att){.pid = pid, .fds = {-1, -1}};
	err = attach_probes(pf, n) ?: attach_tracepoints(pf);
	if (err) {
		log_libbpf_flush();
		pr_err("pyframe: cannot attach probes to %s: %s", pf->py.path, strerror(-err));
	}
	return err;
}

void pyframe__set_start_ts(struct pyframe *pf, uint64_t ts)
{
	pystack__set_start_ts(pf->ps, ts);
}

int pyframe__attach(struct pyframe *pf)
{
	return pyframe__attach_pid(pf, pf->py.pid);
}

void pyframe__detach(struct pyframe *pf)
{
	if (!pf)
		return;
	teardown_link(pf->audit);
	pf->audit = NULL;
	for (size_t i = 0; i < pf->natts; i++) {
		struct pyframe_att *a = &pf->atts[i];

		for (int j = 0; j < 2; j++)
			teardown_fd(a->fds[j]);
		for (int j = 0; j < a->nlinks; j++)
			teardown_link(a->links[j]);
	}
	free(pf->atts);
	pf->atts = NULL;
	pf->natts = 0;
	if (!pf->skel)
		return;
	bpf_link__destroy(pf->skel->links.py_thread_exit);
	pf->skel->links.py_thread_exit = NULL;
	bpf_link__destroy(pf->skel->links.py_exec);
	pf->skel->links.py_exec = NULL;
}

int pyframe__handover_arm(struct pyframe *pf, pid_t pid)
{
	struct ptg_py_handover h = {.state = PTG_PY_HANDOVER_ARMED};
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	struct elf_sym_info sym;
	struct elf_file *ef;
	__u32 key = (__u32)pid;
	uint64_t off = 0;
	int err;

	if (pf->audit || pf->shared)
		return -EINVAL;
	err = elf_file__open(pf->py.attach_path, &ef);
	if (err)
		return err;
	err = elf_file__find_sym(ef, "PySys_Audit", false, &sym)
		  ?: elf_file__vaddr_to_offset(ef, sym.addr, &off);
	elf_file__close(ef);
	if (err)
		return err;
	if (bpf_map_update_elem(bpf_map__fd(pf->skel->maps.py_handover), &key, &h, BPF_ANY))
		return -errno;
	pf->audit = bpf_program__attach_uprobe_opts(pf->skel->progs.py_audit, pid,
						    pf->py.attach_path, off, &opts);
	if (!pf->audit) {
		err = -errno;
		log_libbpf_flush();
		bpf_map_delete_elem(bpf_map__fd(pf->skel->maps.py_handover), &key);
	}
	return err;
}

int pyframe__handover_state(const struct pyframe *pf, pid_t pid, uint64_t *ts)
{
	struct ptg_py_handover h;
	__u32 key = (__u32)pid;

	if (!pf || !pf->audit ||
	    bpf_map_lookup_elem(bpf_map__fd(pf->skel->maps.py_handover), &key, &h))
		return PTG_PY_HANDOVER_OFF;
	*ts = h.ts;
	return (int)h.state;
}

void pyframe__handover_off(struct pyframe *pf, pid_t pid)
{
	__u32 key = (__u32)pid;

	if (!pf || !pf->audit)
		return;
	teardown_link(pf->audit);
	pf->audit = NULL;
	bpf_map_delete_elem(bpf_map__fd(pf->skel->maps.py_handover), &key);
}

void pyframe__hand_over(struct pyframe *pf, uint64_t ts)
{
	pf->until_ts = ts;
	pyframe__detach(pf);
}

void pyframe__stats(const struct pyframe *pf, struct pyframe_stats *st)
{
	const struct pyframe_bpf__bss *bss;
	struct pystack_stats ps;

	*st = (struct pyframe_stats){};
	if (!pf)
		return; /* no Python in the target */
	bss = pf->skel->bss;
	pystack__stats(pf->ps, &ps);
	st->unresolved = ps.unresolved;
	st->unmatched = ps.unmatched;
	st->redispatched = ps.redispatched;
	st->hidden = ps.hidden;
	for (int cpu = 0; cpu < PTG_MAX_CPUS; cpu++) {
		st->dropped +=
		    bss->losses[cpu][PTG_LOSS_PY_EVENT] + bss->losses[cpu][PTG_LOSS_PY_STACK];
		st->reg_checked += bss->reg_checked[cpu];
		st->reg_mismatched += bss->reg_mismatched[cpu];
	}
}

/*
 * A site whose frame register disagreed with the thread state went back to
 * the thread state, and nothing was lost: said all the same, since it means
 * the finder (user/proc/probesite.c) misread this build. PTG_PYFRAME_VERIFY=1
 * checks every hit and says how many were.
 */
static void report_regs(const struct pyframe *pf)
{
	struct pyframe_stats st;

	pyframe__stats(pf, &st);
	if (st.reg_mismatched)
		pr_warn("pyframe: %llu of %llu checks of frames read from registers in %s "
			"disagreed with the thread state; those probe sites read the thread state "
			"instead",
			(unsigned long long)st.reg_mismatched, (unsigned long long)st.reg_checked,
			pf->py.path);
	else if (pf->skel->rodata->verify_regs)
		pr_info("pyframe: frame registers: %llu hits checked, 0 mismatched",
			(unsigned long long)st.reg_checked);
}

void pyframe__destroy(struct pyframe *pf)
{
	if (!pf)
		return;
	if (pf->skel && pf->skel->bss)
		report_regs(pf);
	pyframe__detach(pf);
	pyframe_bpf__destroy(pf->skel);
	pystack__free(pf->ps);
	free(pf);
}
