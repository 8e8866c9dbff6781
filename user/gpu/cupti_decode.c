// SPDX-License-Identifier: MIT
/*
 * The CUPTI agent's messages -> trace records: CUpti_Activity records
 * (agent/ptg_cupti_records.h), the names and clock pairs that come with
 * them. A function of the bytes received and the decoder's own tables
 * only: no socket, no process state, so that unit tests feed it buffers
 * built by hand (tests/unit/test_cupti_decode.c). Built only where CUPTI's
 * headers give the record layouts (PTG_HAVE_CUPTI).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/u64map.h"
#include "gpu/cupti_clock.h"
#include "gpu/cupti_decode.h"
#include "gpu/cupti_proto.h"
#include "ptg_cupti_proto.h"
#include "trace/trace_format.h"
#include "trace/trace_kineto.h"

#ifdef PTG_HAVE_CUPTI

#include "ptg_cupti_records.h"

#define NO_KERNEL_NAME "(kernel name not received)"
/*
 * What the agent sends is treated as hostile: the target may run anything
 * in place of the agent. These bound what one connection can make us keep;
 * real agents stay far below (CUPTI has some hundreds of callback ids, a
 * clock pair comes with each flush).
 */
#define MAX_NAME_MSGS (1u << 20)
#define MAX_API_NAMES (1u << 14)
#define MAX_NAME_LEN  PTG_SYM_STR_MAX /* the trace's own limit */
/* libstdc++'s demangler recurses: longer names are shown mangled */
#define MAX_DEMANGLE_LEN 16384

struct cupti_decoder {
	struct trace_writer *w;
	uint32_t pid;
	struct cupti_clock clock; /* the pairs of CLOCK messages */
	struct u64map kernels;	  /* name pointer in the target -> symbol id */
	struct u64map apis; /* domain << 32 | cbid -> index + 1 in api_names << 32 | symbol id */
	char **api_names;   /* without the version suffix */
	size_t napi_names;
	cupti_join_fn join; /* finds the probed host call an API record duplicates */
	void *join_ctx;
	struct u64map names;   /* memcpy, memset, sync name key -> symbol id */
	struct u64map devices; /* context id + 1 -> device id + 1 */
	size_t name_msgs;      /* KERNEL_NAME and API_NAME messages so far */
	struct cupti_decode_stats st;
};

int cupti_decoder__new(struct trace_writer *w, uint32_t pid, struct cupti_decoder **out)
{
	struct cupti_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->w = w;
	d->pid = pid;
	*out = d;
	return 0;
}

void cupti_decoder__free(struct cupti_decoder *d)
{
	if (!d)
		return;
	cupti_clock__free(&d->clock);
	for (size_t i = 0; i < d->napi_names; i++)
		free(d->api_names[i]);
	free(d->api_names);
	u64map__free(&d->kernels);
	u64map__free(&d->apis);
	u64map__free(&d->names);
	u64map__free(&d->devices);
	free(d);
}

const struct cupti_decode_stats *cupti_decoder__stats(const struct cupti_decoder *d)
{
	return &d->st;
}

void cupti_decoder__set_join(struct cupti_decoder *d, cupti_join_fn fn, void *ctx)
{
	d->join = fn;
	d->join_ctx = ctx;
}

static int add_pair(struct cupti_decoder *d, const struct ptg_cupti_clock *c)
{
	int ret = cupti_clock__add(&d->clock, c->cupti_ns, c->mono_ns);

	return ret < 0 ? ret : 0;
}

typedef char *(*demangle_fn)(const char *name, char *buf, size_t *len, int *status);

/* libstdc++'s demangler, found at run time: the loader is C and links no C++. */
static demangle_fn demangler(void)
{
	static demangle_fn fn;
	static bool tried;
	void *h;

	if (!tried) {
		tried = true;
		h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
		if (h)
			*(void **)&fn = dlsym(h, "__cxa_demangle");
	}
	return fn;
}

/* Kernel names as torch.profiler shows them: demangled when they are C++ names. */
static uint32_t kernel_sym(struct trace_writer *w, const char *mangled)
{
	demangle_fn fn =
	    strncmp(mangled, "_Z", 2) || strlen(mangled) > MAX_DEMANGLE_LEN ? NULL : demangler();
	char *name = NULL;
	int status = -1;
	uint32_t sym;

	if (fn)
		name = fn(mangled, NULL, NULL, &status);
	sym = trace_writer__sym(w, PTG_SYM_KERNEL, status == 0 && name ? name : mangled, "", 0);
	free(name);
	return sym;
}

