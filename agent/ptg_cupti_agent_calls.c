// SPDX-License-Identifier: MIT
/*
 * The CUPTI agent's CUDA calls: CUPTI's driver and runtime API callbacks of
 * the calls in PTG_CUPTI_CALLS, written into a ring in shared memory that
 * the loader reads as it reads its uprobes' events (ptg_cupti_calls.h). The
 * callbacks run in the application's threads, inside the CUDA call: they
 * never block, never allocate, and drop (and count) a call when the ring is
 * full.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* CUPTI's own: with the parameter structs of the callbacks and what they need */
#include <cupti.h>

#include "ptg_cupti_agent_calls.h"
#include "ptg_cupti_calls.h"

#define MAX_NEST 16 /* calls open on a thread that an EXIT is matched against */

enum call_index {
#define IDX_D(n, s, b)	  CALL_##n,
#define IDX_R(n, c, s, b) CALL_##n,
#define IDX_N(d, n, c)	  CALL_##n,
	PTG_CUPTI_CALLS(IDX_D, IDX_R, IDX_N) NCALLS
};
_Static_assert(NCALLS == PTG_CUPTI_NCALLS, "one table");
_Static_assert(NCALLS < 0xff, "the call index is 8 bits of a record's what");

static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
} call_ids[] = {
#define ID_D(n, s, b)	 {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##n},
#define ID_R(n, c, s, b) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##c},
#define ID_N(d, n, c)	 {d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, c},
    PTG_CUPTI_CALLS(ID_D, ID_R, ID_N)};

