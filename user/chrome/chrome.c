// SPDX-License-Identifier: MIT
/*
 * Chrome trace writer. A Python function or op becomes one "X" event when its
 * EXIT arrives, so events come out of the records children first; they are
 * written sorted by start, longer first (chrome_sort.c), so that every
 * reader (Perfetto nests equal starts in file order) sees parents before
 * their children. Field conventions are those of trace_kineto.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "base/array.h"
#include "base/log.h"
#include "base/outfile.h"
#include "model/model.h"
#include "chrome/chrome.h"
#include "chrome/chrome_export.h"
#include "trace/trace_kineto.h"

/* Starts an event object: {"ph": ..., "cat": ..., "name": ... */
static void ev_begin(struct chrome *c, const char *ph, const char *cat)
{
	chrome_ev_new(c, false);
	jb_lit(&c->b, "{\"ph\": \"");
	buf__puts(&c->b, ph);
	jb_lit(&c->b, "\", \"cat\": ");
	jb_json(&c->b, cat);
}

static void ev_x(struct chrome *c, const char *cat, const char *name, uint32_t pid, uint32_t tid,
		 uint64_t ts, uint64_t dur)
{
	ev_begin(c, "X", cat);
	jb_lit(&c->b, ", \"name\": ");
	jb_json(&c->b, name);
	chrome_ev_where(c, pid, tid, ts);
	jb_lit(&c->b, ", \"dur\": ");
	jb_us(&c->b, dur);
	if (c->nevs)
		c->evs[c->nevs - 1].k.dur = dur;
}

/* v in decimal at p; returns the end. */
static char *put_uint(char *p, unsigned int v)
{
	char num[12], *d = num + sizeof(num);

	do {
		*--d = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	memcpy(p, d, (size_t)(num + sizeof(num) - d));
	return p + (num + sizeof(num) - d);
}

/* Python names as Kineto writes them: "file(line): function". */
static void py_name(const struct chrome *c, uint32_t id, char *buf, size_t len)
{
	const struct ptg_sym *s = trace_reader__sym(c->r, id);
	size_t nf, nn;
	char *p;

	if (!s || !s->file || !s->file[0]) {
		snprintf(buf, len, "%s", s ? s->name : "");
		return;
	}
	nf = strlen(s->file);
	nn = strlen(s->name);
	/* every Python span has one: put together by hand, unless snprintf() would cut it */
	if (nf + nn + 16 > len) {
		snprintf(buf, len, "%s(%u): %s", s->file, s->line, s->name);
		return;
	}
	memcpy(buf, s->file, nf);
	buf[nf] = '(';
	p = put_uint(buf + nf + 1, s->line);
	memcpy(p, "): ", 3);
	memcpy(p + 3, s->name, nn + 1);
}

/* A closed Python frame or op (model.h): one X event from its ENTER's fields. */
static void write_span(struct chrome *c, const struct model_span *s)
{
	bool py = s->kind == PTG_REC_PY_ENTER;
	struct jargs a = {&c->b};
	char name[4096];

	if (py)
		py_name(c, s->sym, name, sizeof(name));
	ev_x(c, py ? "python_function" : "cpu_op", py ? name : chrome_sym_name(c, s->sym), s->pid,
	     s->tid, s->start, s->end - s->start);
	if (!s->args) {
		jarg_nz(&a, "External id", s->ext);
		jarg_id1(&a, py ? "Python id" : "Sequence number", s->aux0);
		jarg_id1(&a, py ? "Python parent id" : "Fwd thread id", s->aux1);
	}
	chrome_ev_end(c, &a, s->args);
}

static const char *call_cat(const struct chrome *c, const struct ptg_record *rec)
{
	const char *name = chrome_sym_name(c, rec->sym);
	bool driver;

	if (c->kineto)
		driver = rec->aux[1] == KINETO_CALL_DRIVER;
	else
		driver = !strncmp(name, "cu", 2) && strncmp(name, "cuda", 4);
	return driver ? "cuda_driver" : "cuda_runtime";
}

static void write_call(struct chrome *c, const struct ptg_record *rec)
{
	struct jargs a = {&c->b};

	ev_x(c, call_cat(c, rec), chrome_sym_name(c, rec->sym), rec->pid, rec->tid, rec->ts,
	     rec->dur);
	if (!c->args) {
		jarg_nz(&a, "External id", rec->ext);
		jarg_nz(&a, "cbid", cuda_links_cbid(&c->links, rec));
		jarg_nz(&a, "correlation", rec->corr);
	}
	chrome_ev_end(c, &a, c->args);
}

/* A recorded trace's ProfilerStep#N (steps.c), which a Kineto trace does not split off. */
static bool is_step(const struct chrome *c, const struct ptg_record *rec)
{
	return !c->kineto && !strncmp(chrome_sym_name(c, rec->sym), "ProfilerStep#", 13);
}

static void write_span_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = rec->aux[0] ? chrome_sym_name(c, rec->aux[0]) : "";
	struct jargs a = {&c->b};
	uint32_t tid = rec->tid;

	if (is_step(c, rec)) {
		tid |= STEPS_TRACK;
		chrome_name_track(c, rec->pid, rec->tid, tid, "steps", rec->ts);
	}
	ev_x(c, cat[0] ? cat : "user_annotation", chrome_sym_name(c, rec->sym), rec->pid, tid,
	     rec->ts, rec->dur);
	if (!c->args)
		jarg_nz(&a, "External id", rec->ext);
	chrome_ev_end(c, &a, c->args);
}

