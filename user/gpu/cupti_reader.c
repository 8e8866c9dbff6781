// SPDX-License-Identifier: MIT
/*
 * The socket that the CUPTI agents of one recording connect to, and the
 * reader thread behind it: it only moves bytes from the sockets into a
 * bounded queue (so an agent never waits for record's poll loop) and keeps
 * out peers that are not the target; record's thread decodes (gpu/gpu.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "gpu/cupti_int.h"
#include "proc/procfs.h"

#ifdef PTG_HAVE_CUPTI

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
	ch->fd = -1;
	push_chunk(c, ch);
	return 0;
}

/*
 * Once the target is known, a peer that is not it gets no slot, so that
 * others cannot use the slots up: closed here, told to record's thread.
 */
static bool foreign_peer(struct cupti *c, const struct ucred *cred, bool *checked)
{
	struct peer_rule r;
	struct chunk *ch;

	mtx_lock(&c->lock);
	r = c->rule;
	mtx_unlock(&c->lock);
	*checked = r.set;
	if (!r.set || cupti_peer_ok(&r, cred->pid, cred->uid))
		return false;
	ch = calloc(1, sizeof(*ch) + sizeof(*cred));
	if (ch) {
		*ch =
		    (struct chunk){.conn = -1, .kind = CH_FOREIGN, .fd = -1, .len = sizeof(*cred)};
		memcpy(ch->data, cred, sizeof(*cred));
		push_chunk(c, ch);
	}
	return true;
}

/* A connection accepted, or adopted (the socketpair of an injected agent): a slot, or closed. */
static void add_conn(struct cupti *c, int fd, bool hangup)
{
	struct ucred cred = {};
	socklen_t len = sizeof(cred);
	bool checked;

	/* pid 0 (unknown) is nobody's: rejected */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		cred.pid = 0;
	if (foreign_peer(c, &cred, &checked) || c->nconns == MAX_CONNS) {
		close(fd);
		return;
	}
	/* an agent that connects after stop: let it flush and end at once */
	if (hangup)
		shutdown(fd, SHUT_WR);
	c->conns[c->nconns].peer = cred.pid;
	c->conns[c->nconns].uid = cred.uid;
	c->conns[c->nconns].peer_checked = checked;
	c->conns[c->nconns].fd = fd;
	if (push_event(c, c->nconns, CH_OPEN)) {
		close(fd);
		return;
	}
	mtx_lock(&c->lock);
	c->nconns++;
	mtx_unlock(&c->lock);
}

static void accept_conn(struct cupti *c, int lfd, bool hangup)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd >= 0)
		add_conn(c, fd, hangup);
}

/* The sockets cupti_adopt() handed over, taken into slots. */
static void adopt_conns(struct cupti *c, bool hangup)
{
	int fds[MAX_ADOPT], n;

	mtx_lock(&c->lock);
	n = c->nadopt;
	memcpy(fds, c->adopt, sizeof(fds[0]) * (size_t)n);
	c->nadopt = 0;
	mtx_unlock(&c->lock);
	for (int i = 0; i < n; i++)
		add_conn(c, fds[i], hangup);
}

int cupti_adopt(struct cupti *c, int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK))
		return -errno;
	mtx_lock(&c->lock);
	if (c->nadopt == MAX_ADOPT) {
		mtx_unlock(&c->lock);
		return -EBUSY;
	}
	c->adopt[c->nadopt++] = fd;
	mtx_unlock(&c->lock);
	cupti_wake_reader(c);
	return 0;
}

/*
 * A descriptor that came with the bytes (an agent's ring, CALL_RING): one
 * at most per read, since a read stops after the bytes that carry one; more
 * than fit are closed by the kernel (MSG_CTRUNC).
 */
