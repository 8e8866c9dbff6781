/* SPDX-License-Identifier: MIT */
/*
 * The cross-rank view of a distributed training job: one trace per rank,
 * matched by the rank each one carries (record's dist.rank, or an imported
 * Kineto trace's distributedInfo.rank). Per rank, the GPU idle analysis
 * (idle.h) reduced to one row and HTA's communication/computation overlap;
 * per training step (ProfilerStep#N), each rank's step duration and time in
 * communication (NCCL) kernels, the rank the others waited for and how long.
 * Traces are read one at a time, so memory follows one trace plus the steps
 * of all. Definitions: docs/idle.md ("Several ranks").
 */
#ifndef PTG_RANKS_H
#define PTG_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/idle.h"

/* Most traces one run reads: far more ranks than any job has per host. */
#define RANKS_MAX 65536

/* One step (ProfilerStep#num) of one rank. */
struct ranks_step {
	uint64_t num;
	uint64_t start, end; /* the span; several spans of the same num: their hull */
	uint64_t gpu_ops;    /* kernels, memcpys and memsets launched in the step */
	uint64_t comm_ns;    /* union of its communication kernels */
	uint64_t compute_ns; /* union of its other kernels */
	uint64_t wait_ns;    /* how long this rank waited for the step's slowest rank */
};

/* One rank: its trace reduced to what the cross-rank tables show. */
struct ranks_trace {
	char *path;
	uint32_t rank;
	int64_t meta_rank; /* the rank the trace claims, -1 when none */
	bool has_gpu;
	uint32_t devices;
	uint64_t gpu_ops;
	uint64_t gpu_span_ns, gpu_idle_ns;   /* idle: no device busy, within the span */
	uint64_t compute_ns, non_compute_ns; /* summed over devices (HTA temporal breakdown) */
	uint64_t host_wait_ns, kernel_wait_ns, other_wait_ns; /* summed over streams */
	uint64_t comm_ns;	  /* union of communication kernels, all devices */
	uint64_t comm_overlap_ns; /* the part of comm_ns during which a compute kernel ran */
	struct ranks_step *steps; /* by num */
	size_t nsteps;
	uint64_t waited_ns; /* wait_ns summed over its steps */
	uint32_t slowest;   /* steps in which it was the one waited for */
};

/* One step number across the ranks that have it. */
struct ranks_row {
	uint64_t num;
	uint32_t nranks;
	uint32_t slowest; /* index in ranks_report.ranks */
	bool by_comm;	  /* slowest = least communication time, else the longest step */
	uint64_t min_dur, max_dur;
};

struct ranks_report {
	struct ranks_trace *ranks; /* by rank */
	size_t nranks;
	bool file_order; /* rank metadata missing or claimed twice: ranks are the file order */
	struct ranks_row *rows; /* by step number */
	size_t nrows;
};

/*
 * Expands paths (trace files, or directories whose *.ptg files are taken in
 * name order) into a list of trace files. who prefixes the one-line error.
 * Returns 0 or a negative errno; free with ranks_paths_free().
 */
int ranks_paths(const char *who, char *const *paths, size_t n, char ***out, size_t *nout);
void ranks_paths_free(char **paths, size_t n);
/* Whether the arguments ask for the cross-rank view: several, or a directory. */
bool ranks_wanted(char *const *paths, size_t n);

/*
 * Reads each trace (o: the options of the idle analysis, for its breakdown)
 * and builds the cross-rank report. Errors (an unreadable trace) are printed
 * with who as prefix. Returns 0 or a negative errno.
 */
int ranks_analyze(const char *who, char *const *paths, size_t n, const struct idle_opts *o,
		  struct ranks_report **out);
void ranks_report__free(struct ranks_report *rep);
/* The step of ranks[rank] with number num, or NULL. */
const struct ranks_step *ranks_report__step(const struct ranks_report *rep, size_t rank,
					    uint64_t num);

#endif /* PTG_RANKS_H */
