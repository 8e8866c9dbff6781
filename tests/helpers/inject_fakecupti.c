// SPDX-License-Identifier: MIT
/*
 * A stand-in for libcupti.so.13, for tests/integration/test_inject.py on
 * machines with no GPU: the CUPTI agent loads it through LD_LIBRARY_PATH and
 * runs its real code against it. It implements the calls the agent makes,
 * with CUPTI's C ABI and record layouts (from the real headers), and keeps
 * activity records that the test program adds with fakecupti_launch() until
 * the agent flushes. Timestamps are CLOCK_REALTIME, as a clock other than the
 * loader's, so the mapping onto CLOCK_MONOTONIC is exercised.
 * FAKECUPTI_BUSY=1 in the environment: cuptiSubscribe() finds another client.
 * The fake libcuda and libcudart (tests/fakecuda) report every call through
 * fakecupti_api_enter() and fakecupti_api_exit() when this library is
 * loaded RTLD_GLOBAL, with CUPTI's callback id and parameter struct: the
 * subscriber's callback gets each call whose callback it enabled, at
 * CUPTI_API_ENTER and CUPTI_API_EXIT, with a CUpti_CallbackData as CUPTI
 * fills it; runtime and driver activity records follow with the same
 * correlation id.
 */
#ifdef PTG_HAVE_CUPTI

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "ptg_cupti_calls.h"
#include "ptg_cupti_records.h"

#define EXPORT	     __attribute__((visibility("default")))
#define MAX_CBID     4096 /* callback ids per domain that can be enabled */
#define MAX_OPEN     16	  /* calls open on a thread */
#define MAX_PENDING  4096
#define MAX_NAMES    64
#define DROPPED_ONCE 5 /* reported by the first cuptiActivityGetNumDroppedRecords() */
#define LAUNCH_CBID  211
#define CALL_NS	     1000 /* the runtime call ends this long before its kernel starts */

struct pending {
	ptg_cupti_kernel k;
	ptg_cupti_api a;
	bool has_kernel;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static bool subscribed, enabled[CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS + 1];
static struct pending pending[MAX_PENDING];
static size_t npending;
static uint32_t next_corr = 1;
static bool dropped_told;
static char *names[MAX_NAMES];
static CUpti_ActivityThreadIdType tid_type;
static CUpti_CallbackFunc callback;
static void *callback_ud;
static bool cb_on[2][MAX_CBID]; /* [driver][cbid]: enabled by cuptiEnableCallback() */
static __thread int api_depth;	/* fake CUDA calls open on this thread */
static __thread struct {
	uint32_t corr;
	uint64_t data; /* CUpti_CallbackData.correlationData's, from ENTER to EXIT */
} open_calls[MAX_OPEN];

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	*str = result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
		   ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
		   : "CUPTI_ERROR_UNKNOWN";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb, void *ud)
{
	const char *busy = getenv("FAKECUPTI_BUSY");

	if (busy && busy[0] == '1')
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	*sub = (CUpti_SubscriberHandle)&subscribed;
	pthread_mutex_lock(&lock);
	subscribed = true;
	callback = cb;
	callback_ud = ud;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
	pthread_mutex_lock(&lock);
	subscribed = false;
	callback = NULL;
	memset(cb_on, 0, sizeof(cb_on));
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
				       CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if ((domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) ||
	    cbid >= MAX_CBID || sub != (CUpti_SubscriberHandle)&subscribed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	cb_on[domain == CUPTI_CB_DOMAIN_DRIVER_API][cbid] = enable != 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
	*type = tid_type;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
	tid_type = type;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc done)
{
	requested = req;
	completed = done;
	return CUPTI_SUCCESS;
}

static CUptiResult set_kind(CUpti_ActivityKind kind, bool on)
{
	if ((unsigned int)kind >= sizeof(enabled))
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&lock);
	enabled[kind] = on;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	return set_kind(kind, true);
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	return set_kind(kind, false);
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
	*timestamp = realtime_ns();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
						     size_t *dropped)
{
	pthread_mutex_lock(&lock);
	*dropped = dropped_told ? 0 : DROPPED_ONCE;
	dropped_told = true;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* The names of the calls the agent takes (its own table), as CUPTI spells them. */
EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
					const char **name)
{
#define NAME_D(n, s, b)	   {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##n, #n},
#define NAME_R(n, c, s, b) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##c, #c},
#define NAME_Z(d, n, c)	   {d ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, c, #n},
	static const struct {
		CUpti_CallbackDomain domain;
		uint32_t cbid;
		const char *name;
	} known[] = {PTG_CUPTI_CALLS(NAME_D, NAME_R, NAME_Z)};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].domain == domain && known[i].cbid == cbid) {
			*name = known[i].name;
			return CUPTI_SUCCESS;
		}
	}
	return CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
					      CUpti_Activity **record)
{
	uint8_t *p = (uint8_t *)*record;

	p = p ? p + ptg_cupti_record_size((*record)->kind) : buffer;
	if (p >= buffer + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)p;
	return CUPTI_SUCCESS;
}

