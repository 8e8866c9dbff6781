// SPDX-License-Identifier: MIT
/*
 * libptg_cupti.so: the CUPTI agent, the only code of ptrace-gpu that runs in
 * the target (DESIGN.md, principle 5). It turns on CUPTI activity records of
 * kernels, copies, memsets, synchronizations and runtime/driver calls, and
 * streams CUPTI's completed buffers, as they are, to the loader over a unix
 * socket (agent/ptg_cupti_proto.h). Rules it keeps:
 *  - the application never waits for the loader: buffers are sent by the
 *    agent's own thread; a lagging loader makes CUPTI drop (and count)
 *    records instead of blocking anyone;
 *  - another CUPTI client (Kineto, Nsight) wins: the agent says so and goes
 *    quiet;
 *  - when the loader hangs up, dies or asks to stop, the agent flushes,
 *    turns CUPTI off, and stays loaded but idle (ready for a new session);
 *  - signals go to the application's threads, never to the agent's.
 * It also takes the application's CUDA calls from CUPTI's callbacks
 * (ptg_cupti_calls.h) into a ring in shared memory, so that the loader can
 * take the uprobes off libcuda and libcudart: ptg_cupti_agent_calls.c.
 * Entry points: InitializeInjection() (CUDA_INJECTION64_PATH, `record --
 * CMD`) and ptg_cupti_attach() (called through ptrace after dlopen, `record
 * -p`).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ptg_agent_fd.h"
#include "ptg_cupti_agent_calls.h"
#include "ptg_cupti_proto.h"
#include "ptg_cupti_records.h"

#define PTG_EXPORT __attribute__((visibility("default")))

#define BUF_SIZE	(2u << 20) /* one CUPTI activity buffer */
#define MAX_BUFFERS	32	   /* at most 64 MiB of buffers alive in the target */
#define FLUSH_MS	250	   /* hand completed records (and a clock pair) over this often */
#define SEND_TIMEOUT_MS 2000
#define EXIT_WAIT_MS	3000 /* longest the application's exit waits for the last flush */
#define MAX_NAME	65536
#define API_BITS	8192 /* callback ids per domain remembered as named */

enum session_state { S_IDLE, S_STARTING, S_ACTIVE };

static const CUpti_ActivityKind kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,	CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

struct agent {
	/* lock guards state .. stop; CUPTI's callbacks take it only briefly */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	enum session_state state;
	bool collect; /* completed buffers are queued (else freed) */
	bool stop;    /* the application is exiting: end the session now */
	uint8_t *queue[MAX_BUFFERS];
	size_t qlen[MAX_BUFFERS];
	unsigned int qhead, qcount;
	unsigned int nbuffers; /* given to CUPTI or queued, not yet freed */
	int wake;	       /* eventfd: a buffer was queued, or stop */

	/* the rest belongs to the session's thread */
	int sock;
	char sock_name[108];
	CUpti_SubscriberHandle sub;
	bool subscribed;
	bool tid_type_set;
	CUpti_ActivityThreadIdType old_tid_type;
	bool enabled[NKINDS];
	uint64_t *names; /* kernel name pointers already sent: open addressing, 0 = free */
	size_t names_cap, names_len;
	uint8_t api_named[2][API_BITS / 8];
	uint64_t unknown;
};

static struct agent ag = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
    .wake = -1,
    .sock = -1,
};
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void wake_session(void)
{
	uint64_t one = 1;

	if (ag.wake >= 0 && write(ag.wake, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the session will wake anyway */
	}
}

static void hang_up(void)
{
	if (ag.sock >= 0)
		close(ag.sock);
	ag.sock = -1;
}

static int send_all(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t n;

	while (len && ag.sock >= 0) {
		/* MSG_NOSIGNAL: a dead loader must not SIGPIPE the application */
		n = send(ag.sock, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* a loader gone or stuck past SO_SNDTIMEO: the stream is broken */
			hang_up();
			return -EPIPE;
		}
		p += n;
		len -= (size_t)n;
	}
	return ag.sock >= 0 ? 0 : -EPIPE;
}

/* A message whose first byte carries fd (SCM_RIGHTS): the loader takes it with the message. */
static int send_fd_msg(uint32_t type, const void *a, size_t alen, int fd)
{
	struct ptg_cupti_msg_hdr h = {.type = type, .len = (uint32_t)alen};
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u = {};
	struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	ssize_t n;

	if (ag.sock < 0)
		return -EPIPE;
	u.c.cmsg_level = SOL_SOCKET;
	u.c.cmsg_type = SCM_RIGHTS;
	u.c.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&u.c), &fd, sizeof(int));
	do {
		n = sendmsg(ag.sock, &m, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		hang_up();
		return -EPIPE;
	}
	if ((size_t)n < sizeof(h) && send_all((uint8_t *)&h + n, sizeof(h) - (size_t)n))
		return -EPIPE;
	return alen ? send_all(a, alen) : 0;
}

