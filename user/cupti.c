// SPDX-License-Identifier: MIT
/*
 * The loader's side of the CUPTI agent: clock mapping, the decoder of the
 * agent's messages, and the socket that agents connect to. A reader thread
 * only moves bytes from the sockets into a bounded queue (so an agent never
 * waits for record's poll loop); everything else runs on record's thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cupti.h"
#include "elf_file.h"
#include "inject.h"
#include "trace_kineto.h"
#include "procfs.h"
#include "ptg_cupti_proto.h"
#include "trace_format.h"
#include "trusted.h"
#include "u64map.h"

uint64_t cupti_clock_map(const struct cupti_clock_pair *pairs, size_t n, uint64_t t)
{
	const struct cupti_clock_pair *a, *b;
	size_t lo = 0, hi;
	unsigned __int128 x;

	if (!n)
		return t;
	if (t <= pairs[0].cupti_ns)
		return pairs[0].mono_ns > pairs[0].cupti_ns - t
			   ? pairs[0].mono_ns - (pairs[0].cupti_ns - t)
			   : 0;
	if (t >= pairs[n - 1].cupti_ns)
		return pairs[n - 1].mono_ns + (t - pairs[n - 1].cupti_ns);
	/* the last pair at or before t: pairs[lo].cupti_ns <= t < pairs[lo + 1].cupti_ns */
	hi = n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (pairs[mid].cupti_ns <= t)
			lo = mid;
		else
			hi = mid;
	}
	a = &pairs[lo];
	b = &pairs[lo + 1];
	x = (unsigned __int128)(t - a->cupti_ns) * (b->mono_ns - a->mono_ns);
	return a->mono_ns + (uint64_t)(x / (b->cupti_ns - a->cupti_ns));
}

int cupti_split_msgs(const void *buf, size_t len, size_t *used, cupti_msg_fn fn, void *ctx)
{
	const uint8_t *p = buf;
	struct ptg_cupti_msg_hdr h;
	size_t off = 0;
	int err = 0;

	while (!err && len - off >= sizeof(h)) {
		memcpy(&h, p + off, sizeof(h));
		if (h.len > PTG_CUPTI_MAX_MSG) {
			err = -EPROTO;
			break;
		}
		if (len - off - sizeof(h) < h.len)
			break;
		err = fn(ctx, h.type, p + off + sizeof(h), h.len);
		off += sizeof(h) + h.len;
	}
	*used = off;
	return err;
}

bool cupti_available(void)
{
#ifdef PTG_HAVE_CUPTI
	return true;
#else
	return false;
#endif
}

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
#define MAX_PAIRS     (1u << 20)
#define MAX_NAME_LEN  PTG_SYM_STR_MAX /* the trace's own limit */
/* libstdc++'s demangler recurses: longer names are shown mangled */
#define MAX_DEMANGLE_LEN 16384

struct cupti_decoder {
	struct trace_writer *w;
	uint32_t pid;
	struct cupti_clock_pair *pairs;
	size_t npairs, cap;
	struct u64map kernels; /* name pointer in the target -> symbol id */
	struct u64map apis;    /* domain << 32 | cbid -> index + 1 in api_names << 32 | symbol id */
	char **api_names;      /* without the version suffix */
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
	free(d->pairs);
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
	const struct cupti_clock_pair *last = d->npairs ? &d->pairs[d->npairs - 1] : NULL;
	struct cupti_clock_pair *p;

	/* both clocks only go forward: a pair that does not is a bad reading */
	if (last && (c->cupti_ns <= last->cupti_ns || c->mono_ns < last->mono_ns))
		return 0;
	/* enough for days: later ones only refine what the last pair extrapolates */
	if (d->npairs == MAX_PAIRS)
		return 0;
	if (d->npairs == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;

		p = realloc(d->pairs, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->pairs = p;
		d->cap = cap;
	}
	d->pairs[d->npairs++] = (struct cupti_clock_pair){c->cupti_ns, c->mono_ns};
	return 0;
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
	return cupti_clock_map(d->pairs, d->npairs, t);
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

	if (!d->join || !name)
		return false;
	if (!d->join(d->join_ctx, r->pid, r->tid, name, r->aux[1] != 0, r->ts, r->ts + r->dur, &id,
		     &ts)) {
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
		const char *what;
		uint64_t n;
	} l[] = {
	    {"cupti_dropped", d->st.cupti_dropped},
	    {"cupti_unknown", d->st.agent_unknown},
	    {"cupti_incomplete", d->st.incomplete},
	    {"cupti_undecoded_bytes", d->st.undecoded},
	};
	int err = 0;

	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]) && !err; i++) {
		if (l[i].n)
			err = trace_writer__loss(d->w, l[i].what, UINT32_MAX, l[i].n);
	}
	return err;
}

