// SPDX-License-Identifier: MIT
/* One shared ring buffer, per-thread stacks, dispatch to probe modules. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/threads.h"
#include "base/u64map.h"
#include "proc/procfs.h"
#include "tracer/tracer.h"

#define MAX_HANDLERS 16 /* probe modules, the sources and readers of their events */
/* how long after its timestamp a probe's event is surely in the ring buffer */
#define SOURCE_LAG_NS 2000000ull

struct handler {
	uint16_t lo, hi;
	tracer_handler_fn fn;
	tracer_finish_fn finish;
	void *ctx;
};

struct tracer {
	struct trace_writer *w;
	int rb_fd;
	struct ring_buffer *rb;
	struct handler handlers[MAX_HANDLERS];
	int nhandlers;
	int nstack; /* the first ones: tracer__on_stack()'s */
	int err;    /* first error of a handler: the ring buffer callback cannot return it */
	uint64_t start_ts;
	uint64_t last_ts;
	uint64_t events;
	uint64_t calls;
	struct threads threads;	    /* of struct tracer_thread, at stable addresses */
	struct tracer_thread *last; /* the previous event's thread, or NULL */
	struct u64map born; /* pid -> when it was forked, for processes forked while recording */
	tracer_source_fn source; /* events from outside the ring buffer (record --in-process) */
	void *source_ctx;
	bool source_busy;    /* the last pull left events waiting */
	tracer_peek_fn peek; /* a second source, merged in time order (tracer__set_timed_source) */
	tracer_take_fn take;
	void *timed_ctx;
	bool wake; /* tracer__wake_on(): waits with wait_mask */
	sigset_t wait_mask;
	bool reading; /* the ring buffer is being read: a handler must not read it again */
};

int tracer__dispatch(struct tracer *t, const struct ptg_event *e, size_t size)
{
	if (size < sizeof(*e) || t->err)
		return t->err;
	t->events++;
	if (e->ts > t->last_ts)
		t->last_ts = e->ts;
	/* every module whose range holds the kind, in the order they registered */
	for (int i = 0; i < t->nhandlers && !t->err; i++) {
		const struct handler *h = &t->handlers[i];

		if (h->fn && e->kind >= h->lo && e->kind <= h->hi)
			t->err = h->fn(t, h->ctx, e, size);
	}
	return t->err;
}

bool tracer__reading(const struct tracer *t)
{
	return t->reading;
}

static void pull_plain(struct tracer *t, uint64_t upto_ts)
{
	int ret;

	if (!t->source || t->err)
		return;
	ret = t->source(t, t->source_ctx, upto_ts);
	if (ret < 0)
		t->err = ret;
	else
		t->source_busy = ret > 0;
}

/*
 * What the sources outside the ring buffer have up to upto_ts goes first:
 * each event of the timed one after the other's up to its time.
 */
static void pull_source(struct tracer *t, uint64_t upto_ts)
{
	uint64_t ts;
	int ret;

	while (t->peek && !t->err) {
		ret = t->peek(t, t->timed_ctx, &ts);
		if (ret < 0)
			t->err = ret;
		if (ret <= 0 || ts > upto_ts)
			break;
		pull_plain(t, ts);
		if (!t->err && (ret = t->take(t, t->timed_ctx)) < 0)
			t->err = ret;
	}
	pull_plain(t, upto_ts);
}

static int handle_event(void *ctx, void *data, size_t size)
{
	const struct ptg_event *e = data;
	struct tracer *t = ctx;

	if (size >= sizeof(*e))
		pull_source(t, e->ts);
	tracer__dispatch(t, e, size);
	return 0;
}

void tracer__set_source(struct tracer *t, tracer_source_fn fn, void *ctx)
{
	t->source = fn;
	t->source_ctx = ctx;
}

void tracer__set_timed_source(struct tracer *t, tracer_peek_fn peek, tracer_take_fn take, void *ctx)
{
	t->peek = peek;
	t->take = take;
	t->timed_ctx = ctx;
}