/* Hands every pending record over in one buffer, as CUPTI's flush does. */
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	static struct pending batch[MAX_PENDING];
	size_t n, size = 0, max = 0, valid = 0;
	uint8_t *buf = NULL;

	pthread_mutex_lock(&lock);
	n = npending;
	memcpy(batch, pending, n * sizeof(batch[0]));
	npending = 0;
	pthread_mutex_unlock(&lock);
	if (!n || !requested || !completed)
		return CUPTI_SUCCESS;
	requested(&buf, &size, &max);
	if (!buf)
		return CUPTI_SUCCESS;
	for (size_t i = 0; i < n && valid + sizeof(batch[i]) <= size; i++) {
		memcpy(buf + valid, &batch[i].a, sizeof(batch[i].a));
		valid += sizeof(batch[i].a);
		if (!batch[i].has_kernel)
			continue;
		memcpy(buf + valid, &batch[i].k, sizeof(batch[i].k));
		valid += sizeof(batch[i].k);
	}
	completed(NULL, 0, buf, size, valid);
	return CUPTI_SUCCESS;
}

/* CUPTI gives every launch of one kernel the same name pointer. */
static const char *intern(const char *name)
{
	for (int i = 0; i < MAX_NAMES && names[i]; i++) {
		if (!strcmp(names[i], name))
			return names[i];
	}
	for (int i = 0; i < MAX_NAMES; i++) {
		if (!names[i])
			return names[i] = strdup(name);
	}
	return NULL;
}

/*
 * The test program's kernel launch: a runtime call, then a kernel of dur_ns
 * on stream 7 of device 0 starting now. Returns its correlation id, or -1
 * when kernel activity is off (the agent is not recording).
 */
EXPORT int fakecupti_launch(const char *name, uint64_t dur_ns)
{
	uint64_t now = realtime_ns();
	struct pending *p;
	int corr = -1;

	pthread_mutex_lock(&lock);
	if (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] &&
	    enabled[CUPTI_ACTIVITY_KIND_RUNTIME] && npending < MAX_PENDING) {
		p = &pending[npending++];
		memset(p, 0, sizeof(*p));
		corr = (int)next_corr++;
		p->a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		p->a.cbid = LAUNCH_CBID;
		p->a.start = now - 2 * CALL_NS;
		p->a.end = now - CALL_NS;
		p->a.processId = (uint32_t)getpid();
		p->a.threadId = (uint32_t)gettid();
		p->a.correlationId = (uint32_t)corr;
		p->k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		p->k.start = now;
		p->k.end = now + dur_ns;
		p->k.streamId = 7;
		p->k.gridX = p->k.gridY = p->k.gridZ = 1;
		p->k.blockX = 256;
		p->k.blockY = p->k.blockZ = 1;
		p->k.correlationId = (uint32_t)corr;
		p->k.name = intern(name);
		p->has_kernel = true;
	}
	pthread_mutex_unlock(&lock);
	return corr;
}