#define MAX_CONNS	256	       /* agent connections in one recording */
#define CHUNK_SIZE	(256u << 10)   /* one read from a socket */
#define MAX_QUEUED	(256ull << 20) /* bytes read and not decoded yet: then agents wait */
#define CONNECT_WAIT_MS 3000	       /* an injected agent connects within this, or never */

#define MAX_FOREIGN_WARNINGS 8 /* connections not the target's: then they are closed quietly */

/* CH_FOREIGN: a peer closed at accept (data: its struct ucred), with no conn slot. */
enum chunk_kind { CH_OPEN, CH_DATA, CH_EOF, CH_FOREIGN };

struct chunk {
	struct chunk *next;
	int conn;
	int kind; /* enum chunk_kind */
	size_t len;
	uint8_t data[];
};

/* Only the reader thread touches fd; only record's thread the rest. */
struct conn {
	int fd;
	pid_t peer; /* SO_PEERCRED: set before CH_OPEN is queued */
	uid_t uid;  /* the same */
	bool drop;  /* under lock: the reader is to close fd (a rejected peer) */
	bool rejected, hello, ended, closed;
	bool active; /* said PTG_CUPTI_ACTIVE: recording; otherwise it went quiet */
	uint8_t *in;
	size_t inlen, incap;
	struct cupti_decoder *dec;
};

/* Who may connect: set by cupti__start, when the target is known. */
struct peer_rule {
	bool set;
	pid_t pid;
	uid_t uid; /* the target's effective uid, as SO_PEERCRED gives it */
	bool launched;
};

struct cupti {
	bool quiet;
	int lfd;
	int wake;
	char name[64];
	char agent[PATH_MAX]; /* for messages: the agent is agent_fd */
	int agent_fd;
	struct lib_copy *launch_copy; /* record -- CMD: what CUDA_INJECTION64_PATH names */
	thrd_t reader;
	bool reader_running;

	mtx_t lock; /* guards the chunk queue and the flags after it */
	struct chunk *head, *tail;
	uint64_t queued;
	bool quit, hangup;

	struct conn conns[MAX_CONNS];
	int nconns; /* reader thread: slots handed out */