int tracer__new(struct trace_writer *w, unsigned int ringbuf_mb, uint64_t start_ts,
		struct tracer **out)
{
	struct tracer *t;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->w = w;
	t->threads = THREADS_INIT(struct tracer_thread);
	t->start_ts = start_ts;
	t->rb_fd = -1;
	if (!ringbuf_mb) {
		*out = t; /* events come from the caller (a replay), not from BPF */
		return 0;
	}
	t->rb_fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "ptg_events", 0, 0, ringbuf_mb << 20, NULL);
	if (t->rb_fd < 0) {
		err = -errno;
		log_libbpf_flush();
		pr_err("tracer: cannot create a %u MiB BPF ring buffer: %s", ringbuf_mb,
		       strerror(-err));
		goto cleanup;
	}
	*out = t;
	return 0;
cleanup:
	tracer__free(t);
	return err;
}

int tracer__ringbuf_fd(const struct tracer *t)
{
	return t->rb_fd;
}

int tracer__on(struct tracer *t, uint16_t lo, uint16_t hi, tracer_handler_fn fn,
	       tracer_finish_fn finish, void *ctx)
{
	if (t->nhandlers == MAX_HANDLERS)
		return -E2BIG;
	t->handlers[t->nhandlers++] =
	    (struct handler){.lo = lo, .hi = hi, .fn = fn, .finish = finish, .ctx = ctx};
	return 0;
}

int tracer__on_stack(struct tracer *t, uint16_t lo, uint16_t hi, tracer_handler_fn fn,
		     tracer_finish_fn finish, void *ctx)
{
	if (t->nhandlers == MAX_HANDLERS)
		return -E2BIG;
	memmove(&t->handlers[t->nstack + 1], &t->handlers[t->nstack],
		(size_t)(t->nhandlers - t->nstack) * sizeof(t->handlers[0]));
	t->handlers[t->nstack++] =
	    (struct handler){.lo = lo, .hi = hi, .fn = fn, .finish = finish, .ctx = ctx};
	t->nhandlers++;
	return 0;
}

struct trace_writer *tracer__writer(struct tracer *t)
{
	return t->w;
}

uint64_t tracer__start_ts(const struct tracer *t)
{
	return t->start_ts;
}

void tracer__set_start_ts(struct tracer *t, uint64_t ts)
{
	t->start_ts = ts;
}

static int write_rec(struct tracer *t, const struct tracer_thread *th, uint16_t kind,
		     uint16_t flags, uint32_t sym, uint64_t ts, uint64_t ext, int64_t aux0)
{
	struct ptg_record r = {
	    .kind = kind,
	    .flags = flags,
	    .pid = th->pid,
	    .tid = th->tid,
	    .sym = sym,
	    .ts = ts,
	    .ext = ext,
	    .aux = {aux0},
	};

	return trace_writer__record(t->w, &r);
}

/*
 * The thread's name, and for a thread in a container (a pid namespace below
 * ours) its pid and tid as the container sees them, what its own ps and logs
 * show: aux[2] and aux[3] (aux[0] and aux[1] are the Kineto metadata kind
 * and sort index of an imported one, 0 = thread_name here).
 */
static int write_thread(struct tracer *t, const struct tracer_thread *th, const char *comm,
			uint64_t ts)
{
	struct ptg_record r = {.kind = PTG_REC_THREAD,
			       .pid = th->pid,
			       .tid = th->tid,
			       .ts = ts,
			       .sym = trace_writer__sym(t->w, PTG_SYM_STRING, comm, "", 0)};
	struct proc_ns_ids ids;

	if (!proc_ns_ids((pid_t)th->pid, (pid_t)th->tid, &ids) && ids.levels > 1) {
		r.aux[2] = ids.pid[ids.levels - 1];
		r.aux[3] = ids.tid[ids.levels - 1];
	}
	return trace_writer__record(t->w, &r);
}

