// SPDX-License-Identifier: MIT
/*
 * A lying stand-in for libptg_pymon.so (agent/ptg_pymon_agent.c), for
 * tests/integration/test_inprocess.py: it does the handshake as the agent
 * does, then writes records that break the protocol into the loader's ring
 * (kinds out of range, snapshots too deep or cut short, orphan frames, thread
 * 0, a clock far in the future, more threads than a process has, garbage
 * counters, code names of no length or with a NUL) between valid ones, and waits for the loader to
 * hang up. The loader must count what it ignored (HOSTILE_BAD of them) and go on.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptg_agent_fd.h"
#include "ptg_pymon_proto.h"

#define EXPORT	  __attribute__((visibility("default")))
#define MANY_TIDS 66000 /* distinct threads: the loader takes 65536 at most */
#define GOOD_TID  5

static struct ptg_pymon_rec *recs;
static uint64_t mask, head;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void put_arg(uint16_t kind, uint32_t tid, uint64_t code, uint64_t ts, uint64_t arg)
{
	struct ptg_pymon_rec *r = &recs[head & mask];

	r->ts = ts;
	r->code_kind = code | (uint64_t)kind << PTG_PYMON_KIND_SHIFT;
	r->tid = tid;
	r->arg = arg;
	__atomic_store_n(&r->seq, (uint32_t)(head + 1), __ATOMIC_RELEASE);
	head++;
}

static void put(uint16_t kind, uint32_t tid, uint64_t code, uint64_t ts)
{
	put_arg(kind, tid, code, ts, ~0ull);
}

/* A CODE group of code: the two str addresses, then qualname and filename bytes. */
static void put_code(uint64_t code, const char *bytes, size_t q, size_t f, uint32_t line)
{
	char b[64] = {0};
	uint64_t w[2];

	memcpy(b + 16, bytes, q + f);
	put_arg(PTG_PYMON_CODE, GOOD_TID, code, now_ns(),
		line | (uint64_t)q << 32 | (uint64_t)f << 48);
	for (size_t i = 0; i < 1 + (q + f + 15) / 16; i++) {
		memcpy(w, b + i * 16, 16);
		put_arg(PTG_PYMON_NAME_BYTES, GOOD_TID, 0, w[0], w[1]);
	}
}

static void lie(struct ptg_pymon_ring *ring)
{
	uint64_t t = now_ns();

	put(PTG_PYMON_START, GOOD_TID, 0x1000, t);	  /* valid, of an unreadable code object */
	put(0, GOOD_TID, 0x1000, t);			  /* bad: kind 0 */
	put(99, GOOD_TID, 0x1000, t);			  /* bad: kind out of range */
	put(PTG_PYMON_STACK, GOOD_TID, 1000, t);	  /* bad: deeper than a snapshot */
	put(PTG_PYMON_STACK, GOOD_TID, 2, t);		  /* bad: its frames are not FRAMEs */
	put(PTG_PYMON_RETURN, GOOD_TID, 0x1000, t);	  /* valid */
	put(PTG_PYMON_RETURN, GOOD_TID, 0x1000, t);	  /* valid: a return of nothing known */
	put(PTG_PYMON_FRAME, GOOD_TID, 0x2000, t);	  /* bad: a frame with no snapshot */
	put(PTG_PYMON_START, 0, 0x1000, t);		  /* bad: thread 0 */
	put(PTG_PYMON_START, GOOD_TID, 0x1000, ~0ull);	  /* valid: its time cut down to now */
	put(PTG_PYMON_UNWIND, GOOD_TID, 0x1000, t);	  /* valid */
	put_code(0x4000, "liar.named/liar.py", 10, 8, 7); /* valid: names of 0x4000 */
	put(PTG_PYMON_START, GOOD_TID, 0x4000, t);	  /* valid, named by it */
	put(PTG_PYMON_RETURN, GOOD_TID, 0x4000, t);	  /* valid */
	put_arg(PTG_PYMON_CODE, GOOD_TID, 0x5000, t, 7);  /* bad: names of no length */
	put_code(0x6000, "bad\0name/x.py", 8, 6, 1);	  /* bad, and its 2 NAME_BYTES: a NUL */
	for (uint32_t i = 0; i < MANY_TIDS; i++)
		put(PTG_PYMON_YIELD, 100000 + i, 0x3000, t); /* all but 65535 bad */
	/* counters the loader must not trust for anything but a number */
	ring->dropped = 7;
	ring->tail = 12345;
	__atomic_store_n(&ring->head, ~0ull, __ATOMIC_RELEASE);
}

static void *liar(void *arg)
{
	static struct ptg_pymon_setup setup;
	struct ptg_pymon_status st = {.version = PTG_PYMON_PROTO_VERSION,
				      .state = PTG_PYMON_ACTIVE,
				      .tool_id = 3,
				      .pid = (uint32_t)getpid()};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = &setup, .iov_len = sizeof(setup)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	struct ptg_pymon_ring *ring;
	struct pollfd p;
	struct stat sb;
	int s = (int)(intptr_t)arg, fd = -1;
	char c;

	if (recvmsg(s, &mh, MSG_WAITALL) != (ssize_t)sizeof(setup) || !CMSG_FIRSTHDR(&mh))
		return NULL;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(fd));
	if (fstat(fd, &sb))
		return NULL;
	ring = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED)
		return NULL;
	recs = (struct ptg_pymon_rec *)((char *)ring + PTG_PYMON_RECS_OFF);
	mask = ring->nrecs - 1;
	lie(ring);
	send(s, &st, sizeof(st), MSG_NOSIGNAL);
	p = (struct pollfd){.fd = s, .events = POLLIN};
	while (poll(&p, 1, -1) >= 0 && recv(s, &c, 1, 0) > 0) {
	}
	close(s);
	return NULL;
}

EXPORT int ptg_pymon_attach(const char *loader)
{
	sigset_t all, old;
	pthread_t t;
	int err, s = ptg_agent_take_fd(loader);

	if (s < 0)
		return s;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, NULL, liar, (void *)(intptr_t)s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		pthread_detach(t);
	return -err;
}