static int passed_fd(struct msghdr *m)
{
	struct cmsghdr *cm = CMSG_FIRSTHDR(m);
	int fd = -1;

	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
	    cm->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

static void read_conn(struct cupti *c, int i)
{
	struct conn *k = &c->conns[i];
	struct chunk *ch = malloc(sizeof(*ch) + CHUNK_SIZE);
	union {
		struct cmsghdr c;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (!ch)
		return;
	iov = (struct iovec){.iov_base = ch->data, .iov_len = CHUNK_SIZE};
	m.msg_control = u.buf;
	m.msg_controllen = sizeof(u.buf);
	n = recvmsg(k->fd, &m, MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(ch);
		return;
	}
	*ch = (struct chunk){.conn = i,
			     .kind = n > 0 ? CH_DATA : CH_EOF,
			     .fd = n > 0 ? passed_fd(&m) : -1,
			     .len = n > 0 ? n : 0};
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

static void reader_flags(struct cupti *c, bool *quit, bool *hangup, bool *full, int *lfd)
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
	/*
	 * until the target is known no peer can be checked: they wait in
	 * the backlog (no agent connects before that), not in our slots
	 */
	*lfd = c->rule.set ? c->lfd : -1;
	mtx_unlock(&c->lock);
}

int cupti_reader_main(void *arg)
{
	struct pollfd p[MAX_CONNS + 2];
	int idx[MAX_CONNS + 2], n;
	bool quit, hangup, full, hung = false;
	struct cupti *c = arg;
	int lfd;
	uint64_t v;

	for (;;) {
		reader_flags(c, &quit, &hangup, &full, &lfd);
		if (quit)
			return 0;
		adopt_conns(c, hangup);
		if (hangup && !hung)
			hangup_all(c);
		hung = hangup;
		n = 0;
		p[n++] = (struct pollfd){.fd = c->wake, .events = POLLIN};
		/* -1 (ignored) without a listening socket: -p's agents come by socketpair */
		p[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
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
			accept_conn(c, lfd, hangup);
		for (int j = 2; j < n; j++) {
			if (p[j].revents)
				read_conn(c, idx[j]);
		}
	}
}

void cupti_wake_reader(struct cupti *c)
{
	uint64_t one = 1;

	if (write(c->wake, &one, sizeof(one)) < 0) {
		/* the counter is non-zero already: the reader wakes anyway */
	}
}

/*
 * An abstract socket: no file for anyone to replace. Only -- CMD has one
 * (CUDA_INJECTION64_PATH's agents find it by name); who connects is
 * checked at accept, and others are closed at once.
 */
int cupti_listen_socket(struct cupti *c)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	uint32_t rnd = 0;
	size_t n;
	int fd;

	/* unguessable, so that no other local process takes the name first */
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)now_ms(CLOCK_MONOTONIC) ^ (uint32_t)getpid() << 16;
	snprintf(c->name, sizeof(c->name), "ptrace-gpu-cupti-%d-%08x", getpid(), rnd);
	n = strlen(c->name);
	memcpy(a.sun_path + 1, c->name, n);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(fd, 64)) {
		n = (size_t)errno;
		close(fd);
		return -(int)n;
	}
	mtx_lock(&c->lock);
	c->lfd = fd;
	mtx_unlock(&c->lock);
	cupti_wake_reader(c);
	return 0;
}

/*
 * For -p, the target; for -- CMD, the command or any process it started;
 * with the target's uid either way; for a set, its members alone. The
 * socket's name is in /proc/net/unix for anyone to see.
 */
/*
 * A set's member, as the kernel keeps the set: a process that is in it at
 * accept is the one that connected, unless that one died and its pid went
 * to a member since; its uid changing with it is then the sign.
 */
static bool set_member(const struct peer_rule *r, pid_t peer, uid_t uid)
{
	__u32 tgid = (__u32)peer;
	uid_t now;
	__u8 one;

	if (peer <= 0 || bpf_map_lookup_elem(r->set_fd, &tgid, &one))
		return false;
	return !proc_euid(peer, &now) && now == uid;
}

bool cupti_peer_ok(const struct peer_rule *r, pid_t peer, uid_t uid)
{
	char path[64], buf[512], *p;
	int hops = 0;
	FILE *f;

	if (r->set_fd >= 0)
		return set_member(r, peer, uid);
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

#endif /* PTG_HAVE_CUPTI */