	struct trace_writer *w;
	pid_t pid;
	uint64_t start_time; /* of pid (proc_start_time) */
	bool launched, started;
	struct peer_rule rule; /* under lock: the reader checks peers as they connect */
	unsigned int nforeign;
	bool cuda_seen, inject_tried, expect_agent, version_meta;
	uint64_t inject_ms;
	int err;
	cupti_join_fn join;
	void *join_ctx;
};

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void warn(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ptrace-gpu: warning: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void push_chunk(struct cupti *c, struct chunk *ch)
{
	mtx_lock(&c->lock);
	if (c->tail)
		c->tail->next = ch;
	else
		c->head = ch;
	c->tail = ch;
	c->queued += ch->len;
	mtx_unlock(&c->lock);
}

static int push_event(struct cupti *c, int conn, int kind)
{
	struct chunk *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	ch->conn = conn;
	ch->kind = kind;
	push_chunk(c, ch);
	return 0;
}

static bool peer_ok(const struct peer_rule *r, pid_t peer, uid_t uid);

/*
 * Once the target is known, a peer that is not it gets no slot, so that
 * others cannot use the slots up: closed here, told to record's thread.
 */
static bool foreign_peer(struct cupti *c, const struct ucred *cred)
{
	struct peer_rule r;
	struct chunk *ch;

	mtx_lock(&c->lock);
	r = c->rule;
	mtx_unlock(&c->lock);
	if (!r.set || peer_ok(&r, cred->pid, cred->uid))
		return false;
	ch = calloc(1, sizeof(*ch) + sizeof(*cred));
	if (ch) {
		*ch = (struct chunk){.conn = -1, .kind = CH_FOREIGN, .len = sizeof(*cred)};
		memcpy(ch->data, cred, sizeof(*cred));
		push_chunk(c, ch);
	}
	return true;
}

static void accept_conn(struct cupti *c, bool hangup)
{
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	int fd;

	fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	/* pid 0 (unknown) is nobody's: rejected */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	if (foreign_peer(c, &cred) || c->nconns == MAX_CONNS) {
		close(fd);
		return;
	}
	/* an agent that connects after stop: let it flush and end at once */
	if (hangup)
		shutdown(fd, SHUT_WR);
	c->conns[c->nconns].peer = cred.pid;
	c->conns[c->nconns].uid = cred.uid;
	c->conns[c->nconns].fd = fd;
	if (push_event(c, c->nconns, CH_OPEN)) {
		close(fd);
		return;
	}
	mtx_lock(&c->lock);
	c->nconns++;
	mtx_unlock(&c->lock);
}

static void read_conn(struct cupti *c, int i)
{
	struct conn *k = &c->conns[i];
	struct chunk *ch = malloc(sizeof(*ch) + CHUNK_SIZE);
	ssize_t n;

	if (!ch)
		return;
	n = recv(k->fd, ch->data, CHUNK_SIZE, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(ch);
		return;
	}
	*ch = (struct chunk){.conn = i, .kind = n > 0 ? CH_DATA : CH_EOF, .len = n > 0 ? n : 0};
	push_chunk(c, ch);
	if (n <= 0) {
		close(k->fd);
		k->fd = -1;
	}
}

/* Hangs up on every agent: each flushes, sends END and closes. */
static void hangup_all(struct cupti *c)
{
	for (int i = 0; i < c->nconns; i++) {
		if (c->conns[i].fd >= 0)
			shutdown(c->conns[i].fd, SHUT_WR);
	}
}

static void reader_flags(struct cupti *c, bool *quit, bool *hangup, bool *full, bool *open)
{
	mtx_lock(&c->lock);
	for (int i = 0; i < c->nconns; i++) {
		if (c->conns[i].drop && c->conns[i].fd >= 0) {
			close(c->conns[i].fd);
			c->conns[i].fd = -1;
		}
	}
	*quit = c->quit;
	*hangup = c->hangup;
	*full = c->queued >= MAX_QUEUED;
	*open = c->rule.set;
	mtx_unlock(&c->lock);
}

static int reader_main(void *arg)
{
	struct pollfd p[MAX_CONNS + 2];
	int idx[MAX_CONNS + 2], n;
	bool quit, hangup, full, open, hung = false;
	struct cupti *c = arg;
	uint64_t v;

	for (;;) {
		reader_flags(c, &quit, &hangup, &full, &open);
		if (quit)
			return 0;
		if (hangup && !hung)
			hangup_all(c);
		hung = hangup;
		n = 0;
		p[n++] = (struct pollfd){.fd = c->wake, .events = POLLIN};
		/*
		 * until the target is known no peer can be checked: they wait in
		 * the backlog (no agent connects before that), not in our slots
		 */
		p[n++] = (struct pollfd){.fd = open ? c->lfd : -1, .events = POLLIN};
		for (int i = 0; i < c->nconns && !full; i++) {
			if (c->conns[i].fd < 0)
				continue;
			idx[n] = i;
			p[n++] = (struct pollfd){.fd = c->conns[i].fd, .events = POLLIN};
		}
		/* with the queue full, agents wait in their own thread; look again soon */
		if (poll(p, (nfds_t)n, full ? 10 : -1) <= 0)
			continue;
		if ((p[0].revents & POLLIN) && read(c->wake, &v, sizeof(v)) < 0) {
			/* EAGAIN: nothing to clear */
		}
		if (p[1].revents & POLLIN)
			accept_conn(c, hangup);
		for (int j = 2; j < n; j++) {
			if (p[j].revents)
				read_conn(c, idx[j]);
		}
	}
}

static void wake_reader(struct cupti *c)
{
	uint64_t one = 1;

	if (write(c->wake, &one, sizeof(one)) < 0) {
		/* the counter is non-zero already: the reader wakes anyway */
	}
}

/*
 * $PTG_CUPTI_AGENT, else libptg_cupti.so next to this executable (which in a
 * build tree is where the build puts it). Never the build path compiled in:
 * an installed ptrace-gpu must not load from a build tree that someone else
 * may own. Returns an fd of the file, checked by trusted_open(), or a
 * negative errno with the reason in err; *named: the user chose the file.
 */
static int find_agent(char *path, size_t len, bool *named, char *err, size_t errlen)
{
	const char *env = getenv("PTG_CUPTI_AGENT");
	char exe[PATH_MAX - 32];
	ssize_t n;
	char *slash;

	*named = env && env[0];
	if (*named) {
		snprintf(path, len, "%s", env);
		return trusted_open(path, err, errlen);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		snprintf(err, errlen, "/proc/self/exe: %s", strerror(errno));
		return -ENOENT;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, len, "%s/libptg_cupti.so", exe);
	return trusted_open(path, err, errlen);
}

static int listen_socket(struct cupti *c)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint32_t rnd = 0;
	size_t n;

	/* unguessable, so that no other local process takes the name first */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)now_ms(CLOCK_MONOTONIC) ^ (uint32_t)getpid() << 16;
	snprintf(c->name, sizeof(c->name), "ptrace-gpu-cupti-%d-%08x", getpid(), rnd);
	n = strlen(c->name);
	memcpy(a.sun_path + 1, c->name, n);
	c->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->lfd < 0)
		return -errno;
	if (bind(c->lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(c->lfd, 64))
		return -errno;
	return 0;
}

