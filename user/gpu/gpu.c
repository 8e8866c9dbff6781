// SPDX-License-Identifier: MIT
/*
 * The loader's side of the CUPTI agent: finding and trusting the agent,
 * bringing it into the target (CUDA_INJECTION64_PATH or injection), the
 * protocol of each connection (HELLO, STATUS, END) and its lifecycle up to
 * the summary. The injection into one process is cupti_inject.c, the
 * socket's reader thread cupti_reader.c, the decoding of what agents send
 * cupti_decode.c, the clock mapping cupti_clock.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/trusted.h"
#include "gpu/gpu.h"
#include "gpu/cupti_int.h"
#include "gpu/cupti_proto.h"
#include "inject/inject.h"
#include "proc/elf_file.h"
#include "proc/procfs.h"
#include "ptg_cupti_calls.h"
#include "ptg_cupti_proto.h"
#include "trace/trace_format.h"

#ifdef PTG_HAVE_CUPTI

#include <cupti_version.h> /* the CUPTI this build has: an agent must have the same */

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

	*named = env && env[0];
	return trusted_open_own("PTG_CUPTI_AGENT", "libptg_cupti.so", path, len, err, errlen);
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
	c->lfd = c->wake = c->agent_fd = c->rule.set_fd = -1;
	mtx_init(&c->lock, mtx_plain);
	c->agent_fd = find_agent(c->agent, sizeof(c->agent), &named, why, sizeof(why));
	if (c->agent_fd < 0 && named) {
		pr_err("refusing the CUPTI agent %s ($PTG_CUPTI_AGENT): %s", c->agent, why);
		err = -EPERM;
		goto cleanup;
	}
	if (c->agent_fd < 0) {
		/* not the command's error (-EPERM is kept for the agent the user named) */
		err = -ENOENT;
		cupti_warn("no usable CUPTI agent: %s: no GPU activity", why);
		goto cleanup;
	}
	/* -- CMD's socket comes with cupti__launch_env(); -p's agents get a socketpair each */
	c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	err = c->wake < 0 ? -errno : 0;
	if (!err && thrd_create(&c->reader, cupti_reader_main, c) != thrd_success)
		err = -EAGAIN;
	if (err) {
		cupti_warn("cannot start the CUPTI agents' reader: %s: no GPU activity",
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
		cupti_warn("CUDA_INJECTION64_PATH is set already (%s): leaving it, no GPU activity",
			   cur);
		return 0;
	}
	ret = cupti_listen_socket(c);
	if (ret) {
		cupti_warn("cannot open the socket for the CUPTI agent: %s: no GPU activity",
			   strerror(-ret));
		return 0;
	}
	ret = lib_copy__new(c->agent_fd, getpid(), "libptg_cupti.so", &c->launch_copy, err,
			    sizeof(err));
	if (ret) {
		cupti_warn("no GPU activity: cannot place the CUPTI agent for the command: %s",
			   err);
		return 0;
	}
	if (setenv("CUDA_INJECTION64_PATH", lib_copy__path(c->launch_copy), 1) ||
	    setenv(PTG_CUPTI_SOCKET_ENV, c->name, 1))
		return -errno;
	return 0;
}

/* Whether pid's environment names our copy, as the -- CMD child got it. */
static bool names_our_copy(const struct cupti *c, pid_t pid)
{
	char val[PATH_MAX];

	return !proc_environ_get(pid, "CUDA_INJECTION64_PATH", val, sizeof(val)) &&
	       !strcmp(val, lib_copy__path(c->launch_copy));
}

/* Whether pid's root is one the agent could not be put in; add: it is now. */
static bool root_refused(struct cupti *c, pid_t pid, bool add)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root", pid);
	if (stat(path, &st))
		return false;
	for (int i = 0; i < c->nroots_refused; i++) {
		if (c->roots_refused[i].dev == st.st_dev && c->roots_refused[i].ino == st.st_ino)
			return true;
	}
	if (add && c->nroots_refused < MAX_OTHER_ROOTS) {
		c->roots_refused[c->nroots_refused].dev = st.st_dev;
		c->roots_refused[c->nroots_refused++].ino = st.st_ino;
	}
	return false;
}