/* An off-CPU interval of a thread (sched/sched.c), on the thread's off-CPU track. */
static void write_sched(struct chrome *c, const struct ptg_record *rec)
{
	uint32_t track = rec->tid | OFFCPU_TRACK;
	struct jargs a = {&c->b};
	const char *why = rec->aux[0] == PTG_SCHED_PREEMPTED ? "preempted"
			  : rec->aux[0] == PTG_SCHED_BLOCKED ? "blocked"
							     : "off-CPU";

	chrome_name_track(c, rec->pid, rec->tid, track, "off-CPU", rec->ts);
	ev_x(c, "off_cpu", why, rec->pid, track, rec->ts, rec->dur);
	jarg_nz(&a, "runqueue delay ns", (uint64_t)rec->aux[1]);
	jarg_nz(&a, "waker tid", (uint64_t)rec->aux[2]);
	if (rec->sym)
		jarg_str(&a, "blocked in", chrome_sym_name(c, rec->sym));
	chrome_ev_end(c, &a, NULL);
}

static const char *gpu_cat(uint16_t kind)
{
	switch (kind) {
	case PTG_REC_GPU_KERNEL:
		return "kernel";
	case PTG_REC_GPU_MEMCPY:
		return "gpu_memcpy";
	case PTG_REC_GPU_MEMSET:
		return "gpu_memset";
	default:
		return "cuda_sync";
	}
}

static void gpu_args(struct chrome *c, const struct ptg_record *rec, struct jargs *a)
{
	switch (rec->kind) {
	case PTG_REC_GPU_KERNEL:
		if (rec->aux[0] || rec->aux[1])
			jarg_dims(a, "grid", rec->aux[0], rec->aux[1]);
		if (rec->aux[2] || rec->aux[3])
			jarg_dims(a, "block", rec->aux[2], rec->aux[3]);
		break;
	case PTG_REC_GPU_MEMCPY:
	case PTG_REC_GPU_MEMSET:
		jarg_int(a, "bytes", rec->aux[0]);
		/* Kineto's: bytes per ns, which is GB/s; none for a zero duration */
		if (rec->dur)
			jarg_double(a, "memory bandwidth (GB/s)", (double)rec->aux[0] / rec->dur);
		break;
	default:
		if (rec->aux[0] && c->kineto)
			jarg_str(a, "cuda_sync_kind", chrome_sym_name(c, rec->aux[0]));
		jarg_id1(a, "wait_on_stream", rec->aux[1]);
		jarg_id1(a, "wait_on_cuda_event_record_corr_id", rec->aux[2]);
		jarg_id1(a, "wait_on_cuda_event_id", rec->aux[3]);
	}
}

/*
 * Where a GPU record goes: Kineto's rows (pid = device, tid = stream) for
 * one process; for several, each process's own, which would else share one.
 */
static void gpu_where(struct chrome *c, const struct ptg_record *rec, uint32_t *pid, uint32_t *tid)
{
	if (c->kineto) {
		*pid = rec->pid;
		*tid = rec->tid;
	} else if (c->gpu_by_pid) {
		*pid = rec->pid;
		*tid = GPU_TRACK | (rec->device & 0xffu) << 16 | (uint32_t)(rec->stream & 0xffffu);
		chrome_name_gpu_track(c, *pid, *tid, rec->device, rec->stream, rec->ts);
	} else {
		*pid = rec->device;
		*tid = (uint32_t)rec->stream;
	}
}

