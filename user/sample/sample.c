// SPDX-License-Identifier: MIT
/*
 * The sampler's lifecycle: load bpf/sample.bpf.c, open one cpu-clock
 * perf event per CPU (or attach the sched_switch program), keep the procs
 * map in step with the Python processes to sample (user/sample/sample_procs.c
 * finds them), resolve new stacks as the BPF side reports them, and turn
 * each interval's counts into a sample_set.
 *
 * Intervals: every counts key carries the interval (gen) it was counted in.
 * take() moves the BPF side on to the next gen first and only then reads
 * and deletes the keys of the old one, so no sample is counted twice or
 * lost between two profiles.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/log.h"
#include "proc/kfeat.h"
#include "proc/procfs.h"
#include "proc/procopen.h"
#include "proc/syscheck.h"
#include "sample.skel.h"
#include "sample/sample.h"
#include "sample/sample_legacy.h"
#include "sample/sample_procs.h"
#include "sample/sample_resolve.h"

#define NSEC_PER_SEC	  1000000000ull
#define TICK_NS		  NSEC_PER_SEC
#define COUNTS_MAX	  65536
#define NATIVE_STACKS_MAX 16384
#define MAX_ROW_DEPTH	  (PTG_SAMPLE_MAX_DEPTH + 128)
/* entries unused for this many intervals leave the caches (continuous mode) */
#define KEEP_GENS 2

static const char *thread_name(struct sampler *s, struct sproc *sp, uint32_t tid);

/* Read now, while the code objects and the thread surely exist. */
static int on_notice(void *ctx, void *data, size_t size)
{
	const struct ptg_sample_notice *e = data;
	struct sampler *s = ctx;
	struct sproc *sp;
	struct centry *c;

	if (size < sizeof(*e))
		return 0;
	sp = sampler_proc(s, e->tgid);
	if (!sp)
		return 0;
	if (e->kind == PTG_SAMPLE_NEW_THREAD)
		thread_name(s, sp, e->tid);
	else if (resolve_py_stack(s, sp, e->py_stack, &c) == -ENOMEM)
		return -ENOMEM;
	return 0;
}

static int open_perf_events(struct sampler *s)
{
	struct perf_event_attr attr = {
	    .type = PERF_TYPE_SOFTWARE,
	    .size = sizeof(attr),
	    .config = PERF_COUNT_SW_CPU_CLOCK,
	    .sample_period = s->period_ns, /* cpu-clock counts nanoseconds */
	};
	int attached = 0;

	for (int cpu = 0; cpu < s->ncpus; cpu++) {
		int fd =
		    (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);

		s->pfds[cpu] = fd;
		if (fd < 0) {
			int err = errno;

			if (err == ENODEV)
				continue; /* offline CPU */
			pr_err("sample: perf_event_open on CPU %d: %s", cpu, strerror(err));
			return -err;
		}
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.sample_cpu, fd);
		if (!s->links[cpu]) {
			int err = errno;

			log_libbpf_flush();
			pr_err("sample: cannot attach to CPU %d: %s", cpu, strerror(err));
			return -err;
		}
		attached++;
	}
	return attached ? 0 : -ENODEV;
}

KFEAT_SKEL_OPEN_VARIANT(sample_bpf)

/* The object as built, or before bpf_loop (5.17) its legacy build. */
static struct sample_bpf *open_bpf(void)
{
	size_t size;
	const void *data;

	if (kfeat_loop())
		return sample_bpf__open();
	data = sample_legacy_elf(&size);
	return sample_bpf__open_variant(data, size);
}