int cupti__open(bool quiet, struct cupti **out)
{
	char why[PATH_MAX + 128];
	struct cupti *c;
	bool named;
	int err;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->quiet = quiet;
	c->lfd = c->wake = c->agent_fd = -1;
	mtx_init(&c->lock, mtx_plain);
	c->agent_fd = find_agent(c->agent, sizeof(c->agent), &named, why, sizeof(why));
	if (c->agent_fd < 0 && named) {
		fprintf(stderr, "ptrace-gpu: refusing the CUPTI agent %s ($PTG_CUPTI_AGENT): %s\n",
			c->agent, why);
		err = -EPERM;
		goto cleanup;
	}
	if (c->agent_fd < 0) {
		/* not the command's error (-EPERM is kept for the agent the user named) */
		err = -ENOENT;
		warn("no usable CUPTI agent: %s: no GPU activity", why);
		goto cleanup;
	}
	err = listen_socket(c);
	if (!err) {
		c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		err = c->wake < 0 ? -errno : 0;
	}
	if (!err && thrd_create(&c->reader, reader_main, c) != thrd_success)
		err = -EAGAIN;
	if (err) {
		warn("cannot open the socket for the CUPTI agent: %s: no GPU activity",
		     strerror(-err));
		goto cleanup;
	}
	c->reader_running = true;
	*out = c;
	return 0;
cleanup:
	cupti__free(c);
	return err;
}

/*
 * The child and its descendants load a copy made from the checked fd, in a
 * directory only root can write, kept until the recording ends: the
 * agent's own path could have been swapped since it was checked.
 */
int cupti__launch_env(struct cupti *c)
{
	const char *cur = getenv("CUDA_INJECTION64_PATH");
	char err[PATH_MAX + 128];
	int ret;

	if (!c)
		return 0;
	if (cur && cur[0]) {
		warn("CUDA_INJECTION64_PATH is set already (%s): leaving it, no GPU activity", cur);
		return 0;
	}
	ret = lib_copy__new(c->agent_fd, getpid(), "libptg_cupti.so", &c->launch_copy, err,
			    sizeof(err));
	if (ret) {
		warn("no GPU activity: cannot place the CUPTI agent for the command: %s", err);
		return 0;
	}
	if (setenv("CUDA_INJECTION64_PATH", lib_copy__path(c->launch_copy), 1) ||
	    setenv(PTG_CUPTI_SOCKET_ENV, c->name, 1))
		return -errno;
	return 0;
}

void cupti__set_join(struct cupti *c, cupti_join_fn fn, void *ctx)
{
	if (!c)
		return;
	c->join = fn;
	c->join_ctx = ctx;
}

void cupti__set_target(struct cupti *c, pid_t pid, bool launched)
{
	struct peer_rule r = {.set = true, .pid = pid, .launched = launched};
	int err;

	if (!c || c->rule.set)
		return;
	err = proc_euid(pid, &r.uid);
	if (err) {
		/* no uid is (uid_t)-1: every agent is then refused */
		r.uid = (uid_t)-1;
		warn("no GPU activity: cannot read the uid of pid %d: %s", pid, strerror(-err));
	}
	mtx_lock(&c->lock);
	c->rule = r;
	mtx_unlock(&c->lock);
	wake_reader(c);
}