static void write_gpu(struct chrome *c, const struct ptg_record *rec)
{
	struct jargs a = {&c->b};
	bool add = c->args && (rec->flags & PTG_F_ARGS_ADD);
	uint32_t pid, tid;

	gpu_where(c, rec, &pid, &tid);
	ev_x(c, gpu_cat(rec->kind), chrome_sym_name(c, rec->sym), pid, tid, rec->ts, rec->dur);
	if (!c->args || add) {
		/* a recorded GPU record names its op as Kineto's do: through its CUDA call */
		jarg_nz(&a, "External id", rec->ext ?: cuda_links_ext(&c->links, rec->corr));
		jarg_int(&a, "device", rec->device);
		jarg_int(&a, "stream", (int64_t)rec->stream);
		jarg_nz(&a, "correlation", rec->corr);
		gpu_args(c, rec, &a);
	}
	if (add)
		jarg_members(&a, c->args);
	chrome_ev_end(c, &a, add ? NULL : c->args);
}

static void write_flow(struct chrome *c, char ph, const char *cat, const char *name, uint32_t pid,
		       uint32_t tid, uint64_t ts, uint64_t id, bool bp_enclosing, const char *blob)
{
	char phs[2] = {ph, '\0'};

	ev_begin(c, phs, cat);
	jb_lit(&c->b, ", \"name\": ");
	jb_json(&c->b, name);
	jb_lit(&c->b, ", \"id\": ");
	jb_uint(&c->b, id);
	chrome_ev_where(c, pid, tid, ts);
	if (bp_enclosing)
		jb_lit(&c->b, ", \"bp\": \"e\"");
	chrome_ev_extra(c, blob);
	jb_lit(&c->b, "}");
}

static void write_flow_rec(struct chrome *c, const struct ptg_record *rec)
{
	const char *cat = chrome_sym_name(c, rec->aux[2]);

	if (rec->aux[0] != 's' && rec->aux[0] != 'f' && rec->aux[0] != 't')
		return;
	write_flow(c, rec->aux[0], cat[0] ? cat : "ac2g", chrome_sym_name(c, rec->sym), rec->pid,
		   rec->tid, rec->ts, rec->corr, rec->aux[1], c->args);
}

static void write_synth_flows(struct chrome *c, const struct ptg_record *rec)
{
	uint32_t pid, tid;

	if (c->kineto || !rec->corr)
		return;
	if (rec->kind == PTG_REC_CUDA_CALL) {
		if (!cuda_links_launched(&c->links, rec->corr))
			return;
		write_flow(c, 's', "ac2g", "ac2g", rec->pid, rec->tid, rec->ts, rec->corr, false,
			   NULL);
		return;
	}
	gpu_where(c, rec, &pid, &tid);
	write_flow(c, 'f', "ac2g", "ac2g", pid, tid, rec->ts, rec->corr, true, NULL);
}

/* Any record but a span's ENTER or EXIT; returns 0 or the buffer's error. */
static int write_record(struct chrome *c, const struct ptg_record *rec)
{
	struct ptg_record call;

	switch (rec->kind) {
	case PTG_REC_SPAN:
		write_span_rec(c, rec);
		break;
	case PTG_REC_CUDA_CALL:
		/* a probed call carries the id of the CUPTI record joined to it, as Kineto's do */
		call = *rec;
		call.corr = cuda_join_corr(&c->links.joins, rec);
		write_call(c, &call);
		write_synth_flows(c, &call);
		break;
	case PTG_REC_GPU_KERNEL:
	case PTG_REC_GPU_MEMCPY:
	case PTG_REC_GPU_MEMSET:
	case PTG_REC_GPU_SYNC:
		write_gpu(c, rec);
		if (rec->kind != PTG_REC_GPU_SYNC)
			write_synth_flows(c, rec);
		break;
	case PTG_REC_FLOW:
		write_flow_rec(c, rec);
		break;
	case PTG_REC_THREAD:
		chrome_write_thread(c, rec);
		break;
	case PTG_REC_EVENT:
		/* an imported event nothing models: written back as it came, in start order */
		if (c->args) {
			chrome_ev_new(c, false);
			if (c->nevs)
				c->evs[c->nevs - 1].k.ts = rec->ts;
			buf__puts(&c->b, c->args);
		}
		break;
	case PTG_REC_SCHED:
		write_sched(c, rec);
		break;
	default:
		/* samples have no place in Kineto's schema */
		break;
	}
	return c->b.err;
}