static int send_msg(uint32_t type, const void *a, size_t alen, const void *b, size_t blen)
{
	struct ptg_cupti_msg_hdr h = {.type = type, .len = (uint32_t)(alen + blen)};
	int err;

	err = send_all(&h, sizeof(h));
	if (!err && alen)
		err = send_all(a, alen);
	if (!err && blen)
		err = send_all(b, blen);
	return err;
}

static void send_status(enum ptg_cupti_state state, CUptiResult r, const char *what)
{
	struct ptg_cupti_status st = {.state = state, .cupti_result = (int32_t)r};
	const char *rs = NULL;
	char msg[512];

	if (r != CUPTI_SUCCESS && cuptiGetResultString(r, &rs) != CUPTI_SUCCESS)
		rs = NULL;
	if (r != CUPTI_SUCCESS)
		snprintf(msg, sizeof(msg), "%s: %s", what, rs ? rs : "unknown CUPTI error");
	else
		snprintf(msg, sizeof(msg), "%s", what);
	send_msg(PTG_CUPTI_MSG_STATUS, &st, sizeof(st), msg, strlen(msg));
}

/* The two clocks read as close together as possible: the best of three tries. */
static void send_clock(void)
{
	struct ptg_cupti_clock c = {}, try;
	uint64_t best = UINT64_MAX, t0, t1;

	for (int i = 0; i < 3; i++) {
		t0 = mono_ns();
		if (cuptiGetTimestamp(&try.cupti_ns) != CUPTI_SUCCESS)
			return;
		t1 = mono_ns();
		if (t1 - t0 < best) {
			best = t1 - t0;
			c.cupti_ns = try.cupti_ns;
			c.mono_ns = t0 + (t1 - t0) / 2;
		}
	}
	send_msg(PTG_CUPTI_MSG_CLOCK, &c, sizeof(c), NULL, 0);
}

static void send_dropped(bool always)
{
	struct ptg_cupti_dropped d = {.unknown = ag.unknown};
	size_t n = 0;

	if (cuptiActivityGetNumDroppedRecords(NULL, 0, &n) == CUPTI_SUCCESS)
		d.cupti = n;
	if (!always && !d.cupti && !d.unknown)
		return;
	ag.unknown = 0;
	send_msg(PTG_CUPTI_MSG_DROPPED, &d, sizeof(d), NULL, 0);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	void *p = NULL;
	bool ok;

	pthread_mutex_lock(&ag.lock);
	ok = ag.nbuffers < MAX_BUFFERS;
	ag.nbuffers += ok;
	pthread_mutex_unlock(&ag.lock);
	/* without a buffer CUPTI drops records and counts them: the application goes on */
	if (ok && posix_memalign(&p, ACTIVITY_RECORD_ALIGNMENT, BUF_SIZE)) {
		p = NULL;
		pthread_mutex_lock(&ag.lock);
		ag.nbuffers--;
		pthread_mutex_unlock(&ag.lock);
	}
	*buffer = p;
	*size = p ? BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	bool queued = false;

	if (!buffer)
		return;
	pthread_mutex_lock(&ag.lock);
	/* nbuffers <= MAX_BUFFERS, so the queue always has room */
	if (ag.collect && valid && ag.qcount < MAX_BUFFERS) {
		unsigned int i = (ag.qhead + ag.qcount++) % MAX_BUFFERS;

		ag.queue[i] = buffer;
		ag.qlen[i] = valid;
		queued = true;
	} else {
		ag.nbuffers--;
	}
	pthread_mutex_unlock(&ag.lock);
	if (queued)
		wake_session();
	else
		free(buffer);
}