int cupti__start(struct cupti *c, struct trace_writer *w, pid_t pid, uint64_t start_time,
		 bool launched)
{
	if (!c)
		return 0;
	cupti__set_target(c, pid, launched);
	c->w = w;
	c->pid = pid;
	c->start_time = start_time;
	c->launched = launched;
	c->started = true;
	return 0;
}

/* CUPTI reaches into NVIDIA's driver through this export: a stand-in libcuda lacks it. */
static bool nvidia_driver(const char *path)
{
	struct elf_sym_info s;
	struct elf_file *ef;
	bool ret;

	if (elf_file__open(path, &ef))
		return false;
	ret = !elf_file__find_sym(ef, "cuGetExportTable", false, &s);
	elf_file__close(ef);
	return ret;
}

int cupti__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias)
{
	struct cupti *c = ctx;
	const char *base = strrchr(m->path, '/');

	/*
	 * the driver: CUDA may be used, and CUPTI can work, only once it is
	 * mapped (not when merely found ahead, m->end 0: that target may never
	 * use CUDA)
	 */
	if (!c || !m->end || !base || strncmp(base + 1, "libcuda.so", 10) || c->cuda_seen)
		return 0;
	c->cuda_seen = true;
	if (!nvidia_driver(attach_path)) {
		c->inject_tried = true;
		if (!c->quiet)
			fprintf(stderr, "ptrace-gpu: %s is not NVIDIA's driver: no CUPTI agent\n",
				m->path);
	}
	return 0;
}

static void inject_agent(struct cupti *c)
{
	struct inject_opts o = {
	    .entry = PTG_CUPTI_ATTACH_SYM, .arg = c->name, .start_time = c->start_time};
	struct inject_result res;
	char err[PATH_MAX + 640];
	int ret;

	c->inject_tried = true;
	/*
	 * the target gets the bytes of the fd we checked, in a memfd of its own
	 * (or a copy in its /tmp): our path may mean another file in its mount
	 * namespace, and /proc/OUR_PID/fd/N is closed to a target that is not
	 * root or in another pid namespace
	 */
	ret = inject_library_fd(c->pid, c->agent_fd, "libptg_cupti.so", &o, &res, err, sizeof(err));
	if (ret) {
		warn("no GPU activity: cannot load the CUPTI agent: %s", err);
		return;
	}
	if (res.entry_ret < 0) {
		warn("no GPU activity: the CUPTI agent in pid %d did not start: %s", c->pid,
		     strerror(-res.entry_ret));
	} else if (res.entry_ret == 1) {
		warn("no GPU activity: the CUPTI agent in pid %d is busy with another recording",
		     c->pid);
	} else {
		c->expect_agent = true;
		c->inject_ms = now_ms(CLOCK_MONOTONIC);
	}
}

/*
 * For -p, the target; for -- CMD, the command or any process it started;
 * with the target's uid either way. The socket's name is in
 * /proc/net/unix for anyone to see.
 */
static bool peer_ok(const struct peer_rule *r, pid_t peer, uid_t uid)
{
	char path[64], buf[512], *p;
	int hops = 0;
	FILE *f;

	if (uid != r->uid)
		return false;
	while (peer > 1 && hops++ < 64) {
		if (peer == r->pid)
			return true;
		if (!r->launched)
			return false;
		snprintf(path, sizeof(path), "/proc/%d/stat", peer);
		f = fopen(path, "re");
		if (!f)
			return false;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (!p || sscanf(p + 2, "%*c %d", &peer) != 1)
			return false;
	}
	return false;
}

/* The agent's text for our stderr: short, and no control characters (terminal escapes). */
static void status_text(const uint8_t *data, size_t len, char *buf, size_t size)
{
	size_t i;

	for (i = 0; i < len && i < size - 1; i++)
		buf[i] = data[i] < 0x20 || data[i] >= 0x7f ? '?' : (char)data[i];
	buf[i] = '\0';
}