/* The subscriber's callback for the call, if it enabled it. */
static CUpti_CallbackFunc callback_of(int driver, uint32_t cbid, void **ud)
{
	CUpti_CallbackFunc fn = NULL;

	pthread_mutex_lock(&lock);
	if (cbid < MAX_CBID && cb_on[!!driver][cbid])
		fn = callback;
	*ud = callback_ud;
	pthread_mutex_unlock(&lock);
	return fn;
}

static void call_back(int driver, uint32_t cbid, CUpti_ApiCallbackSite site, const void *params,
		      int *result, int slot)
{
	CUpti_CallbackData d = {
	    .callbackSite = site,
	    .functionName = "fakecuda",
	    .functionParams = params,
	    .functionReturnValue = site == CUPTI_API_EXIT ? result : NULL,
	    .correlationData = &open_calls[slot].data,
	    .correlationId = open_calls[slot].corr,
	};
	void *ud;
	CUpti_CallbackFunc fn = callback_of(driver, cbid, &ud);

	if (fn)
		fn(ud, driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &d);
}

/*
 * A fake CUDA call begins: a correlation id for it (CUPTI numbers every
 * call), the subscriber's ENTER callback; returns its CUPTI start time.
 */
EXPORT uint64_t fakecupti_api_enter(int driver, uint32_t cbid, const void *params)
{
	int slot = api_depth++;

	if (slot >= MAX_OPEN)
		return realtime_ns();
	pthread_mutex_lock(&lock);
	open_calls[slot].corr = next_corr++;
	pthread_mutex_unlock(&lock);
	open_calls[slot].data = 0;
	call_back(driver, cbid, CUPTI_API_ENTER, params, NULL, slot);
	return realtime_ns();
}

/*
 * The call ends: the EXIT callback with its result, then a runtime or
 * driver API record from start to now with the same correlation id; the
 * outermost call of a thread that launched a kernel of kernel_ns (a
 * runtime launch, not the driver launch it makes) gets a kernel
 * "fakecuda_kernel" with its id.
 */
EXPORT void fakecupti_api_exit(int driver, uint32_t cbid, const void *params, int result,
			       uint64_t start, uint64_t kernel_ns)
{
	CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	int slot = --api_depth;
	uint64_t now = realtime_ns();
	struct pending *p;

	if (slot >= MAX_OPEN)
		return;
	call_back(driver, cbid, CUPTI_API_EXIT, params, &result, slot);
	pthread_mutex_lock(&lock);
	if (enabled[kind] && npending < MAX_PENDING) {
		p = &pending[npending++];
		memset(p, 0, sizeof(*p));
		p->a.kind = kind;
		p->a.cbid = cbid;
		p->a.start = start;
		p->a.end = now;
		p->a.processId = (uint32_t)getpid();
		p->a.threadId = (uint32_t)gettid();
		p->a.correlationId = open_calls[slot].corr;
		p->has_kernel =
		    api_depth == 0 && kernel_ns && enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL];
		p->k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		p->k.start = now + CALL_NS;
		p->k.end = now + CALL_NS + kernel_ns;
		p->k.streamId = 7;
		p->k.gridX = p->k.gridY = p->k.gridZ = 1;
		p->k.blockX = 256;
		p->k.blockY = p->k.blockZ = 1;
		p->k.correlationId = p->a.correlationId;
		p->k.name = intern("fakecuda_kernel");
	}
	pthread_mutex_unlock(&lock);
}

/* How many API callbacks are on (cuptiEnableCallback()). */
EXPORT int fakecupti_callbacks(void)
{
	int n = 0;

	pthread_mutex_lock(&lock);
	for (int d = 0; d < 2; d++) {
		for (int i = 0; i < MAX_CBID; i++)
			n += cb_on[d][i];
	}
	pthread_mutex_unlock(&lock);
	return n;
}

/* How many activity kinds are on, + 100 while subscribed: 106 recording, 0 quiet. */
EXPORT int fakecupti_state(void)
{
	int n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < sizeof(enabled); i++)
		n += enabled[i];
	n += subscribed ? 100 : 0;
	pthread_mutex_unlock(&lock);
	return n;
}

#endif /* PTG_HAVE_CUPTI */
