/* SPDX-License-Identifier: MIT */
/*
 * The .ptg trace file: writer and reader. Every report reads traces through
 * trace_reader; capture (record) and import (Kineto JSON) write through
 * trace_writer. The on-disk format is described in docs/trace-format.md.
 */
#ifndef PTG_TRACE_H
#define PTG_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Version 2 added args blobs (trace_writer__record_args) and PTG_REC_EVENT;
 * a version 1 file has neither and still reads.
 */
#define PTG_TRACE_VERSION     3
#define PTG_TRACE_VERSION_MIN 1

/*
 * Kinds of record. Python and op records are per-thread enter/exit pairs and
 * are properly nested per thread: the writer's caller guarantees that every
 * EXIT closes the innermost open ENTER of the same tid. Other kinds are
 * complete intervals (ts + dur) or instants (dur = 0).
 */
enum ptg_rec_kind {
	PTG_REC_PY_ENTER = 1, /* sym = Python function; flags: PTG_F_* below */
	PTG_REC_PY_EXIT = 2,  /* flags: PTG_F_EXIT_* */
	PTG_REC_OP_ENTER = 3, /* sym = dispatcher op (aten::addmm) */
	PTG_REC_OP_EXIT = 4,
	PTG_REC_SPAN = 5, /* CPU interval on tid: user annotation, ProfilerStep#N, ... (sym = name,
			     aux[0] = category) */
	/*
	 * Host-side CUDA runtime/driver call: sym = API name, stream, ext; aux[1] = 1 for the
	 * driver API. Probed by record: flags = result, aux[2] = bytes, aux[3] = host call id,
	 * corr = 0 (a join FLOW gives it one). From CUPTI or Kineto: corr, aux[0] = cbid.
	 */
	PTG_REC_CUDA_CALL = 6,
	PTG_REC_GPU_KERNEL = 7, /* aux: grid x,y,z packed in aux[0..1], block in aux[2..3]; device,
				   stream, correlation */
	PTG_REC_GPU_MEMCPY = 8, /* aux[0] = bytes, aux[1] = copy kind */
	PTG_REC_GPU_MEMSET = 9, /* aux[0] = bytes */
	PTG_REC_GPU_SYNC = 10,	/* GPU-side synchronization record */
	PTG_REC_SCHED =
	    11, /* off-CPU interval of tid: aux[0] = reason (PTG_SCHED_*), aux[1] = run-queue delay
		   ns, aux[2] = waker tid; sym, aux[3] = CUDA call blocked in (API, host call id) */
	PTG_REC_SAMPLE = 12, /* stack sample: sym = stack id (see PTG_SYM_STACK), aux[0] = weight */
	PTG_REC_THREAD = 13, /* thread metadata: sym = thread name */
	/*
	 * A link by correlation id. Kineto ac2g: aux[0] = phase ('s', 'f', 't'), aux[1] = bp "e",
	 * sym = name, aux[2] = category. Join (record): aux[0] = 0, aux[3] = host call id of a
	 * probed CUDA_CALL, corr = CUPTI's id for it, ts = the call's start, aux[1] = driver,
	 * aux[2] = cbid (cudajoin.h, docs/trace-format.md).
	 */
	PTG_REC_FLOW = 14,
	/*
	 * An event of an imported trace that no other kind models (a Kineto "i" instant, an X
	 * event of an unknown category or with a string pid): sym = its name (STRING), ts, dur,
	 * pid and tid when they are numbers of 32 bits; its args blob is the whole event's JSON
	 * object, which export writes back as it was. Analyses ignore it. Version 2 and later.
	 */
	PTG_REC_EVENT = 15,
	PTG_REC_NR_KINDS
};