static bool names_grow(void)
{
	size_t cap = ag.names_cap ? ag.names_cap * 2 : 1024;
	uint64_t *old = ag.names, *n = calloc(cap, sizeof(*n));

	if (!n)
		return false;
	ag.names = n;
	ag.names_cap = cap;
	for (size_t i = 0; old && i < cap / 2; i++) {
		size_t j = (old[i] >> 3) & (cap - 1);

		if (!old[i])
			continue;
		while (n[j])
			j = (j + 1) & (cap - 1);
		n[j] = old[i];
	}
	free(old);
	return true;
}

/* True if ptr was not in the set (and now is). */
static bool names_add(uint64_t ptr)
{
	size_t j;

	if (ag.names_len * 2 >= ag.names_cap && !names_grow())
		return true; /* out of memory: send the name again, harmless */
	j = (ptr >> 3) & (ag.names_cap - 1);
	while (ag.names[j]) {
		if (ag.names[j] == ptr)
			return false;
		j = (j + 1) & (ag.names_cap - 1);
	}
	ag.names[j] = ptr;
	ag.names_len++;
	return true;
}

/* CUPTI keeps a kernel's name for the life of its module: one message per pointer. */
static int name_kernel(const char *name)
{
	struct ptg_cupti_kernel_name m = {.ptr = (uint64_t)(uintptr_t)name};

	if (!name || !names_add(m.ptr))
		return 0;
	return send_msg(PTG_CUPTI_MSG_KERNEL_NAME, &m, sizeof(m), name, strnlen(name, MAX_NAME));
}

static int name_api(CUpti_ActivityKind kind, uint32_t cbid)
{
	struct ptg_cupti_api_name m = {.cbid = cbid};
	int d = kind == CUPTI_ACTIVITY_KIND_RUNTIME;
	const char *name = NULL;

	m.domain = d ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
	if (cbid < API_BITS) {
		if (ag.api_named[d][cbid / 8] & (1u << (cbid % 8)))
			return 0;
		ag.api_named[d][cbid / 8] |= 1u << (cbid % 8);
	}
	if (cuptiGetCallbackName(m.domain, cbid, &name) != CUPTI_SUCCESS || !name)
		return 0;
	return send_msg(PTG_CUPTI_MSG_API_NAME, &m, sizeof(m), name, strnlen(name, MAX_NAME));
}

/*
 * One record of size bytes (CUPTI's own step to the next record). A known
 * kind whose size differs from this build's struct means another CUPTI
 * release: nothing it sends could be decoded right, so the session ends.
 */
static int check_record(const CUpti_Activity *rec, size_t size, bool last)
{
	size_t want = ptg_cupti_record_size(rec->kind);
	char msg[256];
	uint32_t v = 0;

	if (!want) {
		ag.unknown++;
		return 1;
	}
	if (size == want || (last && size > want))
		return 0;
	cuptiGetVersion(&v);
	snprintf(msg, sizeof(msg),
		 "CUPTI %u writes %zu-byte records of kind %d, the agent was built with "
		 "CUPTI %u where they have %zu bytes",
		 v, size, (int)rec->kind, (unsigned int)CUPTI_API_VERSION, want);
	send_status(PTG_CUPTI_FAILED, CUPTI_SUCCESS, msg);
	return -EPROTO;
}

static int name_record(const CUpti_Activity *rec)
{
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return name_kernel(((const ptg_cupti_kernel *)rec)->name);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return name_api(rec->kind, ((const ptg_cupti_api *)rec)->cbid);
	default:
		return 0;
	}
}

/* Handles the record at off; moves it down to *out if records before it were left out. */
static int keep_record(uint8_t *buf, size_t off, size_t size, bool last, size_t *out)
{
	const CUpti_Activity *rec = (const CUpti_Activity *)(buf + off);
	int ret = check_record(rec, size, last);

	if (ret)
		return ret < 0 ? ret : 0;
	size = ptg_cupti_record_size(rec->kind);
	ret = name_record(rec);
	if (ret)
		return ret;
	if (*out != off)
		memmove(buf + *out, buf + off, size);
	*out += size;
	return 0;
}