/*
 * The name after a name message's head of hlen bytes, NUL-terminated; NULL
 * with *err set for a name the agent never sends (empty, a NUL inside, too
 * long, one too many).
 */
static char *msg_name(struct cupti_decoder *d, const uint8_t *data, size_t len, size_t hlen,
		      int *err)
{
	const char *p = (const char *)data + hlen;
	size_t n = len - hlen;
	char *name;

	*err = -EPROTO;
	if (len <= hlen || n > MAX_NAME_LEN || memchr(p, '\0', n) || d->name_msgs >= MAX_NAME_MSGS)
		return NULL;
	d->name_msgs++;
	name = strndup(p, n);
	if (!name)
		*err = -ENOMEM;
	return name;
}

static int on_kernel_name(struct cupti_decoder *d, const uint8_t *data, size_t len)
{
	struct ptg_cupti_kernel_name m;
	char *name;
	uint32_t sym;
	int err;

	if (len < sizeof(m))
		return -EPROTO;
	memcpy(&m, data, sizeof(m));
	/* a kernel record never carries a NULL name pointer: 0 is u64map's empty key */
	if (!m.ptr)
		return -EPROTO;
	name = msg_name(d, data, len, sizeof(m), &err);
	if (!name)
		return err;
	sym = kernel_sym(d->w, name);
	free(name);
	return sym ? u64map__put(&d->kernels, m.ptr, sym) : -ENOMEM;
}

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the suffix is the API version. */
static void strip_version(char *name)
{
	char *v = strrchr(name, '_');
	size_t i;

	if (!v || v[1] != 'v' || !v[2])
		return;
	for (i = 2; v[i]; i++) {
		if (v[i] < '0' || v[i] > '9')
			return;
	}
	*v = '\0';
}

/* The name is kept as well: the join compares it with the probed function's. */
static int on_api_name(struct cupti_decoder *d, const uint8_t *data, size_t len)
{
	struct ptg_cupti_api_name m;
	char *name, **n;
	uint32_t sym;
	int err;

	if (len < sizeof(m))
		return -EPROTO;
	memcpy(&m, data, sizeof(m));
	/* the only domains API records name; also keeps the map's key off 0 */
	if ((m.domain != CUPTI_CB_DOMAIN_DRIVER_API && m.domain != CUPTI_CB_DOMAIN_RUNTIME_API) ||
	    d->napi_names >= MAX_API_NAMES)
		return -EPROTO;
	name = msg_name(d, data, len, sizeof(m), &err);
	if (!name)
		return err;
	/* sent once per id: a second name for it changes nothing */
	if (u64map__get(&d->apis, (uint64_t)m.domain << 32 | m.cbid)) {
		free(name);
		return 0;
	}
	strip_version(name);
	sym = trace_writer__sym(d->w, PTG_SYM_CUDA_API, name, "", 0);
	n = sym ? realloc(d->api_names, (d->napi_names + 1) * sizeof(*n)) : NULL;
	if (!n) {
		free(name);
		return -ENOMEM;
	}
	d->api_names = n;
	n[d->napi_names++] = name;
	return u64map__put(&d->apis, (uint64_t)m.domain << 32 | m.cbid,
			   (uint64_t)d->napi_names << 32 | sym);
}

/* *name: NULL for a cbid whose name the agent did not send. */
static uint32_t api_sym(struct cupti_decoder *d, bool driver, uint32_t cbid, const char **name)
{
	uint32_t domain = driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
	uint64_t *v = u64map__get(&d->apis, (uint64_t)domain << 32 | cbid);
	char buf[64];

	*name = NULL;
	if (v) {
		*name = d->api_names[(*v >> 32) - 1];
		return (uint32_t)*v;
	}
	snprintf(buf, sizeof(buf), "%s cbid %u", driver ? "driver" : "runtime", cbid);
	return trace_writer__sym(d->w, PTG_SYM_CUDA_API, buf, "", 0);
}

/* A STRING symbol cached under key (never 0). */
static uint32_t name_sym(struct cupti_decoder *d, uint64_t key, const char *name)
{
	uint64_t *v = u64map__get(&d->names, key);
	uint32_t sym;

	if (v)
		return (uint32_t)*v;
	sym = trace_writer__sym(d->w, PTG_SYM_STRING, name, "", 0);
	if (sym && u64map__put(&d->names, key, sym))
		return 0;
	return sym;
}