/* flags of PTG_REC_PY_ENTER / PTG_REC_OP_ENTER */
#define PTG_F_ENTER_CALL	0x0 /* a new call */
#define PTG_F_ENTER_RESUME	0x1 /* a suspended generator/coroutine continues: not a new call */
#define PTG_F_ENTER_PREEXISTING 0x2 /* on the stack when recording began; ts = recording start */
/* flags of PTG_REC_PY_EXIT / PTG_REC_OP_EXIT */
#define PTG_F_EXIT_RETURN 0x0
#define PTG_F_EXIT_YIELD  0x1 /* suspended, not finished */
#define PTG_F_EXIT_UNWIND 0x2 /* left by an exception */
#define PTG_F_EXIT_STOP	  0x4 /* still open when recording stopped; ts = stop time */
#define PTG_F_EXIT_LOST	  0x8 /* closed because events were lost; ts = time of resynchronization */

/*
 * flags of PTG_REC_GPU_KERNEL / GPU_MEMCPY / GPU_MEMSET: the args blob is an
 * object of further Kineto args (what CUPTI told beyond the fields: context,
 * registers per thread, shared memory), to add to those derived from the
 * fields. Without it a blob replaces them (an import's, kineto.h).
 */
#define PTG_F_ARGS_ADD 0x1

enum ptg_sched_reason {
	PTG_SCHED_PREEMPTED = 1, /* runnable when switched out */
	PTG_SCHED_BLOCKED = 2,	 /* sleeping / waiting */
};

/* Kinds of symbol in the symbol table. */
enum ptg_sym_kind {
	PTG_SYM_PY_FUNC = 1,  /* name = qualified name, file, line = first line */
	PTG_SYM_OP = 2,	      /* name = "aten::addmm" */
	PTG_SYM_KERNEL = 3,   /* name = GPU kernel name */
	PTG_SYM_CUDA_API = 4, /* name = "cuLaunchKernel", "cudaLaunchKernel" */
	PTG_SYM_STRING = 5,   /* any other name (thread names, annotations, categories) */
	PTG_SYM_STACK = 6,    /* name = folded stack ids, for samples */
	PTG_SYM_NATIVE = 7,   /* native function: name, file = object file */
};

struct ptg_record {
	uint16_t kind;
	uint16_t flags;
	uint32_t pid;
	uint32_t tid;
	uint32_t sym;	 /* symbol id, 0 = none */
	uint64_t ts;	 /* CLOCK_MONOTONIC ns */
	uint64_t dur;	 /* ns, for interval kinds */
	uint64_t stream; /* CUDA stream (GPU and CUDA call records) */
	uint64_t corr;	 /* correlation id (CUDA call <-> GPU record) */
	uint64_t ext;	 /* external id (op <-> CUDA call) */
	uint32_t device; /* GPU device; CPU for scheduler records */
	uint32_t pad;
	int64_t aux[4]; /* kind-specific, see enum ptg_rec_kind */
};

struct ptg_sym {
	uint32_t id;
	uint32_t kind; /* enum ptg_sym_kind */
	const char *name;
	const char *file; /* "" when none */
	uint32_t line;
};

/*
 * Every kind of loss a trace counts: the one list that record, dump and the
 * reports name losses from (docs/trace-format.md, "Loss counters"). Values
 * are stable: append only. Each has one name, ptg_lost_name(), which is what
 * a LOSS chunk stores; a name outside the list (a newer writer's) reads as
 * PTG_LOST_OTHER with its name kept in ptg_loss.what.
 */