/*
 * Walks the buffer with CUPTI's iterator (which knows the runtime record
 * sizes), sends the names its records need, then the records this build
 * decodes, unchanged.
 */
static int send_buffer(uint8_t *buf, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t prev = SIZE_MAX, out = 0, off;
	int err = 0;

	while (!err && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		off = (size_t)((uint8_t *)rec - buf);
		if (prev != SIZE_MAX)
			err = keep_record(buf, prev, off - prev, false, &out);
		prev = off;
	}
	if (!err && prev != SIZE_MAX)
		err = keep_record(buf, prev, valid - prev, true, &out);
	if (!err && out)
		err = send_msg(PTG_CUPTI_MSG_BUFFER, buf, out, NULL, 0);
	return err;
}

/* Sends every queued buffer; after a failure the rest is freed unsent. */
static int drain(void)
{
	uint8_t *buf;
	size_t len;
	int err = 0;

	for (;;) {
		pthread_mutex_lock(&ag.lock);
		if (!ag.qcount) {
			pthread_mutex_unlock(&ag.lock);
			return err;
		}
		buf = ag.queue[ag.qhead];
		len = ag.qlen[ag.qhead];
		ag.qhead = (ag.qhead + 1) % MAX_BUFFERS;
		ag.qcount--;
		pthread_mutex_unlock(&ag.lock);
		if (!err)
			err = send_buffer(buf, len);
		free(buf);
		pthread_mutex_lock(&ag.lock);
		ag.nbuffers--;
		pthread_mutex_unlock(&ag.lock);
	}
}

static int connect_loader(void)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct timeval tv = {SEND_TIMEOUT_MS / 1000, (SEND_TIMEOUT_MS % 1000) * 1000};
	size_t n = strlen(ag.sock_name);
	int fd, sndbuf = 4 << 20;

	/* injected, the socketpair is there already (ptg_agent_fd.h) */
	if (ag.sock < 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		/* an abstract name: no file to clean up if either side dies */
		memcpy(a.sun_path + 1, ag.sock_name, n);
		if (connect(fd, (struct sockaddr *)&a,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))) {
			close(fd);
			return -errno;
		}
		ag.sock = fd;
	}
	setsockopt(ag.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(ag.sock, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	return 0;
}

static int send_hello(void)
{
	struct ptg_cupti_hello h = {
	    .proto_version = PTG_CUPTI_PROTO_VERSION,
	    .pid = (uint32_t)getpid(),
	    .cupti_build_version = CUPTI_API_VERSION,
	};

	cuptiGetVersion(&h.cupti_version);
	return send_msg(PTG_CUPTI_MSG_HELLO, &h, sizeof(h), NULL, 0);
}

/*
 * The CUDA calls from CUPTI's callbacks, if all of them can be had: the
 * ring goes to the loader, which then takes its uprobes off. Otherwise
 * nothing is said, and the uprobes stay.
 */
static void send_calls(void)
{
	struct ptg_cupti_call_ring_msg m = {};
	int fd;

	fd = calls_start(ag.sub, &m);
	if (fd >= 0 && send_fd_msg(PTG_CUPTI_MSG_CALL_RING, &m, sizeof(m), fd))
		calls_stop(ag.sub);
}

static void set_collect(bool on)
{
	pthread_mutex_lock(&ag.lock);
	ag.collect = on;
	pthread_mutex_unlock(&ag.lock);
}

/* Turns off everything the session turned on, in reverse order. */
static void cupti_release(bool flush)
{
	if (ag.subscribed)
		calls_stop(ag.sub);
	for (size_t i = 0; i < NKINDS; i++) {
		if (ag.enabled[i])
			cuptiActivityDisable(kinds[i]);
		ag.enabled[i] = false;
	}
	if (flush)
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (ag.tid_type_set)
		cuptiSetThreadIdType(ag.old_tid_type);
	ag.tid_type_set = false;
	if (ag.subscribed)
		cuptiUnsubscribe(ag.sub);
	ag.subscribed = false;
	set_collect(false);
}

/* Another CUPTI client is there: not ours to fight. */
static bool busy_result(CUptiResult r)
{
	return r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
	       r == CUPTI_ERROR_NOT_COMPATIBLE || r == CUPTI_ERROR_MAX_LIMIT_REACHED;
}

static int fail(CUptiResult r, const char *what)
{
	send_status(busy_result(r) ? PTG_CUPTI_BUSY : PTG_CUPTI_FAILED, r, what);
	cupti_release(false);
	hang_up();
	return -EBUSY;
}

static int enable_kinds(void)
{
	char what[64];
	CUptiResult r;

	for (size_t i = 0; i < NKINDS; i++) {
		r = cuptiActivityEnable(kinds[i]);
		if (r != CUPTI_SUCCESS) {
			snprintf(what, sizeof(what), "cuptiActivityEnable(kind %d)", (int)kinds[i]);
			return fail(r, what);
		}
		ag.enabled[i] = true;
	}
	return 0;
}

/* Connects to the loader and turns CUPTI on. Returns 0 or -errno (then quiet, unconnected). */
static int session_setup(void)
{
	CUptiResult r;
	int err;

	err = connect_loader();
	if (!err)
		err = send_hello();
	if (err) {
		hang_up();
		return err;
	}
	r = cuptiSubscribe(&ag.sub, calls_callback, NULL);
	if (r != CUPTI_SUCCESS)
		return fail(r, "cuptiSubscribe");
	ag.subscribed = true;
	/* thread ids as the kernel numbers them, like the loader's own records */
	if (cuptiGetThreadIdType(&ag.old_tid_type) == CUPTI_SUCCESS)
		ag.tid_type_set =
		    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS;
	r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS)
		return fail(r, "cuptiActivityRegisterCallbacks");
	set_collect(true);
	send_clock();
	err = enable_kinds();
	if (err)
		return err;
	send_calls();
	send_status(PTG_CUPTI_ACTIVE, CUPTI_SUCCESS, "recording GPU activity");
	return ag.sock >= 0 ? 0 : -EPIPE;
}