/* cbid -> call index + 1, per domain; filled once */
static uint8_t drv_calls[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint8_t rt_calls[CUPTI_RUNTIME_TRACE_CBID_SIZE];

static struct ptg_cupti_call_ring *ring; /* set once, never unmapped but in a forked child */
static struct ptg_cupti_call_rec *recs;
static int ring_fd = -1;
static size_t ring_len;
static bool on; /* the callbacks record (atomic) */

/* The calls open on this thread that the ring has an ENTER of, innermost last. */
static __thread struct {
	uint32_t corr;
	uint64_t start;
} open_calls[MAX_NEST];
static __thread uint32_t depth;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void call_args(int idx, const void *params, uint64_t *stream, uint64_t *bytes)
{
	*stream = *bytes = 0;
	if (!params)
		return;
	switch (idx) {
#define ARGS(type, s, b)                                                                           \
	{                                                                                          \
		const type *p = params;                                                            \
		(void)p;                                                                           \
		*stream = (uint64_t)(uintptr_t)(s);                                                \
		*bytes = (uint64_t)(b);                                                            \
		break;                                                                             \
	}
#define ARGS_D(n, s, b)                                                                            \
	case CALL_##n:                                                                             \
		ARGS(n##_params, s, b)
#define ARGS_R(n, c, s, b)                                                                         \
	case CALL_##n:                                                                             \
		ARGS(c##_params, s, b)
#define ARGS_N(d, n, c)                                                                            \
	case CALL_##n:                                                                             \
		break;
		PTG_CUPTI_CALLS(ARGS_D, ARGS_R, ARGS_N)
	default:
		break;
	}
}

static int call_of(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		return drv_calls[cbid] - 1;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		return rt_calls[cbid] - 1;
	return -1;
}

/* One record, or false (the call counted as dropped) when the loader has not made room. */
static bool put(const struct ptg_cupti_call_rec *src)
{
	uint64_t h = __atomic_load_n(&ring->head, __ATOMIC_RELAXED), t;
	struct ptg_cupti_call_rec *p;

	do {
		t = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
		if (h - t >= PTG_CUPTI_CALLS_NRECS) {
			__atomic_fetch_add(&ring->dropped, 1, __ATOMIC_RELAXED);
			return false;
		}
	} while (!__atomic_compare_exchange_n(&ring->head, &h, h + 1, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	p = &recs[h & (PTG_CUPTI_CALLS_NRECS - 1)];
	p->tid = src->tid;
	p->ts = src->ts;
	p->start = src->start;
	p->stream = src->stream;
	p->bytes = src->bytes;
	p->what = src->what;
	p->corr = src->corr;
	__atomic_store_n(&p->seq, (uint32_t)(h + 1), __ATOMIC_RELEASE);
	return true;
}

static void call_enter(int idx, const CUpti_CallbackData *cb)
{
	struct ptg_cupti_call_rec r = {.tid = (uint32_t)gettid(),
				       .what = PTG_CUPTI_CALL_ENTER | (uint32_t)idx << 8};

	/* deeper than CUDA ever nests: no record, counted as one the ring had no room for */
	if (depth >= MAX_NEST) {
		__atomic_fetch_add(&ring->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	r.ts = r.start = mono_ns();
	r.corr = cb->correlationId;
	call_args(idx, cb->functionParams, &r.stream, &r.bytes);
	if (!put(&r))
		return;
	open_calls[depth].corr = r.corr;
	open_calls[depth++].start = r.start;
}

/* An EXIT only for the ENTER the ring has: a call under way when the callbacks came on has none. */
static void call_exit(int idx, const CUpti_CallbackData *cb)
{
	struct ptg_cupti_call_rec r = {.tid = (uint32_t)gettid(), .corr = cb->correlationId};
	uint32_t result = 0;

	if (!depth || open_calls[depth - 1].corr != r.corr)
		return;
	r.start = open_calls[--depth].start;
	r.ts = mono_ns();
	/* CUresult and cudaError_t are both an int */
	if (cb->functionReturnValue)
		memcpy(&result, cb->functionReturnValue, sizeof(result));
	if (result > 0xffff)
		result = 0xffff;
	r.what = PTG_CUPTI_CALL_EXIT | (uint32_t)idx << 8 | result << 16;
	call_args(idx, cb->functionParams, &r.stream, &r.bytes);
	put(&r);
}

void CUPTIAPI calls_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			     const void *data)
{
	const CUpti_CallbackData *cb = data;
	int idx;

	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE) || !cb)
		return;
	idx = call_of(domain, cbid);
	if (idx < 0)
		return;
	if (cb->callbackSite == CUPTI_API_ENTER)
		call_enter(idx, cb);
	else if (cb->callbackSite == CUPTI_API_EXIT)
		call_exit(idx, cb);
}

/* The memfd, sealed so that the loader's mapping can never lose its pages under it. */
static int ring_make(void)
{
	size_t len = PTG_CUPTI_CALLS_OFF + (size_t)PTG_CUPTI_CALLS_NRECS * sizeof(*recs);
	void *p;
	int fd;

	fd = memfd_create("ptg-cupti-calls", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		close(fd);
		return -errno;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -errno;
	}
	ring = p;
	recs = (struct ptg_cupti_call_rec *)((uint8_t *)p + PTG_CUPTI_CALLS_OFF);
	ring_fd = fd;
	ring_len = len;
	for (int i = 0; i < NCALLS; i++) {
		if (call_ids[i].domain == CUPTI_CB_DOMAIN_DRIVER_API)
			drv_calls[call_ids[i].cbid] = (uint8_t)(i + 1);
		else
			rt_calls[call_ids[i].cbid] = (uint8_t)(i + 1);
	}
	return 0;
}

/* A new session's ring starts empty: no callback wrote since the last one stopped. */
static void ring_reset(void)
{
	memset(ring, 0, PTG_CUPTI_CALLS_OFF);
	memset(recs, 0, (size_t)PTG_CUPTI_CALLS_NRECS * sizeof(*recs));
	ring->magic = PTG_CUPTI_CALLS_MAGIC;
	ring->rec_size = sizeof(*recs);
	ring->ncalls = NCALLS;
	ring->nrecs = PTG_CUPTI_CALLS_NRECS;
}

static void callbacks_set(CUpti_SubscriberHandle sub, uint32_t enable, int n)
{
	for (int i = 0; i < n; i++)
		cuptiEnableCallback(enable, sub, call_ids[i].domain, call_ids[i].cbid);
}

int calls_start(CUpti_SubscriberHandle sub, struct ptg_cupti_call_ring_msg *m)
{
	int err = ring ? 0 : ring_make();

	if (err)
		return err;
	ring_reset();
	m->size = ring_len;
	m->since_ns = mono_ns();
	__atomic_store_n(&on, true, __ATOMIC_RELEASE);
	for (int i = 0; i < NCALLS; i++) {
		if (cuptiEnableCallback(1, sub, call_ids[i].domain, call_ids[i].cbid) !=
		    CUPTI_SUCCESS) {
			/* all or none: the loader keeps its uprobes for every call */
			callbacks_set(sub, 0, i);
			__atomic_store_n(&on, false, __ATOMIC_RELEASE);
			return -EOPNOTSUPP;
		}
	}
	m->enabled = NCALLS;
	return ring_fd;
}

bool calls_unread(void)
{
	return ring && __atomic_load_n(&on, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&ring->unread, __ATOMIC_ACQUIRE);
}

void calls_stop(CUpti_SubscriberHandle sub)
{
	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&on, false, __ATOMIC_RELEASE);
	callbacks_set(sub, 0, NCALLS);
}

void calls_fork_child(void)
{
	/* the child's one thread is in fork(): no callback of its own is in the ring */
	__atomic_store_n(&on, false, __ATOMIC_RELEASE);
	if (ring)
		munmap(ring, ring_len);
	if (ring_fd >= 0)
		close(ring_fd);
	ring = NULL;
	recs = NULL;
	ring_fd = -1;
	depth = 0;
}