/*
 * A process of -- CMD stopped at its exec, before the new program's first
 * instruction: when its root is another (chroot DIR python3, a container
 * of unshare + chroot), CUDA_INJECTION64_PATH names nothing there, and its
 * cuInit would go on without the agent. So the same bytes are copied to
 * the same path in its root, once per root, with the care of the first
 * copy (lib_copy__new_as()), and removed at the end as that one is.
 */
void cupti__exec_stop(struct cupti *c, pid_t pid)
{
	struct lib_copy *lc;
	char err[PATH_MAX + 128];
	int ret, i;

	if (!c || !c->launch_copy || !names_our_copy(c, pid))
		return;
	for (i = -1; i < c->nother_roots; i++) {
		ret = lib_copy__seen_by(i < 0 ? c->launch_copy : c->other_roots[i], pid);
		if (ret == 1)
			return;
		/* ESRCH: it ended; another error, or another file there: said below */
		if (ret == -ESRCH)
			return;
	}
	if (c->nother_roots == MAX_OTHER_ROOTS) {
		if (!c->other_roots_full)
			cupti_warn(
			    "no GPU activity of pid %d: it runs in another root, and the CUPTI "
			    "agent was copied into %d other roots already (the most; said once)",
			    pid, MAX_OTHER_ROOTS);
		c->other_roots_full = true;
		return;
	}
	if (root_refused(c, pid, false))
		return;
	ret = lib_copy__new_as(c->agent_fd, c->launch_copy, pid, &lc, err, sizeof(err));
	if (ret) {
		root_refused(c, pid, true);
		cupti_warn(
		    "no GPU activity of pid %d: it runs in another root, where %s cannot be put: "
		    "%s (said once for that root)",
		    pid, lib_copy__path(c->launch_copy), err);
		return;
	}
	c->other_roots[c->nother_roots++] = lc;
	if (!c->quiet)
		pr_info("pid %d runs in another root: the CUPTI agent is copied to %s there", pid,
			lib_copy__path(lc));
}

void cupti__set_join(struct cupti *c, cupti_join_fn fn, void *ctx)
{
	if (!c)
		return;
	c->join = fn;
	c->join_ctx = ctx;
}

void cupti__set_calls(struct cupti *c, cupti_calls_fn fn, void *ctx)
{
	if (!c)
		return;
	c->calls = fn;
	c->calls_ctx = ctx;
}

void cupti__set_target(struct cupti *c, pid_t pid, bool launched)
{
	struct peer_rule r = {.set = true, .pid = pid, .launched = launched, .set_fd = -1};
	int err;

	if (!c || c->rule.set)
		return;
	err = proc_euid(pid, &r.uid);
	if (err) {
		/* no uid is (uid_t)-1: every agent is then refused */
		r.uid = (uid_t)-1;
		cupti_warn("no GPU activity: cannot read the uid of pid %d: %s", pid,
			   strerror(-err));
	}
	mtx_lock(&c->lock);
	c->rule = r;
	mtx_unlock(&c->lock);
	cupti_wake_reader(c);
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
	if (!cupti_nvidia_driver(attach_path)) {
		c->inject_tried = true;
		if (!c->quiet)
			pr_info("%s is not NVIDIA's driver: no CUPTI agent", m->path);
	}
	return 0;
}