static bool stop_requested(void)
{
	bool stop;

	pthread_mutex_lock(&ag.lock);
	stop = ag.stop;
	pthread_mutex_unlock(&ag.lock);
	return stop;
}

/* Whether the loader is still there; it never sends data, only hangs up. */
static bool loader_alive(void)
{
	char c[64];
	ssize_t n = recv(ag.sock, c, sizeof(c), MSG_DONTWAIT);

	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

static void session_loop(void)
{
	uint64_t next = mono_ns() + FLUSH_MS * 1000000ull, now, v;
	struct pollfd p[2];

	while (ag.sock >= 0 && !stop_requested()) {
		p[0] = (struct pollfd){.fd = ag.sock, .events = POLLIN};
		p[1] = (struct pollfd){.fd = ag.wake, .events = POLLIN};
		now = mono_ns();
		poll(p, 2, now < next ? (int)((next - now) / 1000000 + 1) : 0);
		if (p[0].revents && !loader_alive())
			break;
		if ((p[1].revents & POLLIN) && read(ag.wake, &v, sizeof(v)) < 0) {
			/* EAGAIN: someone else read the counter */
		}
		if (mono_ns() >= next) {
			if (calls_unread())
				calls_stop(ag.sub);
			cuptiActivityFlushAll(0);
			send_clock();
			send_dropped(false);
			next = mono_ns() + FLUSH_MS * 1000000ull;
		}
		if (drain())
			break;
	}
}

static void session_idle(void)
{
	free(ag.names);
	ag.names = NULL;
	ag.names_cap = ag.names_len = 0;
	memset(ag.api_named, 0, sizeof(ag.api_named));
	pthread_mutex_lock(&ag.lock);
	ag.state = S_IDLE;
	ag.stop = false;
	pthread_cond_broadcast(&ag.idle);
	pthread_mutex_unlock(&ag.lock);
}

static void session_teardown(void)
{
	cupti_release(true);
	drain();
	send_clock();
	send_dropped(true);
	send_msg(PTG_CUPTI_MSG_END, NULL, 0, NULL, 0);
	hang_up();
	session_idle();
}

static void *session_main(void *setup)
{
	if (setup && session_setup()) {
		session_idle();
		return NULL;
	}
	pthread_mutex_lock(&ag.lock);
	ag.state = S_ACTIVE;
	pthread_mutex_unlock(&ag.lock);
	session_loop();
	session_teardown();
	return NULL;
}

/* The application exits: hand over what CUPTI still holds, but never wait long. */
static void agent_atexit(void)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += EXIT_WAIT_MS / 1000;
	pthread_mutex_lock(&ag.lock);
	if (ag.state != S_IDLE) {
		ag.stop = true;
		wake_session();
		while (ag.state != S_IDLE &&
		       pthread_cond_timedwait(&ag.idle, &ag.lock, &deadline) != ETIMEDOUT) {
		}
	}
	pthread_mutex_unlock(&ag.lock);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&ag.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&ag.lock);
}

