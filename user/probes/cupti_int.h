/* SPDX-License-Identifier: MIT */
/*
 * Inside struct cupti (cupti.h): the state that the agents' socket reader
 * (cupti_reader.c) and record's thread (cupti.c) share. Not for other files.
 */
#ifndef PTG_CUPTI_INT_H
#define PTG_CUPTI_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <threads.h>
#include <sys/types.h>

#include "probes/cupti.h"

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

/* The reader thread (thrd_start_t): moves bytes from the sockets into c's queue until c->quit. */
int cupti_reader_main(void *arg);
/* Makes the reader look at c's flags and rule again. */
void cupti_wake_reader(struct cupti *c);
/* Listens on a new abstract socket with an unguessable name: c->lfd, c->name. */
int cupti_listen_socket(struct cupti *c);
/* Whether peer (with uid) is the target of r or, for -- CMD, a process it started. */
bool cupti_peer_ok(const struct peer_rule *r, pid_t peer, uid_t uid);

#endif /* PTG_CUPTI_INT_H */