/* The names Kineto gives these kinds, so both kinds of trace read alike. */
static const char *memcpy_kind_str(unsigned int k)
{
	static const char *const s[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
					"AtoD",	   "DtoA", "DtoD", "HtoH", "PtoP"};

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

static const char *memory_kind_str(unsigned int k)
{
	static const char *const s[] = {"Unknown", "Pageable", "Pinned",	"Device",
					"Array",   "Managed",  "Device Static", "Managed Static"};

	return k < sizeof(s) / sizeof(s[0]) ? s[k] : "Unknown";
}

static const char *sync_type_str(unsigned int t)
{
	switch (t) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
		return "Event Sync";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
		return "Stream Wait Event";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
		return "Stream Sync";
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
		return "Context Sync";
	default:
		return "Unknown Sync";
	}
}

static uint64_t map_ts(const struct cupti_decoder *d, uint64_t t)
{
	return cupti_clock__map(&d->clock, t);
}

/* ts and dur of [start, end]; false (and counted) when CUPTI did not complete the record. */
static bool set_interval(struct cupti_decoder *d, uint64_t start, uint64_t end,
			 struct ptg_record *r)
{
	uint64_t e;

	if (!start || end < start) {
		d->st.incomplete++;
		return false;
	}
	r->ts = map_ts(d, start);
	e = map_ts(d, end);
	r->dur = e > r->ts ? e - r->ts : 0;
	return true;
}

static int64_t pack_xy(int32_t x, int32_t y)
{
	return (int64_t)((uint64_t)(uint32_t)x | (uint64_t)(uint32_t)y << 32);
}

/* Synchronization records name a context, not a device: learnt from the other kinds. */
static void learn_device(struct cupti_decoder *d, uint32_t ctx, uint32_t dev)
{
	if (!u64map__get(&d->devices, (uint64_t)ctx + 1))
		u64map__put(&d->devices, (uint64_t)ctx + 1, (uint64_t)dev + 1);
}

static uint32_t device_of(const struct cupti_decoder *d, uint32_t ctx)
{
	uint64_t *v = u64map__get(&d->devices, (uint64_t)ctx + 1);

	return v ? (uint32_t)(*v - 1) : 0;
}

/* What Kineto writes of a GPU record that its fields cannot hold: an args blob (trace.h). */
static int __attribute__((format(printf, 3, 4)))
write_gpu(struct cupti_decoder *d, struct ptg_record *r, const char *fmt, ...)
{
	char args[160];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(args))
		return trace_writer__record(d->w, r);
	r->flags |= PTG_F_ARGS_ADD;
	return trace_writer__record_args(d->w, r, args, n);
}

static int decode_kernel(struct cupti_decoder *d, const ptg_cupti_kernel *k)
{
	struct ptg_record r = {.kind = PTG_REC_GPU_KERNEL, .pid = d->pid};
	uint64_t *sym = u64map__get(&d->kernels, (uint64_t)(uintptr_t)k->name);

	if (!set_interval(d, k->start, k->end, &r))
		return 0;
	r.sym =
	    sym ? (uint32_t)*sym : trace_writer__sym(d->w, PTG_SYM_KERNEL, NO_KERNEL_NAME, "", 0);
	r.stream = k->streamId;
	r.corr = k->correlationId;
	r.device = k->deviceId;
	r.aux[0] = pack_xy(k->gridX, k->gridY);
	r.aux[1] = k->gridZ;
	r.aux[2] = pack_xy(k->blockX, k->blockY);
	r.aux[3] = k->blockZ;
	learn_device(d, k->contextId, k->deviceId);
	d->st.kernels++;
	/* Kineto's names; occupancy and blocks per SM would need the device's properties */
	return write_gpu(d, &r,
			 "{\"context\": %u, \"registers per thread\": %u, \"shared memory\": %lld}",
			 k->contextId, k->registersPerThread,
			 (long long)k->staticSharedMemory + k->dynamicSharedMemory);
}

