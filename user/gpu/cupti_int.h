/* SPDX-License-Identifier: MIT */
/*
 * Inside struct cupti (gpu.h): the state that record's thread (gpu/gpu.c,
 * cupti_set.c, cupti_inject.c) and the agents' socket reader
 * (cupti_reader.c) share, and what each of those files gives the ones above
 * it. Not for other files.
 */
#ifndef PTG_CUPTI_INT_H
#define PTG_CUPTI_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <threads.h>
#include <sys/types.h>

#include "gpu/cupti_decode.h"
#include "trace/trace.h"

#define MAX_CONNS	256	       /* agent connections in one recording */
#define CHUNK_SIZE	(256u << 10)   /* one read from a socket */
#define MAX_QUEUED	(256ull << 20) /* bytes read and not decoded yet: then agents wait */
#define CONNECT_WAIT_MS 3000	       /* an injected agent connects within this, or never */

#define MAX_FOREIGN_WARNINGS 8	/* connections not the target's: then they are closed quietly */
#define MAX_ADOPT	     16 /* sockets of injected agents not yet taken by the reader */

/* CH_FOREIGN: a peer closed at accept (data: its struct ucred), with no conn slot. */
enum chunk_kind { CH_OPEN, CH_DATA, CH_EOF, CH_FOREIGN };

struct chunk {
	struct chunk *next;
	int conn;
	int kind; /* enum chunk_kind */
	int fd;	  /* CH_DATA: a descriptor that came with these bytes (SCM_RIGHTS), or -1 */
	size_t len;
	uint8_t data[];
};

/* Only the reader thread touches fd; only record's thread the rest. */
struct conn {
	int fd;
	pid_t peer; /* SO_PEERCRED: set before CH_OPEN is queued */
	uid_t uid;  /* the same */
	/*
	 * the same: the peer passed the rule at accept. A set's member may
	 * have exited (and left the set) by the time record's thread looks.
	 */
	bool peer_checked;
	bool drop; /* under lock: the reader is to close fd (a rejected peer) */
	bool rejected, hello, ended, closed;
	bool active; /* said PTG_CUPTI_ACTIVE: recording; otherwise it went quiet */
	uint8_t *in;
	size_t inlen, incap;
	struct cupti_decoder *dec;
	/* a descriptor the agent passed, for the message it came with (CALL_RING) */
	bool has_fd;
	int fd_passed;
};

/* Who may connect: set by cupti__start, when the target is known. */
struct peer_rule {
	bool set;
	pid_t pid;
	uid_t uid; /* the target's effective uid, as SO_PEERCRED gives it */
	bool launched;
	/*
	 * A set (cupti__start_set): a dup of the BPF hash of its tgids, which
	 * the kernel grows at each fork before the child runs; pid, uid and
	 * launched are then unused. -1: one target.
	 */
	int set_fd;
};

/* A process of a set that maps NVIDIA's driver (cupti__on_proc_map): injected once. */
enum set_proc_state { SP_DUE, SP_EXPECT, SP_DONE };

struct set_proc {
	pid_t pid;
	uint64_t start_time; /* proc_start_time: a later process with its pid is another */
	int state;	     /* enum set_proc_state */
	uint64_t inject_ms;
	char *driver; /* SP_DUE: the libcuda it maps, as we open it; checked at injection */
};

/* Roots other than ours that -- CMD's processes exec in, each given the agent's copy. */
#define MAX_OTHER_ROOTS 16

struct cupti {
	bool quiet;
	int lfd;
	int wake;
	char name[64];
	char agent[PATH_MAX]; /* for messages: the agent is agent_fd */
	int agent_fd;
	struct lib_copy *launch_copy; /* record -- CMD: what CUDA_INJECTION64_PATH names */
	/* cupti__exec_stop(): the same path in other roots (chroots, containers) */
	struct lib_copy *other_roots[MAX_OTHER_ROOTS];
	int nother_roots;
	bool other_roots_full;
	struct {
		dev_t dev;
		ino_t ino;
	} roots_refused[MAX_OTHER_ROOTS]; /* where it could not be put: said once each */
	int nroots_refused;
	thrd_t reader;
	bool reader_running;

	mtx_t lock; /* guards the chunk queue and the flags after it */
	struct chunk *head, *tail;
	uint64_t queued;
	bool quit, hangup;
	int adopt[MAX_ADOPT]; /* cupti_adopt(): for the reader to take */
	int nadopt;

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
	cupti_calls_fn calls; /* where the agents' rings of CUDA calls go */
	void *calls_ctx;
	bool is_set;		/* cupti__start_set: agents of several processes */
	bool not_nvidia_said;	/* a stand-in libcuda was said once */
	struct set_proc *procs; /* is_set, not launched: those injected or due */
	size_t nprocs;
};

/* The reader thread (thrd_start_t): moves bytes from the sockets into c's queue until c->quit. */
int cupti_reader_main(void *arg);
/* Makes the reader look at c's flags and rule again. */
void cupti_wake_reader(struct cupti *c);
/* Listens on a new abstract socket with an unguessable name: c->lfd, c->name (-- CMD only). */
int cupti_listen_socket(struct cupti *c);
/*
 * Hands the reader a connection to an agent that has no name to connect
 * to (an injected agent's socketpair): fd is the reader's from then on.
 * 0, or -errno (fd is then still the caller's).
 */
int cupti_adopt(struct cupti *c, int fd);
/*
 * Whether peer (with uid) is the target of r or, for -- CMD, a process it
 * started; for a set, a process in it whose effective uid is still uid.
 */
bool cupti_peer_ok(const struct peer_rule *r, pid_t peer, uid_t uid);
/* cupti_inject.c: a warning of the CUPTI agent's, formatted whole before it is logged */
void cupti_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether the file at path (as we open it) is NVIDIA's driver, which CUPTI needs. */
bool cupti_nvidia_driver(const char *path);
/*
 * Brings the agent into pid (start_time: proc_start_time of pid, so that
 * another process with its pid is refused). Returns 0 when the agent is to
 * connect, else -errno after one warning that names pid.
 */
int cupti_inject(struct cupti *c, pid_t pid, uint64_t start_time);
/* An injected agent did not connect within CONNECT_WAIT_MS: the warning. */
void cupti_warn_no_connect(pid_t pid);
/* Set side (cupti_set.c): brings the agent into each process due. */
void cupti_set_free(struct cupti *c);
void cupti_set_inject(struct cupti *c);
/* Gives up, with a warning each, on injected agents that did not connect in time. */
void cupti_set_timeouts(struct cupti *c);
/* An agent of pid connected: it is no longer waited for. */
void cupti_set_connected(struct cupti *c, pid_t pid);
/*
 * Adds the stats of the agents that recorded (said ACTIVE) to *t: of pid
 * alone, or of all with pid 0. Returns how many distinct processes they are.
 */
int cupti_sum_stats(const struct cupti *c, pid_t pid, struct cupti_decode_stats *t);
/*
 * Metadata "cupti.pids": the processes whose agents sent GPU activity, A,B
 * (export --chrome then gives each its own GPU rows).
 */
int cupti_pids_meta(struct cupti *c);
/* One line per process that recorded GPU activity, after record's total. */
void cupti_summary_procs(const struct cupti *c);
/* Whether an injected agent of the set has yet to connect. */
bool cupti_set_waiting(const struct cupti *c);

#endif /* PTG_CUPTI_INT_H */