static int load_bpf(struct sampler *s)
{
	struct sample_bpf *skel = open_bpf();
	int err;

	if (!skel) {
		err = errno;
		log_libbpf_flush();
		pr_err("sample: cannot open BPF object: %s", strerror(err));
		return -err;
	}
	s->skel = skel;
	skel->rodata->period_ns = s->o.offcpu ? 0 : s->period_ns;
	skel->rodata->native = s->o.native;
	/* prev_state: sched_switch's 4th argument since 5.18 */
	skel->rodata->switch_has_state = kfeat_tp_btf_args("sched_switch") >= 4;
	bpf_map__set_max_entries(skel->maps.counts, COUNTS_MAX);
	bpf_map__set_max_entries(skel->maps.native_stacks, s->o.native ? NATIVE_STACKS_MAX : 1);
	bpf_map__set_max_entries(skel->maps.offcpu, s->o.offcpu ? 65536 : 1);
	bpf_program__set_autoload(skel->progs.sample_cpu, !s->o.offcpu);
	bpf_program__set_autoload(skel->progs.sample_switch, s->o.offcpu);
	err = sample_bpf__load(skel);
	if (err) {
		log_libbpf_flush();
		pr_err("sample: cannot load BPF programs: %s", strerror(-err));
		return err;
	}
	s->counts_fd = bpf_map__fd(skel->maps.counts);
	s->py_stacks_fd = bpf_map__fd(skel->maps.py_stacks);
	s->native_fd = bpf_map__fd(skel->maps.native_stacks);
	s->rb = ring_buffer__new(bpf_map__fd(skel->maps.notices), on_notice, s, NULL);
	if (!s->rb) {
		err = errno;
		log_libbpf_flush();
		pr_err("sample: cannot open the ring buffer: %s", strerror(err));
		return -err;
	}
	return 0;
}

static int attach(struct sampler *s)
{
	int err;

	if (s->o.offcpu) {
		err = sample_bpf__attach(s->skel);
		if (err) {
			log_libbpf_flush();
			pr_err("sample: cannot attach to sched_switch: %s", strerror(-err));
		}
		return err;
	}
	/* with --off-cpu sample_bpf__attach() above attached it with the rest */
	s->skel->links.sample_thread_exit = bpf_program__attach(s->skel->progs.sample_thread_exit);
	if (!s->skel->links.sample_thread_exit) {
		err = -errno;
		log_libbpf_flush();
		pr_err("sample: cannot attach to sched_process_exit: %s", strerror(-err));
		return err;
	}
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0)
		return s->ncpus ? s->ncpus : -EINVAL;
	s->pfds = calloc((size_t)s->ncpus, sizeof(*s->pfds));
	s->links = calloc((size_t)s->ncpus, sizeof(*s->links));
	if (!s->pfds || !s->links)
		return -ENOMEM;
	for (int i = 0; i < s->ncpus; i++)
		s->pfds[i] = -1;
	return open_perf_events(s);
}

static int add_targets(struct sampler *s)
{
	char err[512] = "";
	int ret;

	for (size_t i = 0; i < s->o.npids; i++) {
		ret = sampler_add_pid(s, s->o.pids[i], err, sizeof(err));
		if (ret) {
			pr_err("%s", err[0] ? err : strerror(-ret));
			return ret;
		}
	}
	if (s->o.all)
		sampler_scan_all(s);
	return 0;
}