static void inject_agent(struct cupti *c)
{
	c->inject_tried = true;
	if (cupti_inject(c, c->pid, c->start_time))
		return;
	c->expect_agent = true;
	c->inject_ms = now_ms(CLOCK_MONOTONIC);
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
			pr_info("recording GPU activity of pid %d (CUPTI)", k->peer);
	} else if (st.state == PTG_CUPTI_BUSY) {
		cupti_warn("pid %d: %s: another CUPTI client (torch.profiler/Kineto, Nsight) holds "
			   "CUPTI; recording host-side data only",
			   k->peer, text);
	} else {
		cupti_warn("pid %d: CUPTI failed: %s; recording host-side data only", k->peer,
			   text);
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
		cupti_warn(
		    "pid %d: the CUPTI agent is of another build (protocol %u, CUPTI %u; this "
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

static void drop_fd(struct conn *k)
{
	if (k->has_fd)
		close(k->fd_passed);
	k->has_fd = false;
}

/*
 * No CUDA calls are recorded (--no-cuda): the ring's header says so, and the
 * agent turns its callbacks off at its next flush.
 */
static void say_unread(int fd)
{
	struct ptg_cupti_call_ring *r;
	struct stat st;

	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(*r))
		return;
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return;
	__atomic_store_n(&r->unread, 1, __ATOMIC_RELEASE);
	munmap(r, sizeof(*r));
}

/*
 * The agent takes the CUDA calls from CUPTI's callbacks: its ring, for the
 * CUDA probes to read in their place. Without them (--no-cuda) it is told to
 * stop taking them.
 */
static int on_call_ring(struct cupti *c, struct conn *k, const uint8_t *data, size_t len)
{
	struct ptg_cupti_call_ring_msg m;
	int err;

	if (len != sizeof(m) || !k->has_fd)
		return -EPROTO;
	memcpy(&m, data, sizeof(m));
	if (!c->calls)
		say_unread(k->fd_passed);
	err = c->calls ? c->calls(c->calls_ctx, k->peer, k->fd_passed, m.size) : 0;
	drop_fd(k);
	if (err == -EPROTO)
		return err;
	if (err)
		cupti_warn(
		    "pid %d: cannot read the CUPTI agent's CUDA calls: %s: its calls stay with "
		    "the probes",
		    k->peer, strerror(-err));
	return 0;
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
	case PTG_CUPTI_MSG_CALL_RING:
		return on_call_ring(c, k, data, len);
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
	drop_fd(k);
	free(k->in);
	k->in = NULL;
	k->inlen = k->incap = 0;
	mtx_lock(&c->lock);
	k->drop = true;
	mtx_unlock(&c->lock);
	cupti_wake_reader(c);
}

static void warn_foreign(struct cupti *c, pid_t pid, uid_t uid)
{
	if (++c->nforeign <= MAX_FOREIGN_WARNINGS)
		cupti_warn("pid %d (uid %u) connected to the CUPTI agents' socket and is not the "
			   "target: closed, ignored",
			   pid, (unsigned int)uid);
	if (c->nforeign == MAX_FOREIGN_WARNINGS)
		cupti_warn("more connections that are not the target's are closed without a word");
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
		if (!k->peer_checked && !cupti_peer_ok(&c->rule, k->peer, k->uid)) {
			warn_foreign(c, k->peer, k->uid);
			reject(c, k);
		} else if (k->peer == c->pid) {
			c->expect_agent = false;
		} else {
			cupti_set_connected(c, k->peer);
		}
		return 0;
	case CH_EOF:
		k->closed = true;
		if (k->active && !k->ended && !k->rejected)
			cupti_warn(
			    "pid %d: the CUPTI agent hung up before its last flush (the process "
			    "was killed?): its last GPU records are missing",
			    k->peer);
		return 0;
	}
	if (k->rejected)
		return 0;
	/* for the message its bytes begin: the next one that wants it takes it */
	if (ch->fd >= 0) {
		drop_fd(k);
		k->fd_passed = ch->fd;
		k->has_fd = true;
		ch->fd = -1;
	}
	err = append(k, ch->data, ch->len);
	if (!err)
		err = parse_conn(c, k);
	if (err == -EPROTO && !k->rejected) {
		cupti_warn("pid %d: dropping the CUPTI agent's connection: malformed message",
			   k->peer);
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
		if (ch->fd >= 0)
			close(ch->fd);
		free(ch);
	}
	if (c->expect_agent && now_ms(CLOCK_MONOTONIC) - c->inject_ms > CONNECT_WAIT_MS) {
		c->expect_agent = false;
		cupti_warn_no_connect(c->pid);
	}
	cupti_set_timeouts(c);
	return err;
}

