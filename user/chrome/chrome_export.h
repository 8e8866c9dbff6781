/* SPDX-License-Identifier: MIT */
/*
 * The Chrome exporter's state, shared by its files: chrome.c turns records
 * into events, chrome_sort.c writes them in order (in memory, or through
 * runs spilled to disk and merged), chrome_tracks.c writes the metadata
 * that names processes and tracks and the trace's top-level keys, and
 * chrome_event.c, below them all, makes each event and writes the output.
 * Not for use outside the exporter (chrome.h is its interface).
 */
#ifndef PTG_CHROME_EXPORT_H
#define PTG_CHROME_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <zlib.h>

#include "base/u64map.h"
#include "model/cudajoin.h"
#include "chrome/chrome_json.h"
#include "trace/trace.h"

/*
 * Tracks of their own for what would cut across a thread's nested Python
 * frames and ops: ProfilerStep#N spans of a recorded trace (a step ends where
 * optimizer.step() returns, deep inside the loop's frames) and off-CPU
 * intervals. Their tids are the thread's with a high bit set (Linux tids stay
 * below 2^22), named by thread_name metadata and sorted next to the thread.
 */
#define STEPS_TRACK  0x40000000u
#define OFFCPU_TRACK 0x20000000u
/*
 * GPU rows of a trace of several processes (chrome.gpu_by_pid): each
 * process's under its own pid, one track per device and stream, where
 * Kineto's one process has them under pid = device, tid = stream.
 */
#define GPU_TRACK 0x10000000u
/* the key of a process's own process_name in tracks: no thread has this tid */
#define PROCESS_TRACK 0xffffffffu
/* a thread's name (at most 15 bytes from the kernel, more from a trace) and its container tid */
#define PTG_NAME_IN_NS_MAX 320

/* the output is written in pieces of about this size */
#define CHROME_FLUSH_AT (64 * 1024)
/*
 * Event bytes kept in memory before they are sorted and spilled as one run;
 * below a power of two, so that c->b's doubling stops at 8 MiB.
 */
#define CHROME_RUN_BYTES ((8u << 20) - (256u << 10))

/* Where an event goes in the output (chrome_sort.c); a spilled event's header too. */
struct cevent_key {
	uint64_t ts, dur;
	uint64_t seq;  /* events made before it, in the whole export */
	uint32_t len;  /* its bytes, once spilled */
	uint32_t meta; /* "M": ahead of every other event */
};

/* One event in c->b: it runs from off to the next one's off. */
struct cevent {
	size_t off, end;
	struct cevent_key k;
};

struct chrome_spill;

struct chrome {
	struct trace_reader *r;
	gzFile gz;
	const char *path;
	struct buf b; /* the events of this run, in the order they were made */
	struct cevent *evs;
	size_t nevs, evs_cap;
	uint64_t nseq;		    /* events made so far */
	size_t run_bytes;	    /* CHROME_RUN_BYTES, or what a test asks */
	struct chrome_spill *spill; /* the runs written to disk; NULL while none is */
	struct u64map tracks;	    /* pid << 32 | track tid of the tracks named so far */
	bool kineto;		 /* META source=kineto: pid/tid and flows are stored as they were */
	bool gpu_by_pid;	 /* GPU activity of several processes: GPU_TRACK rows */
	struct cuda_links links; /* a recorded trace's joins, cbids, External ids */
	const char *args;	 /* args blob of the record being written, or NULL */
	unsigned int nkeys;	 /* top-level keys written so far */
};

const char *chrome_sym_name(const struct chrome *c, uint32_t id);
/* Writes c->b to the output and empties it. */
int chrome_out_flush(struct chrome *c);

/* After each record's events: when they fill a run, sorts it and spills it to disk. */
void chrome_run_check(struct chrome *c);
/* Every event made, in order, to the output; the runs spilled are merged. */
int chrome_write_events(struct chrome *c);
void chrome_spill_free(struct chrome_spill *s);
/* chrome_export() with runs of run_bytes: tests make them small to merge many. */
int chrome_export_runs(struct trace_reader *r, const char *out_path, size_t run_bytes);

/* Indexes the event that starts at the end of c->b; meta: an "M" event. */
void chrome_ev_new(struct chrome *c, bool meta);
/* pid, tid and ts of the event being written. */
void chrome_ev_where(struct chrome *c, uint32_t pid, uint32_t tid, uint64_t ts);
/*
 * The members of an args blob (kineto_args.h) after those written, for a
 * record imported with one: its Kineto args and unknown keys as they came.
 */
void chrome_ev_extra(struct chrome *c, const char *blob);
/* Closes args and the event, with the members of an imported args blob (or NULL). */
void chrome_ev_end(struct chrome *c, struct jargs *a, const char *blob);

/* thread_name and thread_sort_index of a track of thread tid, once per track. */
void chrome_name_track(struct chrome *c, uint32_t pid, uint32_t tid, uint32_t track,
		       const char *what, uint64_t ts);
/* thread_name and thread_sort_index of a GPU_TRACK row, once per row. */
void chrome_name_gpu_track(struct chrome *c, uint32_t pid, uint32_t track, uint32_t device,
			   uint64_t stream, uint64_t ts);
/* A THREAD record: process/thread names, labels and sort indexes. */
void chrome_write_thread(struct chrome *c, const struct ptg_record *rec);

/* The top-level keys before traceEvents and its opening, and what follows it. */
void chrome_write_header(struct chrome *c);
void chrome_write_footer(struct chrome *c);

#endif /* PTG_CHROME_EXPORT_H */