enum ptg_lost {
	PTG_LOST_OTHER = 0,
	PTG_LOST_PY_EVENT = 1,		 /* ring buffer full: a Python frame event (per CPU) */
	PTG_LOST_PY_STACK = 2,		 /* ring buffer full: a stack snapshot (per CPU) */
	PTG_LOST_PY_CODE_NAMES = 3,	 /* ring buffer full: a code object's names (per CPU) */
	PTG_LOST_PY_FRAME_READ = 4,	 /* BPF could not read the current frame (per CPU) */
	PTG_LOST_PY_STACK_DEPTH = 5,	 /* a snapshot cut at PTG_MAX_SNAPSHOT_DEPTH (per CPU) */
	PTG_LOST_PY_CODE_UNRESOLVED = 6, /* code objects whose names could not be read */
	PTG_LOST_PY_UNMATCHED_EXIT = 7,	 /* returns of frames not on the thread's stack */
	PTG_LOST_PY_UNROUTED = 8,   /* Python events of a process whose interpreter was not found */
	PTG_LOST_OP_EVENT = 9,	    /* ring buffer full: a dispatcher op event (per CPU) */
	PTG_LOST_CUDA_EVENT = 10,   /* ring buffer full: a CUDA call's entry or return */
	PTG_LOST_CUDA_NESTING = 11, /* CUDA calls nested deeper than PTG_CUDA_MAX_NEST */
	PTG_LOST_CUDA_THREAD_STATE = 12, /* a thread's open-CUDA-call state not stored */
	PTG_LOST_CUDA_PROBE_ATTACH = 13, /* CUDA entry points that could not be probed */
	PTG_LOST_CUPTI_DROPPED = 14,	 /* records CUPTI itself dropped */
	PTG_LOST_CUPTI_UNKNOWN = 15,	 /* CUPTI records of a kind the agent does not forward */
	PTG_LOST_CUPTI_INCOMPLETE = 16,	 /* CUPTI records without a valid start and end */
	PTG_LOST_CUPTI_UNDECODED_BYTES = 17, /* bytes of the agent's buffers that did not parse */
	PTG_LOST_LIB_EVENT = 18,	     /* ring buffer full: a dynamic loader notice */
	PTG_LOST_LIB_UNPROBED_WINDOW = 19,   /* libraries probed only after they were mapped */
	PTG_LOST_SCHED_EVENT = 20,	     /* ring buffer full: an off-CPU interval */
	PTG_LOST_SCHED_THREAD_STATE = 21,    /* a thread's scheduler state not stored */
	PTG_LOST_SCHED_SWITCH_UNSEEN = 22,   /* a switch-in whose off-CPU start was not seen */
	PTG_LOST_PROC_EVENTS = 23,	     /* ring buffer full: a fork/exec/exit notice */
	PTG_LOST_PROC_SET_FULL = 24,	     /* processes the traced set had no room for */
	PTG_LOST_TRACE_WRITE = 25,	     /* records a failed write of the trace lost */
	PTG_LOST_TRACE_TRUNCATED = 26,	     /* a trace read without its end marker */
	PTG_LOST_PY_EXEC_UNFOLLOWED =
	    27, /* execs of a -p/-- CMD target into a Python not followed */
	PTG_LOST_PY_INPROC_DROPPED = 28, /* --in-process: the agent's ring was full */
	PTG_LOST_PY_INPROC_BAD = 29,	 /* --in-process: records that broke the protocol */
	PTG_LOST_NR
};

/* One loss counter: what was lost, where, how many. */
struct ptg_loss {
	char what[32]; /* ptg_lost_name(kind), or a name this build does not know */
	uint32_t cpu;  /* UINT32_MAX when not per CPU */
	uint64_t count;
	uint32_t kind; /* enum ptg_lost */
};

/* The name of a loss kind ("py_event"), NULL for PTG_LOST_OTHER or out of range. */
const char *ptg_lost_name(enum ptg_lost kind);
/* The kind of a loss name, PTG_LOST_OTHER for one outside the list. */
enum ptg_lost ptg_lost_parse(const char *name);
/* What to show for a counter, wherever losses are printed (record, dump, reports). */
const char *ptg_loss_name(const struct ptg_loss *l);

/* Longest args blob of one record. */
#define PTG_ARGS_MAX (1u * 1024 * 1024)

struct trace_writer;

/*
 * All return 0 or a negative errno; on failure a message goes to stderr. The
 * file appears at path, mode 0600, only when __close succeeds (a symlink there
 * is replaced, not followed); until then whatever was at path stays.
 */