/*
 * A forked child (a DataLoader worker) has no session thread and must never
 * write into the parent's stream: it starts idle, with its own descriptors.
 */
static void fork_child(void)
{
	if (ag.sock >= 0)
		close(ag.sock);
	if (ag.wake >= 0)
		close(ag.wake);
	ag.sock = ag.wake = -1;
	ag.state = S_IDLE;
	ag.collect = ag.stop = false;
	ag.qcount = ag.qhead = ag.nbuffers = 0;
	ag.subscribed = ag.tid_type_set = false;
	memset(ag.enabled, 0, sizeof(ag.enabled));
	calls_fork_child();
	pthread_mutex_unlock(&ag.lock);
}

static void agent_init(void)
{
	atexit(agent_atexit);
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int spawn_session(bool setup)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* the new thread inherits a mask that blocks every signal */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, &attr, session_main, setup ? (void *)1 : NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (!err)
		pthread_setname_np(t, "ptg-cupti");
	return -err;
}

/*
 * sync: set CUPTI up on the calling thread before returning (inside cuInit,
 * so that no early kernel is missed); otherwise everything happens on the
 * agent's thread, because the caller is a thread stopped at an arbitrary
 * point that may hold CUDA's locks.
 */
static int agent_start(const char *name, bool sync)
{
	int err;

	if (!name || !name[0] || strlen(name) >= sizeof(ag.sock_name) - 1)
		return -EINVAL;
	pthread_once(&init_once, agent_init);
	pthread_mutex_lock(&ag.lock);
	if (ag.state != S_IDLE) {
		pthread_mutex_unlock(&ag.lock);
		return 1;
	}
	if (ag.wake < 0)
		ag.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	err = ag.wake < 0 ? -errno : 0;
	/* injected (not sync): "fd:N", a socketpair's end; else a name to connect to */
	if (!err && !sync) {
		ag.sock = ptg_agent_take_fd(name);
		err = ag.sock < 0 ? ag.sock : 0;
		ag.sock = err ? -1 : ag.sock;
	}
	if (!err)
		ag.state = S_STARTING;
	pthread_mutex_unlock(&ag.lock);
	if (err)
		return err;
	strcpy(ag.sock_name, name);
	if (sync) {
		err = session_setup();
		if (err) {
			session_idle();
			return err;
		}
	}
	err = spawn_session(!sync);
	if (err && sync) {
		session_teardown();
	} else if (err) {
		hang_up();
		session_idle();
	}
	return err;
}

/*
 * record -p: called through ptrace right after dlopen, with "fd:N"
 * (ptg_agent_fd.h). 0 started, 1 already running, < 0 -errno.
 */
PTG_EXPORT int ptg_cupti_attach(const char *loader)
{
	if (!loader || strncmp(loader, "fd:", 3))
		return -EINVAL;
	return agent_start(loader, false);
}

/* record -- CMD: CUDA calls this from cuInit when CUDA_INJECTION64_PATH names this library. */
PTG_EXPORT int InitializeInjection(void)
{
	const char *name = getenv(PTG_CUPTI_SOCKET_ENV);

	if (name && name[0])
		agent_start(name, true);
	/* a failure to trace must never fail the application's CUDA */
	return 1;
}