static void on_status(struct cupti *c, struct conn *k, const uint8_t *data, size_t len)
{
	struct ptg_cupti_status st;
	char text[401];

	if (len < sizeof(st))
		return;
	memcpy(&st, data, sizeof(st));
	status_text(data + sizeof(st), len - sizeof(st), text, sizeof(text));
	k->active = st.state == PTG_CUPTI_ACTIVE;
	if (k->active) {
		if (!c->quiet)
			fprintf(stderr, "ptrace-gpu: recording GPU activity of pid %d (CUPTI)\n",
				k->peer);
	} else if (st.state == PTG_CUPTI_BUSY) {
		warn("pid %d: %s: another CUPTI client (torch.profiler/Kineto, Nsight) holds "
		     "CUPTI; recording host-side data only",
		     k->peer, text);
	} else {
		warn("pid %d: CUPTI failed: %s; recording host-side data only", k->peer, text);
	}
}

static int on_hello(struct cupti *c, struct conn *k, const uint8_t *data, size_t len)
{
	struct ptg_cupti_hello h;
	char buf[32];
	int err;

	if (len < sizeof(h))
		return -EPROTO;
	memcpy(&h, data, sizeof(h));
	if (h.proto_version != PTG_CUPTI_PROTO_VERSION ||
	    h.cupti_build_version != CUPTI_API_VERSION) {
		warn("pid %d: the CUPTI agent is of another build (protocol %u, CUPTI %u; this "
		     "build: %u, %u): ignored",
		     k->peer, h.proto_version, h.cupti_build_version, PTG_CUPTI_PROTO_VERSION,
		     (unsigned int)CUPTI_API_VERSION);
		return -EPROTO;
	}
	err = cupti_decoder__new(c->w, (uint32_t)k->peer, &k->dec);
	if (err)
		return err;
	cupti_decoder__set_join(k->dec, c->join, c->join_ctx);
	k->hello = true;
	if (c->version_meta)
		return 0;
	c->version_meta = true;
	snprintf(buf, sizeof(buf), "%u", h.cupti_version);
	return trace_writer__meta(c->w, "cupti.version", buf);
}

static int on_message(struct cupti *c, struct conn *k, uint32_t type, const uint8_t *data,
		      size_t len)
{
	if (type == PTG_CUPTI_MSG_HELLO)
		return k->hello ? -EPROTO : on_hello(c, k, data, len);
	if (!k->hello)
		return -EPROTO;
	switch (type) {
	case PTG_CUPTI_MSG_STATUS:
		on_status(c, k, data, len);
		return 0;
	case PTG_CUPTI_MSG_END:
		k->ended = true;
		return 0;
	default:
		return cupti_decoder__message(k->dec, type, data, len);
	}
}

struct conn_ctx {
	struct cupti *c;
	struct conn *k;
};

static int conn_msg(void *ctx, uint32_t type, const uint8_t *data, size_t len)
{
	struct conn_ctx *x = ctx;

	return on_message(x->c, x->k, type, data, len);
}

/* Decodes the complete messages in k->in and keeps the rest. */
static int parse_conn(struct cupti *c, struct conn *k)
{
	struct conn_ctx x = {c, k};
	size_t off = 0;
	int err;

	err = cupti_split_msgs(k->in, k->inlen, &off, conn_msg, &x);
	memmove(k->in, k->in + off, k->inlen - off);
	k->inlen -= off;
	return err;
}

static int append(struct conn *k, const uint8_t *data, size_t len)
{
	uint8_t *p;
	size_t cap;

	if (k->inlen + len > k->incap) {
		cap = k->incap ? k->incap : CHUNK_SIZE;
		while (cap < k->inlen + len)
			cap *= 2;
		p = realloc(k->in, cap);
		if (!p)
			return -ENOMEM;
		k->in = p;
		k->incap = cap;
	}
	memcpy(k->in + k->inlen, data, len);
	k->inlen += len;
	return 0;
}

/*
 * A connection that breaks the protocol, or is not the target's, is closed
 * and what it sent is ignored; the recording goes on.
 */
static void reject(struct cupti *c, struct conn *k)
{
	k->rejected = true;
	free(k->in);
	k->in = NULL;
	k->inlen = k->incap = 0;
	mtx_lock(&c->lock);
	k->drop = true;
	mtx_unlock(&c->lock);
	wake_reader(c);
}