static int decode_memcpy(struct cupti_decoder *d, const ptg_cupti_memcpy *m)
{
	struct ptg_record r = {.kind = PTG_REC_GPU_MEMCPY, .pid = d->pid};
	uint64_t key = 1ull << 32 | (uint64_t)m->copyKind << 16 | m->srcKind << 8 | m->dstKind;
	char name[96];

	if (!set_interval(d, m->start, m->end, &r))
		return 0;
	snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", memcpy_kind_str(m->copyKind),
		 memory_kind_str(m->srcKind), memory_kind_str(m->dstKind));
	r.sym = name_sym(d, key, name);
	r.stream = m->streamId;
	r.corr = m->correlationId;
	r.device = m->deviceId;
	r.aux[0] = (int64_t)m->bytes;
	r.aux[1] = m->copyKind;
	learn_device(d, m->contextId, m->deviceId);
	d->st.memcpys++;
	return write_gpu(d, &r, "{\"context\": %u}", m->contextId);
}

static int decode_memset(struct cupti_decoder *d, const ptg_cupti_memset *m)
{
	struct ptg_record r = {.kind = PTG_REC_GPU_MEMSET, .pid = d->pid};
	char name[64];

	if (!set_interval(d, m->start, m->end, &r))
		return 0;
	snprintf(name, sizeof(name), "Memset (%s)", memory_kind_str(m->memoryKind));
	r.sym = name_sym(d, 2ull << 32 | m->memoryKind, name);
	r.stream = m->streamId;
	r.corr = m->correlationId;
	r.device = m->deviceId;
	r.aux[0] = (int64_t)m->bytes;
	learn_device(d, m->contextId, m->deviceId);
	d->st.memsets++;
	return write_gpu(d, &r, "{\"context\": %u}", m->contextId);
}

