// SPDX-License-Identifier: MIT
/* record --in-process: the agents injected, their sessions (pymon.h); records: pymon_records.c */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/trusted.h"
#include "base/u64map.h"
#include "inject/inject.h"
#include "proc/procfs.h"
#include "ptg_pymon_proto.h"
#include "pyinterp/pycode.h"
#include "python/pymon.h"
#include "python/pymon_int.h"
#include "python/pystack.h"
#include "torch/torchops.h"

#define AGENT_NAME "libptg_pymon.so"
#define WAIT_MS	   10000 /* for the agent to get the GIL */

int pymon__check(const struct py_interp *py, char *err, size_t errlen)
{
	char path[PATH_MAX], why[PATH_MAX + 128];
	struct proc_ns_ids ids;
	int fd;

	if (!py->info) {
		snprintf(err, errlen, "pid %d runs no Python", py->pid);
		return -ENOEXEC;
	}
	/* the agent's thread ids are its namespace's: ours only when the same */
	if (!proc_ns_ids(py->pid, py->pid, &ids) && ids.levels > 1) {
		snprintf(err, errlen, "pid %d is in another pid namespace (a container)", py->pid);
		return -EOPNOTSUPP;
	}
	fd = trusted_open_own("PTG_PYMON_AGENT", AGENT_NAME, path, sizeof(path), why, sizeof(why));
	if (fd < 0) {
		snprintf(err, errlen, "refusing the agent %s: %s", path, why);
		return -EPERM;
	}
	close(fd);
	return 0;
}

/* Whose message: --in-process's, or the default's ops (a failure there is a fallback). */
static const char *who(const struct pymon *pm)
{
	return pm->ops_only ? "record: ops by RecordFunction" : "record --in-process";
}

/* $PTG_PYMON_AGENT, else libptg_pymon.so next to this executable (trusted_open_own()). */
static int find_agent(struct pymon *pm, char *err, size_t errlen)
{
	return trusted_open_own("PTG_PYMON_AGENT", AGENT_NAME, pm->agent, sizeof(pm->agent), err,
				errlen);
}

/*
 * The ring's size when --ringbuf-mb is not given: a call-dense target
 * recorded --in-process makes about 10 M records/s, twice what the loader
 * takes on a 2-CPU machine, so 32 MiB (1 M records, 100 ms of it) rides
 * out the loader's pauses; 8 MiB (26 ms) lost 0.4% there. Ops alone come
 * at most a few hundred thousand a second.
 */
#define RING_MB_IN_PROCESS 32u
#define RING_MB_OPS	   8u