static void warn_foreign(struct cupti *c, pid_t pid, uid_t uid)
{
	if (++c->nforeign <= MAX_FOREIGN_WARNINGS)
		warn("pid %d (uid %u) connected to the CUPTI agents' socket and is not the "
		     "target: closed, ignored",
		     pid, (unsigned int)uid);
	if (c->nforeign == MAX_FOREIGN_WARNINGS)
		warn("more connections that are not the target's are closed without a word");
}

static int on_chunk(struct cupti *c, struct chunk *ch)
{
	struct ucred cred;
	struct conn *k;
	int err;

	if (ch->kind == CH_FOREIGN) {
		memcpy(&cred, ch->data, sizeof(cred));
		warn_foreign(c, cred.pid, cred.uid);
		return 0;
	}
	k = &c->conns[ch->conn];
	switch (ch->kind) {
	case CH_OPEN:
		if (!peer_ok(&c->rule, k->peer, k->uid)) {
			warn_foreign(c, k->peer, k->uid);
			reject(c, k);
		} else if (k->peer == c->pid) {
			c->expect_agent = false;
		}
		return 0;
	case CH_EOF:
		k->closed = true;
		if (k->active && !k->ended && !k->rejected)
			warn("pid %d: the CUPTI agent hung up before its last flush (the process "
			     "was killed?): its last GPU records are missing",
			     k->peer);
		return 0;
	}
	if (k->rejected)
		return 0;
	err = append(k, ch->data, ch->len);
	if (!err)
		err = parse_conn(c, k);
	if (err == -EPROTO && !k->rejected) {
		warn("pid %d: dropping the CUPTI agent's connection: malformed message", k->peer);
		reject(c, k);
	}
	return err == -EPROTO ? 0 : err;
}

static struct chunk *take_chunks(struct cupti *c)
{
	struct chunk *ch;

	mtx_lock(&c->lock);
	ch = c->head;
	c->head = c->tail = NULL;
	c->queued = 0;
	mtx_unlock(&c->lock);
	return ch;
}

static int process(struct cupti *c)
{
	struct chunk *ch = take_chunks(c), *next;
	int err = 0;

	for (; ch; ch = next) {
		next = ch->next;
		if (!err)
			err = on_chunk(c, ch);
		free(ch);
	}
	if (c->expect_agent && now_ms(CLOCK_MONOTONIC) - c->inject_ms > CONNECT_WAIT_MS) {
		c->expect_agent = false;
		warn("no GPU activity: the CUPTI agent in pid %d did not connect (another network "
		     "namespace?)",
		     c->pid);
	}
	return err;
}

int cupti__poll(struct cupti *c)
{
	if (!c || !c->started || c->err)
		return c ? c->err : 0;
	if (c->cuda_seen && !c->inject_tried && !c->launched)
		inject_agent(c);
	c->err = process(c);
	return c->err;
}

static bool all_done(const struct cupti *c, int nconns)
{
	if (c->expect_agent)
		return false;
	for (int i = 0; i < nconns; i++) {
		const struct conn *k = &c->conns[i];

		if (!k->closed && !k->rejected)
			return false;
	}
	return true;
}

static int conns_seen(struct cupti *c)
{
	int n;

	/* nconns is the reader's; a stale value only means one more round */
	mtx_lock(&c->lock);
	n = c->nconns;
	mtx_unlock(&c->lock);
	return n;
}

/* cudajoin.c reads join flows only from traces whose cupti.api_joined is not 0. */
static int join_meta(struct cupti *c)
{
	uint64_t joined = 0, unjoined = 0;
	char buf[32];
	int err;

	for (int i = 0; i < MAX_CONNS; i++) {
		if (c->conns[i].dec) {
			joined += c->conns[i].dec->st.api_joined;
			unjoined += c->conns[i].dec->st.api_unjoined;
		}
	}
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)joined);
	err = trace_writer__meta(c->w, "cupti.api_joined", buf);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)unjoined);
	return err ?: trace_writer__meta(c->w, "cupti.api_unjoined", buf);
}