static void on_span(void *ctx, const struct model_span *s, const struct model_frame *stack,
		    unsigned int depth)
{
	(void)stack;
	(void)depth;
	write_span(ctx, s);
	chrome_run_check(ctx);
}

static void on_record(void *ctx, const struct ptg_record *rec, const struct model_frame *stack,
		      unsigned int depth)
{
	struct chrome *c = ctx;

	(void)stack;
	(void)depth;
	/* the model hands each record as soon as it is read: the reader still holds its args */
	c->args = trace_reader__args(c->r, NULL);
	write_record(c, rec);
	chrome_run_check(c);
}

/*
 * The model rebuilds the stacks: a span becomes one event when it closes,
 * with its ENTER's args; an imported event nothing models is written back as
 * it came; spans open at the end close at the trace's last timestamp.
 */
static const struct model_visitor chrome_visitor = {
    .span = on_span,
    .record = on_record,
    .flags = MODEL_WALK_ARGS | MODEL_WALK_EVENTS | MODEL_WALK_CLOSE,
};

static int write_all(struct chrome *c)
{
	int err;

	chrome_write_header(c);
	err = chrome_out_flush(c);
	/* an error of the event buffer stops nothing in the walk: it is checked after it */
	if (!err && (err = model__walk(c->r, &chrome_visitor, c, NULL)) < 0 && err != -ENOMEM) {
		pr_err("chrome: %s", trace_reader__error(c->r));
		return err;
	}
	if (err || (err = c->b.err) || (err = chrome_write_events(c)))
		return err;
	chrome_write_footer(c);
	return chrome_out_flush(c);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static void chrome_free(struct chrome *c)
{
	buf__free(&c->b);
	cuda_links_free(&c->links);
	free(c->evs);
	chrome_spill_free(c->spill);
	u64map__free(&c->tracks);
}

/* gzip (or plain, "T") on a descriptor of the output file; gzclose closes only its own. */
static int open_gz(struct chrome *c, int fd)
{
	int gzfd = dup(fd);

	if (gzfd < 0)
		return -errno;
	/* "T": zlib writes plain bytes, so both outputs share one code path */
	c->gz = gzdopen(gzfd, ends_with(c->path, ".gz") ? "wb6" : "wbT");
	if (!c->gz) {
		close(gzfd);
		return -ENOMEM;
	}
	gzbuffer(c->gz, 256 * 1024);
	return 0;
}

int chrome_export_runs(struct trace_reader *r, const char *out_path, size_t run_bytes)
{
	const char *source = trace_reader__meta(r, "source"), *procs;
	struct chrome c = {.r = r, .path = out_path, .run_bytes = run_bytes};
	struct outfile *of = NULL;
	int err, zerr;

	c.kineto = source && !strcmp(source, "kineto");
	/* the processes whose agents sent GPU activity, A,B: several need rows of their own */
	procs = trace_reader__meta(r, "cupti.pids");
	c.gpu_by_pid = procs && strchr(procs, ',');
	err = outfile__open(out_path, &of);
	err = err ?: open_gz(&c, outfile__fd(of));
	if (err) {
		pr_err("chrome: cannot create %s: %s", out_path, strerror(-err));
		outfile__abort(of);
		return err;
	}
	err = cuda_links_load(r, &c.links);
	if (!err)
		err = write_all(&c);
	if (err == -ENOMEM)
		pr_err("chrome: out of memory");
	zerr = gzclose(c.gz);
	if (!err && zerr != Z_OK) {
		pr_err("chrome: %s: write failed", out_path);
		err = -EIO;
	}
	if (!err) {
		err = outfile__commit(of);
		if (err)
			pr_err("chrome: cannot write %s: %s", out_path, strerror(-err));
	} else {
		outfile__abort(of);
	}
	chrome_free(&c);
	return err;
}

int chrome_export(struct trace_reader *r, const char *out_path)
{
	return chrome_export_runs(r, out_path, CHROME_RUN_BYTES);
}