/* aux as Kineto's cuda_sync events (trace_kineto.h): the kind's symbol, the event id + 1. */
static int decode_sync(struct cupti_decoder *d, const ptg_cupti_sync *s)
{
	struct ptg_record r = {.kind = PTG_REC_GPU_SYNC, .pid = d->pid};

	if (!set_interval(d, s->start, s->end, &r))
		return 0;
	r.sym = name_sym(d, 3ull << 32 | (uint32_t)s->type, sync_type_str(s->type));
	r.aux[0] = r.sym;
	if (s->streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		r.stream = s->streamId;
	if (s->cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		r.aux[3] = (int64_t)s->cudaEventId + 1;
	r.corr = s->correlationId;
	r.device = device_of(d, s->contextId);
	d->st.syncs++;
	return trace_writer__record(d->w, &r);
}

/*
 * The probed host call that r duplicates, if any: then only a FLOW record
 * that gives it r's correlation id, since the host call's record has the
 * thread's frames around it and r, written at a flush, does not.
 */
static bool join_flow(struct cupti_decoder *d, const char *name, struct ptg_record *r)
{
	uint64_t id = 0, ts = 0;

	if (!d->join)
		return false;
	if (!d->join(d->join_ctx, r->pid, r->tid, name, r->aux[1] != 0, (uint32_t)r->corr, r->ts,
		     r->ts + r->dur, &id, &ts)) {
		d->st.api_unjoined++;
		return false;
	}
	*r = (struct ptg_record){
	    .kind = PTG_REC_FLOW,
	    .pid = r->pid,
	    .tid = r->tid,
	    .sym = r->sym,
	    .ts = ts,
	    .corr = r->corr,
	    .aux = {0, r->aux[1], r->aux[0], (int64_t)id},
	};
	d->st.api_joined++;
	return true;
}

/* aux as Kineto's cuda_runtime/cuda_driver events: cbid, and which API. */
static int decode_api(struct cupti_decoder *d, const ptg_cupti_api *a)
{
	struct ptg_record r = {.kind = PTG_REC_CUDA_CALL, .pid = d->pid, .tid = a->threadId};
	bool driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
	const char *name;

	if (!set_interval(d, a->start, a->end, &r))
		return 0;
	r.sym = api_sym(d, driver, a->cbid, &name);
	r.corr = a->correlationId;
	r.aux[0] = a->cbid;
	r.aux[1] = driver ? KINETO_CALL_DRIVER : 0;
	d->st.api_calls++;
	join_flow(d, name, &r);
	return trace_writer__record(d->w, &r);
}

union any_record {
	CUpti_Activity a;
	ptg_cupti_kernel k;
	ptg_cupti_memcpy mc;
	ptg_cupti_memset ms;
	ptg_cupti_sync s;
	ptg_cupti_api api;
};

static int decode_record(struct cupti_decoder *d, const union any_record *u)
{
	switch (u->a.kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return decode_kernel(d, &u->k);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return decode_memcpy(d, &u->mc);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return decode_memset(d, &u->ms);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return decode_sync(d, &u->s);
	default:
		return decode_api(d, &u->api);
	}
}

int cupti_decoder__buffer(struct cupti_decoder *d, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	union any_record u;
	size_t off = 0, size;
	CUpti_ActivityKind kind;
	int err;

	while (off < len) {
		if (len - off < sizeof(kind))
			break;
		memcpy(&kind, p + off, sizeof(kind));
		size = ptg_cupti_record_size(kind);
		if (!size || size > len - off)
			break;
		/* a copy: the payload of a message need not be 8-byte aligned */
		memcpy(&u, p + off, size);
		err = decode_record(d, &u);
		if (err)
			return err;
		off += size;
	}
	/* the agent only sends records it checked: anything left is damage */
	d->st.undecoded += len - off;
	return 0;
}

int cupti_decoder__message(struct cupti_decoder *d, uint32_t type, const void *data, size_t len)
{
	struct ptg_cupti_dropped dr;
	struct ptg_cupti_clock c;

	switch (type) {
	case PTG_CUPTI_MSG_CLOCK:
		if (len != sizeof(c))
			return -EPROTO;
		memcpy(&c, data, sizeof(c));
		return add_pair(d, &c);
	case PTG_CUPTI_MSG_KERNEL_NAME:
		return on_kernel_name(d, data, len);
	case PTG_CUPTI_MSG_API_NAME:
		return on_api_name(d, data, len);
	case PTG_CUPTI_MSG_BUFFER:
		return cupti_decoder__buffer(d, data, len);
	case PTG_CUPTI_MSG_DROPPED:
		if (len != sizeof(dr))
			return -EPROTO;
		memcpy(&dr, data, sizeof(dr));
		if (__builtin_add_overflow(d->st.cupti_dropped, dr.cupti, &d->st.cupti_dropped))
			d->st.cupti_dropped = UINT64_MAX;
		if (__builtin_add_overflow(d->st.agent_unknown, dr.unknown, &d->st.agent_unknown))
			d->st.agent_unknown = UINT64_MAX;
		return 0;
	default:
		return 0;
	}
}

static int stream_msg(void *ctx, uint32_t type, const uint8_t *data, size_t len)
{
	return cupti_decoder__message(ctx, type, data, len);
}

int cupti_decoder__stream(struct cupti_decoder *d, const void *buf, size_t len, size_t *used)
{
	return cupti_split_msgs(buf, len, used, stream_msg, d);
}

int cupti_decoder__losses(struct cupti_decoder *d)
{
	const struct {
		enum ptg_lost kind;
		uint64_t n;
	} l[] = {
	    {PTG_LOST_CUPTI_DROPPED, d->st.cupti_dropped},
	    {PTG_LOST_CUPTI_UNKNOWN, d->st.agent_unknown},
	    {PTG_LOST_CUPTI_INCOMPLETE, d->st.incomplete},
	    {PTG_LOST_CUPTI_UNDECODED_BYTES, d->st.undecoded},
	};
	int err = 0;

	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]) && !err; i++) {
		if (l[i].n)
			err = trace_writer__lost(d->w, l[i].kind, UINT32_MAX, l[i].n);
	}
	return err;
}

#else /* !PTG_HAVE_CUPTI: no record layouts to decode with */

int cupti_decoder__new(struct trace_writer *w, uint32_t pid, struct cupti_decoder **out)
{
	return -EOPNOTSUPP;
}

int cupti_decoder__message(struct cupti_decoder *d, uint32_t type, const void *data, size_t len)
{
	return -EOPNOTSUPP;
}

int cupti_decoder__buffer(struct cupti_decoder *d, const void *buf, size_t len)
{
	return -EOPNOTSUPP;
}

int cupti_decoder__stream(struct cupti_decoder *d, const void *buf, size_t len, size_t *used)
{
	*used = 0;
	return -EOPNOTSUPP;
}

const struct cupti_decode_stats *cupti_decoder__stats(const struct cupti_decoder *d)
{
	return NULL;
}

void cupti_decoder__set_join(struct cupti_decoder *d, cupti_join_fn fn, void *ctx)
{
}

int cupti_decoder__losses(struct cupti_decoder *d)
{
	return 0;
}

void cupti_decoder__free(struct cupti_decoder *d)
{
}

#endif /* PTG_HAVE_CUPTI */