int cupti__stop(struct cupti *c, unsigned int timeout_ms)
{
	uint64_t deadline = now_ms(CLOCK_MONOTONIC) + timeout_ms;
	int err = 0;

	if (!c || !c->started)
		return 0;
	mtx_lock(&c->lock);
	c->hangup = true;
	mtx_unlock(&c->lock);
	wake_reader(c);
	while (!c->err) {
		c->err = process(c);
		if (all_done(c, conns_seen(c)) || now_ms(CLOCK_MONOTONIC) >= deadline)
			break;
		usleep(10000);
	}
	for (int i = 0; i < MAX_CONNS && !err; i++) {
		struct conn *k = &c->conns[i];

		if (k->active && !k->closed && !k->rejected)
			warn("pid %d: the CUPTI agent did not finish within %u ms: its last GPU "
			     "records are missing",
			     k->peer, timeout_ms);
		if (k->dec)
			err = cupti_decoder__losses(k->dec);
	}
	if (!err && c->join)
		err = join_meta(c);
	return c->err ?: err;
}

void cupti__summary(const struct cupti *c)
{
	struct cupti_decode_stats t = {};
	int procs = 0;

	for (int i = 0; c && i < MAX_CONNS; i++) {
		const struct cupti_decoder *d = c->conns[i].dec;

		if (!d || !c->conns[i].active)
			continue;
		procs++;
		t.kernels += d->st.kernels;
		t.memcpys += d->st.memcpys;
		t.memsets += d->st.memsets;
		t.syncs += d->st.syncs;
		t.api_calls += d->st.api_calls;
		t.api_joined += d->st.api_joined;
		t.cupti_dropped += d->st.cupti_dropped;
	}
	if (!procs || c->quiet)
		return;
	fprintf(stderr,
		"ptrace-gpu: GPU: %llu kernels, %llu copies, %llu memsets, %llu syncs, %llu CUDA "
		"calls (%llu joined to probed calls) from %d process%s; %llu records dropped by "
		"CUPTI\n",
		(unsigned long long)t.kernels, (unsigned long long)t.memcpys,
		(unsigned long long)t.memsets, (unsigned long long)t.syncs,
		(unsigned long long)t.api_calls, (unsigned long long)t.api_joined, procs,
		procs == 1 ? "" : "es", (unsigned long long)t.cupti_dropped);
}

void cupti__free(struct cupti *c)
{
	struct chunk *ch, *next;

	if (!c)
		return;
	if (c->reader_running) {
		mtx_lock(&c->lock);
		c->quit = true;
		mtx_unlock(&c->lock);
		wake_reader(c);
		thrd_join(c->reader, NULL);
	}
	for (ch = take_chunks(c); ch; ch = next) {
		next = ch->next;
		free(ch);
	}
	for (int i = 0; i < c->nconns; i++) {
		if (c->conns[i].fd >= 0)
			close(c->conns[i].fd);
		free(c->conns[i].in);
		cupti_decoder__free(c->conns[i].dec);
	}
	if (c->lfd >= 0)
		close(c->lfd);
	if (c->wake >= 0)
		close(c->wake);
	if (c->agent_fd >= 0)
		close(c->agent_fd);
	lib_copy__free(c->launch_copy);
	mtx_destroy(&c->lock);
	free(c);
}

#else /* !PTG_HAVE_CUPTI: the build found no CUPTI, so there is no agent to talk to */

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

void cupti__set_join(struct cupti *c, cupti_join_fn fn, void *ctx)
{
}

int cupti_decoder__losses(struct cupti_decoder *d)
{
	return 0;
}

void cupti_decoder__free(struct cupti_decoder *d)
{
}

/* Silent: a target without CUDA loses nothing; `ptrace-gpu --version` tells the build. */
int cupti__open(bool quiet, struct cupti **out)
{
	*out = NULL;
	return -EOPNOTSUPP;
}

int cupti__launch_env(struct cupti *c)
{
	return 0;
}

void cupti__set_target(struct cupti *c, pid_t pid, bool launched)
{
}

int cupti__start(struct cupti *c, struct trace_writer *w, pid_t pid, uint64_t start_time,
		 bool launched)
{
	return 0;
}

int cupti__on_lib(void *ctx, const struct proc_map *m, const char *attach_path, uint64_t bias)
{
	return 0;
}

int cupti__poll(struct cupti *c)
{
	return 0;
}

int cupti__stop(struct cupti *c, unsigned int timeout_ms)
{
	return 0;
}

void cupti__summary(const struct cupti *c)
{
}

void cupti__free(struct cupti *c)
{
}

#endif /* PTG_HAVE_CUPTI */