int sampler__open(const struct sample_opts *o, struct sampler **out)
{
	struct sampler *s;
	char err[512] = "";
	int ret;

	ret = syscheck_tracing(err, sizeof(err));
	if (ret) {
		pr_err("%s", err);
		return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->period_ns = NSEC_PER_SEC / (o->freq ? o->freq : 99);
	s->gen = 1;
	ret = syms_cache__new(&s->syms);
	if (!ret)
		ret = load_bpf(s);
	if (!ret) {
		s->skel->bss->gen = s->gen;
		/* targets before attaching: a bad -p fails before any sampling */
		ret = add_targets(s);
	}
	if (!ret)
		ret = attach(s);
	if (ret) {
		sampler__free(s);
		return ret;
	}
	s->interval_start_mono = now_ns(CLOCK_MONOTONIC);
	s->interval_start_real = now_ns(CLOCK_REALTIME);
	s->next_tick = s->interval_start_mono + TICK_NS;
	*out = s;
	return 0;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	for (int i = 0; s->links && i < s->ncpus; i++)
		bpf_link__destroy(s->links[i]);
	for (int i = 0; s->pfds && i < s->ncpus; i++) {
		if (s->pfds[i] >= 0)
			close(s->pfds[i]);
	}
	free(s->links);
	free(s->pfds);
	ring_buffer__free(s->rb);
	sample_bpf__destroy(s->skel);
	for (size_t i = 0; i < s->nprocs; i++)
		sproc_free(s->procs[i]);
	free(s->procs);
	u64map__free(&s->proc_idx);
	u64map__free(&s->others);
	ccache_free(&s->py);
	ccache_free(&s->native);
	ccache_free(&s->threads);
	syms_cache__free(s->syms);
	free(s->tmpls);
	tables_free(&s->t);
	free(s->rows);
	free(s->pool);
	free(s->set_procs);
	free(s);
}

/* The thread's name, read while it runs; the process's name after. */
static const char *thread_name(struct sampler *s, struct sproc *sp, uint32_t tid)
{
	struct centry *e = ccache_get(&s->threads, sp->pid, tid, 0);
	char comm[64];

	if (e) {
		e->last_gen = s->gen;
		return e->name;
	}
	if (proc_comm(sp->pid, (pid_t)tid, comm, sizeof(comm)))
		return sp->comm;
	e = ccache_add(&s->threads, sp->pid, tid, 0);
	if (!e)
		return sp->comm;
	e->name = tables_str(&s->t, comm);
	e->last_gen = s->gen;
	if (!e->name)
		e->name = sp->comm;
	return e->name;
}

/* Resolves what the key needs, into the caches; the stacks found, or NULL. */
static int resolve_key(struct sampler *s, const struct ptg_sample_key *k, struct sproc **spp,
		       struct centry **py, struct centry **nat)
{
	struct sproc *sp = sampler_proc(s, k->tgid);
	int err = 0;

	*py = *nat = NULL;
	*spp = sp;
	if (!sp)
		return 0;
	sp->last_gen = s->gen;
	thread_name(s, sp, k->tid);
	if (k->py_stack)
		err = resolve_py_stack(s, sp, k->py_stack, py);
	if (err == -ENOMEM)
		return err;
	if (*py)
		(*py)->last_gen = s->gen;
	if (k->native_stack >= 0)
		err = resolve_native_stack(s, sp, k->native_stack, nat);
	if (err == -ENOMEM)
		return err;
	if (*nat)
		(*nat)->last_gen = s->gen;
	return 0;
}

struct count_entry {
	struct ptg_sample_key key;
	struct ptg_sample_value val;
};

#define BATCH 4096

/* Every key and value of the counts map of interval gen, a few syscalls per 4096 keys. */
static int read_counts(struct sampler *s, uint16_t gen, struct count_entry **out, size_t *n)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	struct ptg_sample_key *keys = calloc(BATCH, sizeof(*keys));
	struct ptg_sample_value *vals = calloc(BATCH, sizeof(*vals));
	struct count_entry *e = NULL;
	__u64 in = 0, outb = 0;
	void *inp = NULL;
	size_t cap = 0;
	int err = keys && vals ? 0 : -ENOMEM;

	*n = 0;
	while (!err) {
		__u32 cnt = BATCH;
		int ret = bpf_map_lookup_batch(s->counts_fd, inp, &outb, keys, vals, &cnt, &opts);

		if (ret && errno != ENOENT) {
			err = -errno;
			break;
		}
		for (__u32 i = 0; i < cnt && !err; i++) {
			if (keys[i].gen != gen)
				continue;
			err = array_grow((void **)&e, &cap, *n + 1, sizeof(*e));
			if (!err)
				e[(*n)++] = (struct count_entry){keys[i], vals[i]};
		}
		if (ret) /* ENOENT: that was the last batch */
			break;
		in = outb;
		inp = &in;
	}
	free(keys);
	free(vals);
	if (err)
		free(e);
	*out = err ? NULL : e;
	return err;
}

/* Resolves the stacks counted so far, while their processes are alive. */
static int sweep(struct sampler *s)
{
	struct count_entry *e;
	struct centry *py, *nat;
	struct sproc *sp;
	size_t n;
	int err;

	err = read_counts(s, (uint16_t)s->gen, &e, &n);
	for (size_t i = 0; i < n && !err; i++)
		err = resolve_key(s, &e[i].key, &sp, &py, &nat);
	free(e);
	return err;
}