int trace_writer__open(const char *path, struct trace_writer **out);
/*
 * For a recording: when a write fails (a full disk, an I/O error), __close
 * and __abort keep the complete chunks written before it as a readable trace,
 * with a "trace_write" loss counter of the records lost, and say so on stderr.
 */
void trace_writer__keep_partial(struct trace_writer *w);
int trace_writer__meta(struct trace_writer *w, const char *key, const char *value);
/* Returns a symbol id >= 1, the same id for the same (kind, name, file, line). */
uint32_t trace_writer__sym(struct trace_writer *w, uint32_t kind, const char *name,
			   const char *file, uint32_t line);
int trace_writer__record(struct trace_writer *w, const struct ptg_record *rec);
/*
 * The same with an args blob attached to the record: len bytes of a JSON
 * object's text, at most PTG_ARGS_MAX, kept as they are. Imports use it for
 * what the record's fields cannot hold (Kineto args, unknown keys).
 */
int trace_writer__record_args(struct trace_writer *w, const struct ptg_record *rec,
			      const char *args, size_t len);
/* Adds to the loss counter (what, cpu). */
int trace_writer__loss(struct trace_writer *w, const char *what, uint32_t cpu, uint64_t count);
/* The same by kind: what every capture module should call (not PTG_LOST_OTHER). */
int trace_writer__lost(struct trace_writer *w, enum ptg_lost kind, uint32_t cpu, uint64_t count);
/*
 * The counters added so far, to print at the end of a recording with
 * ptg_loss_name(); valid until the next __loss/__lost or __close.
 */
const struct ptg_loss *trace_writer__losses(const struct trace_writer *w, size_t *n);
/* Flushes, writes the final chunk and closes; frees w even on error. */
int trace_writer__close(struct trace_writer *w);
/* Frees w and drops the file, except as __keep_partial says (error paths). Accepts NULL. */
void trace_writer__abort(struct trace_writer *w);

struct trace_reader;

/*
 * Opens and validates a trace. On failure returns a negative errno and, when
 * errbuf is given, a one-line reason ("bad checksum in chunk 3", ...).
 */
int trace_reader__open(const char *path, struct trace_reader **out, char *errbuf, size_t errlen);
/* Next record in file order: 1 = rec filled, 0 = end, < 0 = corrupt (see __error). */
int trace_reader__next(struct trace_reader *r, struct ptg_record *rec);
/*
 * The args blob of the record the last __next() returned, NUL-terminated, or
 * NULL when it has none. Valid until the next call of __next() or __rewind().
 */
const char *trace_reader__args(const struct trace_reader *r, size_t *len);
/* Back to the first record. */
int trace_reader__rewind(struct trace_reader *r);
/* Metadata value or NULL. */
const char *trace_reader__meta(const struct trace_reader *r, const char *key);
/* Iterate metadata: returns false past the end. */
bool trace_reader__meta_at(const struct trace_reader *r, size_t i, const char **key,
			   const char **value);
/* Symbol by id, or NULL. Symbols are all loaded at open. */
const struct ptg_sym *trace_reader__sym(const struct trace_reader *r, uint32_t id);
size_t trace_reader__nsyms(const struct trace_reader *r);
/*
 * A trace without its end marker opens and reads its complete chunks (a
 * recorder killed, a full disk, a copy cut short): true, with the file's size
 * and the offset where its complete chunks end; frames open at the cut have no
 * EXIT. Such a trace has a "trace_truncated" loss counter.
 */
bool trace_reader__cut(const struct trace_reader *r, uint64_t *size, uint64_t *readable);
/* Loss counters, all loaded at open. */
const struct ptg_loss *trace_reader__losses(const struct trace_reader *r, size_t *n);
uint64_t trace_reader__nrecords(const struct trace_reader *r);
const char *trace_reader__error(const struct trace_reader *r);
void trace_reader__close(struct trace_reader *r);

#endif /* PTG_TRACE_H */