/* A thread seen for the first time: its name goes into the trace. */
static int new_thread(struct tracer *t, struct tracer_thread *th, uint32_t pid, uint32_t tid,
		      uint64_t ts)
{
	char comm[64];

	th->pid = pid;
	th->tid = tid;
	if (proc_comm(pid, tid, comm, sizeof(comm)))
		return 0;
	return write_thread(t, th, comm, ts);
}

struct tracer_thread *tracer__thread(struct tracer *t, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct tracer_thread *th;
	bool added;

	/* most events follow one of the same thread: skip the hash lookup */
	if (t->last && t->last->tid == tid && t->last->pid == pid)
		return t->last;
	th = threads__get(&t->threads, pid, tid, &added);
	if (!th || (added && new_thread(t, th, pid, tid, ts)))
		return NULL;
	t->last = th;
	return th;
}

int tracer__push(struct tracer *t, struct tracer_thread *th, const struct tracer_slot *slot,
		 uint32_t sym, uint16_t flags, uint64_t ts)
{
	if (th->depth == th->cap) {
		uint32_t cap = th->cap ? th->cap * 2 : 64;
		struct tracer_slot *n = realloc(th->stack, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		th->stack = n;
		th->cap = cap;
	}
	th->stack[th->depth++] = *slot;
	if (slot->kind == TRACER_SLOT_HIDDEN)
		return 0;
	if (slot->kind == PTG_REC_PY_ENTER && !(flags & PTG_F_ENTER_RESUME))
		t->calls++;
	return write_rec(t, th, slot->kind, flags, sym, ts, slot->ext, slot->aux0);
}

int tracer__pop_to(struct tracer *t, struct tracer_thread *th, uint32_t depth, uint64_t ts,
		   uint16_t flags)
{
	int err = 0;

	while (!err && th->depth > depth) {
		const struct tracer_slot *s = &th->stack[--th->depth];
		uint16_t kind = s->kind == PTG_REC_OP_ENTER ? PTG_REC_OP_EXIT : PTG_REC_PY_EXIT;

		if (s->kind != TRACER_SLOT_HIDDEN)
			err = write_rec(t, th, kind, flags, 0, ts, 0, 0);
	}
	return err;
}

int tracer__record(struct tracer *t, const struct ptg_record *rec)
{
	return trace_writer__record(t->w, rec);
}

int tracer__set_proc_born(struct tracer *t, uint32_t pid, uint64_t ts)
{
	return u64map__put(&t->born, pid, ts);
}

uint64_t tracer__proc_born(const struct tracer *t, uint32_t pid)
{
	const uint64_t *ts = u64map__get(&t->born, pid);

	return ts ? *ts : 0;
}

int tracer__end_process(struct tracer *t, uint32_t pid, uint64_t ts, uint16_t flags)
{
	int err = 0;

	for (size_t i = 0; !err && i < t->threads.len; i++) {
		struct tracer_thread *th = threads__at(&t->threads, i);

		if (th->pid == pid)
			err = tracer__pop_to(t, th, 0, ts, flags);
	}
	return err;
}

/*
 * The kernel maps all of a ring buffer's pages at mmap time, twice, so the
 * mapping costs 2x its size in RSS at once. Mapped at the first read, after
 * the probe objects are loaded: each load parses the kernel's BTF (~11 MiB
 * for a moment), and the two together made the recorder's peak.
 */
static int map_ring(struct tracer *t)
{
	if (t->rb || t->rb_fd < 0)
		return 0;
	t->rb = ring_buffer__new(t->rb_fd, handle_event, t, NULL);
	if (!t->rb) {
		int err = -errno;

		log_libbpf_flush();
		pr_err("tracer: cannot map the ring buffer: %s", strerror(-err));
		return err;
	}
	return 0;
}

int tracer__wake_on(struct tracer *t, int sig)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, sig);
	if (pthread_sigmask(SIG_BLOCK, &set, &t->wait_mask))
		return -EINVAL;
	sigdelset(&t->wait_mask, sig);
	t->wake = true;
	return 0;
}