static uint64_t stat_total(const struct sampler *s, int stat)
{
	uint64_t sum = 0;

	for (int cpu = 0; cpu < PTG_SAMPLE_MAX_CPUS; cpu++)
		sum += s->skel->bss->stats[cpu][stat];
	return sum;
}

int sampler__poll(struct sampler *s, int timeout_ms)
{
	uint64_t now, drops;
	int err;

	err = ring_buffer__poll(s->rb, timeout_ms);
	if (err < 0 && err != -EINTR)
		return err;
	now = now_ns(CLOCK_MONOTONIC);
	if (now < s->next_tick)
		return 0;
	s->next_tick = now + TICK_NS;
	sampler_check_exits(s);
	if (s->o.all)
		sampler_scan_all(s);
	/* notices tell what to read; only a dropped one calls for a look at every key */
	drops = stat_total(s, PTG_SAMPLE_STAT_RINGBUF_DROP);
	if (drops == s->drops_seen)
		return 0;
	s->drops_seen = drops;
	return sweep(s);
}

static int set_proc_index(struct sampler *s, struct sproc *sp, uint32_t *out)
{
	for (size_t i = 0; i < s->set.nprocs; i++) {
		if (s->set_procs[i].pid == (uint32_t)sp->pid) {
			*out = (uint32_t)i;
			return 0;
		}
	}
	if (array_grow((void **)&s->set_procs, &s->set_procs_cap, s->set.nprocs + 1,
		       sizeof(*s->set_procs)))
		return -ENOMEM;
	s->set_procs[s->set.nprocs] =
	    (struct sample_proc){(uint32_t)sp->pid, sp->comm, sp->interp, sp->ns_pid};
	*out = (uint32_t)s->set.nprocs++;
	return 0;
}

static int add_row(struct sampler *s, const struct count_entry *e)
{
	uint32_t frames[MAX_ROW_DEPTH], depth;
	struct centry *py, *nat;
	struct sample_row *r;
	struct sproc *sp;
	int err;

	err = resolve_key(s, &e->key, &sp, &py, &nat);
	if (err || !sp)
		return err;
	if (e->key.py_stack && !py)
		s->lost_py_stacks += e->val.count;
	if (e->key.native_stack >= 0 && !nat)
		s->lost_native_stacks += e->val.count;
	err = build_frames(s, py, nat, frames, &depth, MAX_ROW_DEPTH);
	if (err || array_grow((void **)&s->rows, &s->rows_cap, s->set.nrows + 1, sizeof(*r)) ||
	    array_grow((void **)&s->pool, &s->pool_cap, s->pool_len + depth, sizeof(*s->pool)))
		return err ? err : -ENOMEM;
	r = &s->rows[s->set.nrows];
	err = set_proc_index(s, sp, &r->proc);
	if (err)
		return err;
	memcpy(s->pool + s->pool_len, frames, depth * sizeof(*frames));
	r->tid = e->key.tid;
	r->thread = thread_name(s, sp, e->key.tid);
	r->count = e->val.count;
	r->ns = e->val.ns;
	r->depth = depth;
	/* pool may move while rows are added: frames are set at the end */
	r->frames = (const uint32_t *)(uintptr_t)s->pool_len;
	s->pool_len += depth;
	s->set.nrows++;
	return 0;
}

static void drop_py(void *ctx, struct centry *e)
{
	struct sampler *s = ctx;

	bpf_map_delete_elem(s->py_stacks_fd, &e->id64);
}

static void drop_native(void *ctx, struct centry *e)
{
	struct sampler *s = ctx;
	int32_t id = (int32_t)e->id32;

	bpf_map_delete_elem(s->native_fd, &id);
}