int cupti__poll(struct cupti *c)
{
	if (!c || !c->started || c->err)
		return c ? c->err : 0;
	if (c->cuda_seen && !c->inject_tried && !c->launched && !c->is_set)
		inject_agent(c);
	if (c->is_set && !c->launched)
		cupti_set_inject(c);
	c->err = process(c);
	return c->err;
}

static bool all_done(const struct cupti *c, int nconns)
{
	if (c->expect_agent || cupti_set_waiting(c))
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
			joined += cupti_decoder__stats(c->conns[i].dec)->api_joined;
			unjoined += cupti_decoder__stats(c->conns[i].dec)->api_unjoined;
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
	cupti_wake_reader(c);
	while (!c->err) {
		c->err = process(c);
		if (all_done(c, conns_seen(c)) || now_ms(CLOCK_MONOTONIC) >= deadline)
			break;
		usleep(10000);
	}
	for (int i = 0; i < MAX_CONNS && !err; i++) {
		struct conn *k = &c->conns[i];

		if (k->active && !k->closed && !k->rejected)
			cupti_warn(
			    "pid %d: the CUPTI agent did not finish within %u ms: its last GPU "
			    "records are missing",
			    k->peer, timeout_ms);
		if (k->dec)
			err = cupti_decoder__losses(k->dec);
	}
	if (!err && c->join)
		err = join_meta(c);
	if (!err && c->is_set)
		err = cupti_pids_meta(c);
	return c->err ?: err;
}

void cupti__summary(const struct cupti *c)
{
	struct cupti_decode_stats t = {};
	int procs;

	if (!c || c->quiet)
		return;
	procs = cupti_sum_stats(c, 0, &t);
	if (!procs)
		return;
	pr_info("GPU: %llu kernels, %llu copies, %llu memsets, %llu syncs, %llu CUDA "
		"calls (%llu joined to probed calls) from %d process%s; %llu records dropped by "
		"CUPTI",
		(unsigned long long)t.kernels, (unsigned long long)t.memcpys,
		(unsigned long long)t.memsets, (unsigned long long)t.syncs,
		(unsigned long long)t.api_calls, (unsigned long long)t.api_joined, procs,
		procs == 1 ? "" : "es", (unsigned long long)t.cupti_dropped);
	if (procs > 1)
		cupti_summary_procs(c);
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
		cupti_wake_reader(c);
		thrd_join(c->reader, NULL);
	}
	for (ch = take_chunks(c); ch; ch = next) {
		next = ch->next;
		if (ch->fd >= 0)
			close(ch->fd);
		free(ch);
	}
	for (int i = 0; i < c->nconns; i++) {
		drop_fd(&c->conns[i]);
		if (c->conns[i].fd >= 0)
			close(c->conns[i].fd);
		free(c->conns[i].in);
		cupti_decoder__free(c->conns[i].dec);
	}
	if (c->lfd >= 0)
		close(c->lfd);
	if (c->wake >= 0)
		close(c->wake);
	/* the reader is joined: nobody looks the set up any more */
	if (c->rule.set_fd >= 0)
		close(c->rule.set_fd);
	cupti_set_free(c);
	if (c->agent_fd >= 0)
		close(c->agent_fd);
	lib_copy__free(c->launch_copy);
	for (int i = 0; i < c->nother_roots; i++)
		lib_copy__free(c->other_roots[i]);
	mtx_destroy(&c->lock);
	free(c);
}

#else /* !PTG_HAVE_CUPTI: the build found no CUPTI, so there is no agent to talk to */

void cupti__set_join(struct cupti *c, cupti_join_fn fn, void *ctx)
{
}

void cupti__set_calls(struct cupti *c, cupti_calls_fn fn, void *ctx)
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

void cupti__exec_stop(struct cupti *c, pid_t pid)
{
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

int cupti__start_set(struct cupti *c, struct trace_writer *w, int set_fd, bool launched)
{
	return 0;
}

int cupti__on_proc_map(void *ctx, pid_t pid, const struct proc_map *m)
{
	return 0;
}

bool cupti__has_pid(void *ctx, pid_t pid)
{
	return false;
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