/* ring_buffer__poll(), but the wake signal ends the wait whenever it came since the last one. */
static int wait_ring(struct tracer *t, int timeout_ms)
{
	struct pollfd pfd = {.fd = ring_buffer__epoll_fd(t->rb), .events = POLLIN};
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};

	if (ppoll(&pfd, 1, &ts, &t->wait_mask) < 0 && errno != EINTR)
		return -errno;
	return ring_buffer__consume(t->rb);
}

static int poll_ring(struct tracer *t, int timeout_ms);

int tracer__poll(struct tracer *t, int timeout_ms)
{
	int n;

	/* once per read, not per event: the consumer's per-event path stays as it was */
	t->reading = true;
	n = poll_ring(t, timeout_ms);
	t->reading = false;
	return n;
}

static int poll_ring(struct tracer *t, int timeout_ms)
{
	int n = map_ring(t);
	uint64_t before;

	if (n)
		return n;
	if (!t->rb)
		return -EINVAL; /* no ring buffer (tracer__new with ringbuf_mb 0) */
	before = now_ns(CLOCK_MONOTONIC);
	/* a source that left events waiting fills on: come back soon for them */
	if (t->source_busy && timeout_ms > 1)
		timeout_ms = 1;
	if (t->wake && timeout_ms > 0)
		n = wait_ring(t, timeout_ms);
	else
		n = ring_buffer__poll(t->rb, timeout_ms);

	/*
	 * Probes that fire often skip the wakeup (an interrupt per event) until
	 * the buffer fills up: a poll that timed out still reads what is there.
	 */
	if (n == 0 || n == -EINTR)
		n = ring_buffer__consume(t->rb);
	/*
	 * The source's events up to a while before this read: a probe's event
	 * is in the ring buffer microseconds after its timestamp, so every one
	 * older than that was read above, and the two stay in order.
	 */
	if (n >= 0 && before > SOURCE_LAG_NS)
		pull_source(t, before - SOURCE_LAG_NS);
	return t->err ?: n;
}

int tracer__catch_up(struct tracer *t, uint64_t ts)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);

	if ((t->source || t->peek) && ts + SOURCE_LAG_NS >= now) {
		uint64_t ns = ts + SOURCE_LAG_NS - now + 1;
		struct timespec d = {.tv_sec = (time_t)(ns / 1000000000ull),
				     .tv_nsec = (long)(ns % 1000000000ull)};

		while (nanosleep(&d, &d) && errno == EINTR)
			;
	}
	return tracer__poll(t, 0);
}

int tracer__finish(struct tracer *t, uint64_t stop_ts)
{
	int err = map_ring(t);

	t->reading = true;
	err = err ?: (t->rb ? ring_buffer__consume(t->rb) : 0);
	t->reading = false;
	if (err < 0)
		return err;
	pull_source(t, UINT64_MAX);
	if (t->err)
		return t->err;
	if (stop_ts < t->last_ts)
		stop_ts = t->last_ts;
	for (size_t i = 0; i < t->threads.len; i++) {
		err = tracer__pop_to(t, threads__at(&t->threads, i), 0, stop_ts, PTG_F_EXIT_STOP);
		if (err)
			return err;
	}
	for (int i = 0; i < t->nhandlers; i++) {
		if (t->handlers[i].finish && (err = t->handlers[i].finish(t, t->handlers[i].ctx)))
			return err;
	}
	return 0;
}

uint64_t tracer__events(const struct tracer *t)
{
	return t->events;
}

uint64_t tracer__calls(const struct tracer *t)
{
	return t->calls;
}

static void tracer_thread_fini(void *th)
{
	free(((struct tracer_thread *)th)->stack);
}

void tracer__free(struct tracer *t)
{
	if (!t)
		return;
	ring_buffer__free(t->rb);
	if (t->rb_fd >= 0)
		close(t->rb_fd);
	threads__free(&t->threads, tracer_thread_fini);
	u64map__free(&t->born);
	free(t);
}