/* Continuous mode: what no recent interval used leaves the caches and BPF maps. */
static int prune(struct sampler *s)
{
	uint32_t min_gen = s->gen - KEEP_GENS;
	size_t kept = 0;
	int err = 0;

	err = err ?: ccache_prune(&s->py, min_gen, drop_py, s);
	err = err ?: ccache_prune(&s->native, min_gen, drop_native, s);
	err = err ?: ccache_prune(&s->threads, min_gen, NULL, NULL);
	u64map__free(&s->proc_idx);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct sproc *sp = s->procs[i];

		if (!sp->alive && (int32_t)(sp->last_gen - min_gen) < 0) {
			sproc_free(sp);
			continue;
		}
		s->procs[kept++] = sp;
		if (!err)
			err = u64map__put(&s->proc_idx, (uint32_t)sp->pid, kept);
	}
	s->nprocs = kept;
	return err;
}

int sampler__take(struct sampler *s, const struct sample_set **out)
{
	uint16_t old = (uint16_t)s->gen;
	struct count_entry *e = NULL;
	uint64_t now = now_ns(CLOCK_MONOTONIC);
	size_t n = 0;
	int err;

	/* the BPF side moves on; programs that read the old gen are done within microseconds */
	s->gen++;
	s->skel->bss->gen = s->gen;
	usleep(2000);
	ring_buffer__consume(s->rb);
	s->set = (struct sample_set){
	    .kind = s->o.offcpu ? PTG_SAMPLE_OFFCPU : PTG_SAMPLE_CPU,
	    .period_ns = s->o.offcpu ? 0 : s->period_ns,
	    .start_realtime_ns = s->interval_start_real,
	    .duration_ns = now - s->interval_start_mono,
	};
	s->pool_len = 0;
	err = read_counts(s, old, &e, &n);
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(s->counts_fd, &e[i].key);
	for (size_t i = 0; i < n && !err; i++)
		err = add_row(s, &e[i]);
	free(e);
	for (size_t i = 0; i < s->set.nrows; i++)
		s->rows[i].frames = s->pool + (uintptr_t)s->rows[i].frames;
	s->set.rows = s->rows;
	s->set.funcs = s->t.funcs;
	s->set.nfuncs = s->t.nfuncs;
	s->set.frames = s->t.frames;
	s->set.nframes = s->t.nframes;
	s->set.procs = s->set_procs;
	s->interval_start_mono = now;
	s->interval_start_real = now_ns(CLOCK_REALTIME);
	if (!err)
		err = prune(s);
	*out = &s->set;
	return err;
}

void sampler__print_stats(const struct sampler *s)
{
	static const char *const names[] = {
	    [PTG_SAMPLE_STAT_NO_TSTATE] = "had no Python thread state",
	    [PTG_SAMPLE_STAT_READ_ERR] = "had an unreadable frame",
	    [PTG_SAMPLE_STAT_TRUNCATED] = "were cut at the maximum depth",
	    [PTG_SAMPLE_STAT_STACKS_FULL] = "lost their Python stack (stack map full)",
	    [PTG_SAMPLE_STAT_COUNTS_FULL] = "were dropped (counts map full)",
	    [PTG_SAMPLE_STAT_NATIVE_ERR] = "have no native stack",
	};
	uint64_t tot[PTG_SAMPLE_STAT_NR];

	for (int k = 0; k < PTG_SAMPLE_STAT_NR; k++)
		tot[k] = stat_total(s, k);
	pr_info("sample: %llu samples of %zu processes",
		(unsigned long long)tot[PTG_SAMPLE_STAT_TICKS], s->nprocs);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		if (names[k] && tot[k])
			pr_warn("sample: %llu samples %s", (unsigned long long)tot[k], names[k]);
	}
	if (s->lost_py_stacks || s->lost_native_stacks)
		pr_warn("sample: %llu samples lost their Python stack, %llu their "
			"native stack (evicted before they were read)",
			(unsigned long long)s->lost_py_stacks,
			(unsigned long long)s->lost_native_stacks);
	if (s->unresolved_code)
		pr_warn("sample: %llu frames name code that was gone when read",
			(unsigned long long)s->unresolved_code);
	if (proc_open_refusals())
		pr_warn("sample: %lu files of the targets were not read (each said why)",
			proc_open_refusals());
}