/* The ring: a memfd of ours, its size sealed, so the agent can neither shrink nor grow it. */
static int make_ring(struct pymon *pm, unsigned int ring_mb)
{
	unsigned int mb = ring_mb ?: pm->ops_only ? RING_MB_OPS : RING_MB_IN_PROCESS;
	uint64_t bytes = (uint64_t)mb << 20;

	pm->nrecs = bytes / sizeof(struct ptg_pymon_rec);
	pm->map_len = PTG_PYMON_RECS_OFF + pm->nrecs * sizeof(struct ptg_pymon_rec);
	pm->memfd = memfd_create("ptg-pymon-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (pm->memfd < 0 || ftruncate(pm->memfd, (off_t)pm->map_len))
		return -errno;
	pm->ring = mmap(NULL, pm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, pm->memfd, 0);
	if (pm->ring == MAP_FAILED) {
		pm->ring = NULL;
		return -errno;
	}
	pm->recs = (struct ptg_pymon_rec *)((char *)pm->ring + PTG_PYMON_RECS_OFF);
	pm->ring->magic = PTG_PYMON_MAGIC;
	pm->ring->version = PTG_PYMON_PROTO_VERSION;
	pm->ring->rec_size = sizeof(struct ptg_pymon_rec);
	pm->ring->nrecs = pm->nrecs;
	if (fcntl(pm->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -errno;
	return 0;
}

/* The resolver of the stack engine: code objects read from /proc/PID/mem. */
static int read_code(void *ctx, int fd, uint64_t code, struct py_code_info *out)
{
	const struct pymon *pm = ctx;

	return py_read_code(fd, pm->py.info, code, out);
}

/* One process's agent, ring, socket and stack engine: not yet known to the tracer. */
static int open_proc(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		     uint64_t start_time, bool ops_only, struct pymon **out)
{
	struct pystack_resolver res;
	char why[PATH_MAX + 128];
	struct pymon *pm;
	int err;

	*out = NULL;
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	pm->sock = pm->memfd = pm->memfd_target = -1;
	pm->tool_id = -1;
	pm->py = *py;
	pm->t = t;
	pm->start_time = start_time;
	pm->ring_mb = ring_mb;
	pm->ops_only = ops_only;
	pm->agent_fd = find_agent(pm, why, sizeof(why));
	if (pm->agent_fd < 0) {
		ptg_log(ops_only ? PTG_LOG_WARN : PTG_LOG_ERR, "%s: refusing the agent %s: %s",
			who(pm), pm->agent, why);
		err = -EPERM;
		goto cleanup;
	}
	err = make_ring(pm, ring_mb);
	if (err) {
		pr_err("%s: cannot make the shared ring: %s", who(pm), strerror(-err));
		goto cleanup;
	}
	if (ops_only) {
		*out = pm;
		return 0;
	}
	pm->memfd_target = py_mem_open(NULL, (uint32_t)py->pid);
	res = (struct pystack_resolver){.ctx = pm,
					.open_proc = py_mem_open,
					.close_proc = py_mem_close,
					.read_code = read_code};
	err = pystack__new(t, &res, &pm->ps);
	if (!err && (err = pystack__add_proc(pm->ps, (uint32_t)py->pid)))
		pr_err("record --in-process: cannot open /proc/%d/mem: %s", py->pid,
		       strerror(-err));
	if (err)
		goto cleanup;
	*out = pm;
	return 0;
cleanup:
	pymon__destroy(pm);
	return err;
}

int pymon__open(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		uint64_t start_time, struct pymon **out)
{
	struct pymon *pm;
	int err = open_proc(py, t, ring_mb, start_time, false, &pm);

	if (err)
		return err;
	err = tracer__on_stack(t, PTG_EV_PY_START, PTG_EV_PY_CODE, pymon_handle, pymon_write_losses,
			       pm);
	if (err) {
		pymon__destroy(pm);
		return err;
	}
	tracer__set_source(t, pymon_drain, pm);
	*out = pm;
	return 0;
}

/* The agent's thread ids are its namespace's: a container's ops are probed. */
static bool ops_possible(const struct py_interp *py)
{
	struct proc_ns_ids ids;

	return py->info && !(!proc_ns_ids(py->pid, py->pid, &ids) && ids.levels > 1);
}

int pymon__open_ops(const struct py_interp *py, struct tracer *t, unsigned int ring_mb,
		    uint64_t start_time, struct pymon **out)
{
	struct pymon *pm;
	int err;

	if (!ops_possible(py))
		return -EOPNOTSUPP;
	err = open_proc(py, t, ring_mb, start_time, true, &pm);
	if (err)
		return err;
	/* no frame events: only the losses at the end */
	err = tracer__on(t, 1, 0, NULL, pymon_write_losses, pm);
	if (err) {
		pymon__destroy(pm);
		return err;
	}
	tracer__set_source(t, pymon_drain, pm);
	*out = pm;
	return 0;
}

int pymon__add(struct pymon *pm, const struct py_interp *py, uint64_t start_time)
{
	struct pymon *last = pm, *n;
	int err;

	for (; last->next; last = last->next) {
		if (last->py.pid == py->pid)
			return -EEXIST;
	}
	if (last->py.pid == py->pid)
		return -EEXIST;
	if (pm->ops_only && !ops_possible(py))
		return -EOPNOTSUPP;
	err = open_proc(py, pm->t, pm->ring_mb, start_time, pm->ops_only, &n);
	if (!err)
		last->next = n;
	return err;
}

/* An offset of pyoffsets.h for the agent: -1 for none (or one no struct has). */
static int32_t layout_off(uint32_t off)
{
	return off == PTG_OFF_NONE || off > 4096 ? -1 : (int32_t)off;
}

static int send_setup(struct pymon *pm)
{
	const struct ptg_py_offsets *o = &pm->py.info->off;
	static struct ptg_pymon_setup s; /* 4 KiB */
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = {};
	struct iovec iov = {.iov_base = &s, .iov_len = sizeof(s)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	memset(&s, 0, sizeof(s));
	s.version = PTG_PYMON_PROTO_VERSION;
	s.flags = pm->ops ? PTG_PYMON_WANT_OPS : 0;
	if (pm->ops_only)
		s.flags |= PTG_PYMON_WANT_OPS | PTG_PYMON_OPS_ONLY;
	/* held where its script starts (pymon__hold()): a hand-over from the uprobes */
	else if (pm->held_tid)
		s.flags |= PTG_PYMON_ALONE;
	s.layout = (struct ptg_pymon_layout){
	    .tstate_cframe = layout_off(o->tstate_cframe),
	    .current_frame = layout_off(o->cframe_current_frame),
	    .frame_code = layout_off(o->frame_code),
	    .frame_localsplus = layout_off(o->frame_localsplus),
	    .frameobj_frame = layout_off(o->frameobj_frame),
	    .frame_prev_instr = -1,
	    .ref_mask = PTG_PY_REF_MASK,
	    .tstate_profilefunc = -1,
	    .resume_where_mask = pm->py.info->resume_where_mask,
	};
	/*
	 * 3.11's PyThreadState: c_profilefunc right after the cframe pointer
	 * (Include/cpython/pystate.h); the agent checks it on its own thread state
	 */
	if (pm->py.version_hex < 0x030c0000 && s.layout.tstate_cframe >= 0) {
		s.layout.tstate_profilefunc = s.layout.tstate_cframe + 8;
		s.layout.frame_prev_instr = layout_off(o->frame_prev_instr);
	}
	for (int i = 0; i < PY_MAX_HANDLERS && i < (int)sizeof(s.layout.resume_ops) - 1; i++)
		s.layout.resume_ops[i] = pm->py.ops.resume[i];
	for (int i = 0; i < PY_MAX_HANDLERS && i < (int)sizeof(s.layout.yield_ops) - 1; i++)
		s.layout.yield_ops[i] = pm->py.ops.yield[i];
	snprintf(s.libpython, sizeof(s.libpython), "%s", pm->py.path);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pm->memfd, sizeof(int));
	return sendmsg(pm->sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(s) ? 0 : -EPIPE;
}

/* The target's text for our terminal: NUL-ended, no control characters. */
static void printable(char *s, size_t size)
{
	s[size - 1] = '\0';
	for (; *s; s++)
		*s = *s < 0x20 || *s == 0x7f ? '?' : *s;
}

/* The agent's one answer, within WAIT_MS: it needs the GIL first. */
static int read_status(struct pymon *pm, struct ptg_pymon_status *st, char *err, size_t errlen)
{
	uint64_t end = now_ns(CLOCK_MONOTONIC) + WAIT_MS * 1000000ull, now;
	struct pollfd p = {.fd = pm->sock, .events = POLLIN};
	size_t got = 0;

	while (got < sizeof(*st) && (now = now_ns(CLOCK_MONOTONIC)) < end) {
		ssize_t n;

		if (poll(&p, 1, (int)((end - now) / 1000000 + 1)) <= 0)
			continue;
		n = recv(pm->sock, (char *)st + got, sizeof(*st) - got, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
			snprintf(err, errlen, "the agent in pid %d hung up before it started",
				 pm->py.pid);
			return -EPIPE;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	if (got < sizeof(*st)) {
		snprintf(err, errlen,
			 "the agent in pid %d did not get the GIL within %d s (a thread holds "
			 "it without running Python?); nothing was changed in it",
			 pm->py.pid, WAIT_MS / 1000);
		return -ETIMEDOUT;
	}
	printable(st->msg, sizeof(st->msg));
	printable(st->ops_msg, sizeof(st->ops_msg));
	if (st->version != PTG_PYMON_PROTO_VERSION) {
		snprintf(err, errlen, "the agent in pid %d is of another build (protocol %u)",
			 pm->py.pid, st->version);
		return -EPROTO;
	}
	if (st->state != PTG_PYMON_ACTIVE) {
		snprintf(err, errlen, "pid %d: %s", pm->py.pid, st->msg);
		return -EBUSY;
	}
	return 0;
}

/*
 * The held thread gives its GIL up until the session answered
 * (ptg_pymon_let_in()): the library is mapped already, so this is a call
 * through ptrace alone. An agent that could not use it answers all the same.
 */
static int let_in(struct pymon *pm, char *err, size_t errlen)
{
	struct inject_opts o = {
	    .entry = PTG_PYMON_LET_IN_SYM, .start_time = pm->start_time, .held_tid = pm->held_tid};
	struct inject_result res;
	int ret;

	ret = inject_library_fd(pm->py.pid, pm->agent_fd, AGENT_NAME, &o, &res, err, errlen);
	if (!ret && res.released)
		ret = -ETIMEDOUT;
	if (ret && !err[0])
		snprintf(err, errlen, "pid %d: the agent's call for the GIL failed: %s", pm->py.pid,
			 strerror(-ret));
	return ret;
}

/* One process's agent injected and started. After a message on error. */
static int attach_proc(struct pymon *pm)
{
	/* a socketpair the target makes: no name others could connect to, nothing to accept */
	struct inject_opts o = {.entry = PTG_PYMON_ATTACH_SYM,
				.start_time = pm->start_time,
				.held_tid = pm->held_tid,
				.pass_socket = true};
	struct inject_result res;
	struct ptg_pymon_status st;
	char err[PATH_MAX + 640];
	int ret;

	ret = inject_library_fd(pm->py.pid, pm->agent_fd, AGENT_NAME, &o, &res, err, sizeof(err));
	pm->sock = ret ? -1 : res.sock;
	if (!ret && res.entry_ret == 1) {
		snprintf(err, sizeof(err), "the agent in pid %d is busy with another recording",
			 pm->py.pid);
		ret = -EBUSY;
	} else if (!ret && res.entry_ret < 0) {
		snprintf(err, sizeof(err), "the agent in pid %d did not start: %s", pm->py.pid,
			 strerror(-res.entry_ret));
		ret = res.entry_ret;
	}
	if (!ret && send_setup(pm)) {
		snprintf(err, sizeof(err), "the agent in pid %d hung up", pm->py.pid);
		ret = -EPIPE;
	}
	/* held where it has the GIL (record -- CMD at its script's start): it lends it */
	if (!ret && pm->held_tid && !pm->ops_only)
		ret = let_in(pm, err, sizeof(err));
	ret = ret ?: read_status(pm, &st, err, sizeof(err));
	/* ops alone were asked for: an agent that took none is of no use (a liar, too) */
	if (!ret && pm->ops_only && st.ops != 1) {
		snprintf(err, sizeof(err), "the agent in pid %d registered no op callback: %s",
			 pm->py.pid, st.ops_msg[0] ? st.ops_msg : "no reason given");
		ret = -ENOENT;
	}
	/* the default's agent that cannot go in: record says why and takes the uprobes */
	if (ret && pm->fall_back)
		snprintf(pm->failure, sizeof(pm->failure), "%s", err);
	else if (ret)
		ptg_log(pm->ops_only ? PTG_LOG_WARN : PTG_LOG_ERR, "%s: %s", who(pm), err);
	if (ret)
		return ret;
	pm->tool_id = st.tool_id;
	pm->began_ns = st.since_ns;
	pm->ops_on = pm->ops && st.ops == 1;
	snprintf(pm->ops_msg, sizeof(pm->ops_msg), "%s", pm->ops_on ? "" : st.ops_msg);
	/* this process's ops come from its agent: its libraries are not probed */
	if (pm->ops_on)
		torchops__in_process(pm->ops, pm->py.pid);
	return 0;
}

int pymon__ops_in(struct pymon *pm, pid_t tid)
{
	struct inject_opts o = {
	    .entry = PTG_PYMON_OPS_IN_SYM, .start_time = pm->start_time, .held_tid = tid};
	struct inject_result res;
	char err[PATH_MAX + 640];
	int ret;

	if (pm->ops_only || !pm->ops || pm->sock < 0 || pm->next)
		return -EINVAL;
	if (pm->ops_on)
		return 0;
	ret = inject_library_fd(pm->py.pid, pm->agent_fd, AGENT_NAME, &o, &res, err, sizeof(err));
	if (!ret && res.released)
		ret = -ETIMEDOUT;
	if (!ret && res.entry_ret < 0)
		ret = res.entry_ret;
	if (ret) {
		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-ret));
		snprintf(pm->ops_msg, sizeof(pm->ops_msg), "at its first op: %.200s", err);
		return ret;
	}
	pm->ops_on = true;
	pm->ops_msg[0] = '\0';
	torchops__in_process(pm->ops, pm->py.pid);
	return 0;
}

/* One process's agent hung up: it takes its callbacks out. */
static void hang_up(struct pymon *pm)
{
	if (pm->sock >= 0)
		close(pm->sock);
	pm->sock = -1;
}

int pymon__attach(struct pymon *pm)
{
	int ret = 0;

	/* several: what the first ones record is read while the next ones go in */
	for (struct pymon *p = pm; p && !ret; p = p->next) {
		ret = p == pm ? 0 : pymon__drain_now(pm);
		if (ret)
			break;
		ret = attach_proc(p);
		/* ops alone: this process's ops come from the probes (it said why) */
		if (ret && ret != -ENOMEM && p->ops_only) {
			hang_up(p);
			ret = 0;
		}
	}
	/* --in-process: all or none; the agents already in take their callbacks out */
	if (ret)
		pymon__stop(pm);
	return ret;
}

int pymon__drain_now(struct pymon *pm)
{
	return pm ? pymon_drain(pm->t, pm, now_ns(CLOCK_MONOTONIC)) : 0;
}

void pymon__set_ops(struct pymon *pm, struct torchops *ops)
{
	for (; pm; pm = pm->next)
		pm->ops = ops;
}

void pymon__stop(struct pymon *pm)
{
	for (; pm; pm = pm->next)
		hang_up(pm);
}

void pymon__exec(struct pymon *pm, pid_t pid)
{
	for (; pm; pm = pm->next) {
		if (pm->py.pid == pid)
			pm->exec_gone = true;
	}
}

void pymon__fall_back(struct pymon *pm)
{
	for (; pm; pm = pm->next)
		pm->fall_back = true;
}

const char *pymon__failure(const struct pymon *pm)
{
	for (; pm; pm = pm->next) {
		if (pm->failure[0])
			return pm->failure;
	}
	return NULL;
}

void pymon__drop(struct pymon *pm)
{
	pymon__stop(pm);
	/* its ring unread, its frame events all another's */
	for (; pm; pm = pm->next) {
		pm->dropped = true;
		pm->since_ts = UINT64_MAX;
	}
}

uint64_t pymon__began(const struct pymon *pm)
{
	return pm ? pm->began_ns : 0;
}

void pymon__since(struct pymon *pm, uint64_t ts)
{
	if (pm)
		pm->since_ts = ts;
}

void pymon__hold(struct pymon *pm, pid_t tid)
{
	if (pm)
		pm->held_tid = tid;
}

bool pymon__ops_on(const struct pymon *pm)
{
	struct pymon_stats st;

	pymon__stats(pm, &st);
	return st.ops;
}

void pymon__stats(const struct pymon *pm, struct pymon_stats *st)
{
	struct pystack_stats ps;

	*st = (struct pymon_stats){0};
	for (; pm; pm = pm->next) {
		pystack__stats(pm->ps, &ps);
		st->dropped += pm->ring ? __atomic_load_n(&pm->ring->dropped, __ATOMIC_RELAXED) : 0;
		st->bad += pm->bad;
		st->unresolved += ps.unresolved;
		st->unmatched += ps.unmatched;
		st->procs++;
		st->ops_procs += pm->ops_on;
		if (!pm->ops_on && !st->ops_msg) {
			st->ops_msg = pm->ops_msg;
			st->ops_msg_pid = pm->py.pid;
		}
	}
	st->ops = st->procs && st->ops_procs == st->procs;
}

/* What the agent took in one process: its sys.monitoring tool id or 3.11's hook, and ops. */
static size_t describe_proc(const struct pymon *pm, char *buf, size_t len)
{
	int n;

	if (pm->ops_only)
		n = snprintf(buf, len, "ops by %s", pm->ops_on ? "RecordFunction" : "probes");
	else if (pm->tool_id >= 0)
		n = snprintf(buf, len, "sys.monitoring tool id %d%s", pm->tool_id,
			     pm->ops_on ? ", ops by RecordFunction" : "");
	else
		n = snprintf(buf, len, "a C profile function%s",
			     pm->ops_on ? ", ops by RecordFunction" : "");
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

void pymon__describe(const struct pymon *pm, char *buf, size_t len)
{
	size_t at = 0;

	if (!len)
		return;
	buf[0] = '\0';
	if (pm && !pm->next) {
		describe_proc(pm, buf, len);
		return;
	}
	for (; pm && at + 1 < len; pm = pm->next) {
		int n = snprintf(buf + at, len - at, "%spid %d: ", at ? "; " : "", pm->py.pid);

		at += n < 0 ? 0 : (size_t)n;
		if (at + 1 < len)
			at += describe_proc(pm, buf + at, len - at);
	}
}

void pymon__destroy(struct pymon *pm)
{
	struct pymon *next;

	/* the whole chain hangs up first, then each process's own is freed */
	pymon__stop(pm);
	for (; pm; pm = next) {
		next = pm->next;
		if (pm->ring)
			munmap(pm->ring, pm->map_len);
		if (pm->memfd >= 0)
			close(pm->memfd);
		if (pm->memfd_target >= 0)
			close(pm->memfd_target);
		if (pm->agent_fd >= 0)
			close(pm->agent_fd);
		u64map__free(&pm->depths);
		u64map__free(&pm->fprints);
		u64map__free(&pm->opnames);
		pystack__free(pm->ps);
		free(pm);
	}
}
