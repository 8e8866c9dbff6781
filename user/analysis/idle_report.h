/* SPDX-License-Identifier: MIT */
/*
 * What an idle analysis reports (idle.h: idle_analyze()), and the two
 * questions its timelines answer: the launch queue's depth at a time
 * (idle_queue.c) and the GPU's idle time in a span (idle_events.c).
 */
#ifndef PTG_IDLE_REPORT_H
#define PTG_IDLE_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IDLE_QD_BUCKETS	      8 /* queue depth histogram: 0, 1, 2-3, 4-7, ..., 64+ */
#define IDLE_TIMELINE_BUCKETS 50

struct idle_opts {
	unsigned int top_n;	 /* events and gaps listed (-n) */
	uint64_t kernel_wait_ns; /* HTA consecutive_kernel_delay */
	uint32_t max_queue_len;	 /* HTA max_queue_length: a launch queue this long is full */
};

/* HTA temporal breakdown of one GPU. */
struct idle_device {
	uint32_t device;
	uint64_t first, last;	 /* first GPU op start, last GPU op end */
	uint64_t idle_ns;	 /* span - merged busy time */
	uint64_t compute_ns;	 /* merged compute kernels */
	uint64_t non_compute_ns; /* busy - compute: memcpy, memset, communication */
	uint64_t kernels, memcpys, memsets;
	uint64_t kernel_ns; /* sum of kernel durations (not merged) */
	uint64_t gaps;	    /* idle intervals */
};

/* HTA idle time breakdown and queue length of one stream. */
struct idle_stream {
	uint32_t device;
	uint32_t stream;
	uint64_t ops;
	uint64_t host_wait_ns, kernel_wait_ns, other_wait_ns;
	uint32_t max_queue;
	double mean_queue;	/* time-weighted, from the first change to the last */
	uint64_t full_queue_ns; /* time with queue length >= max_queue_len */
};

struct idle_gap {
	uint64_t start, end;
	uint32_t device;
};

/* A CPU event: op, Python function or CUDA call. */
struct idle_event {
	uint64_t start, dur, self_ns, idle_ns;
	uint32_t sym;
	uint32_t pysym;	      /* innermost Python frame (the event itself for Python), 0 = none */
	uint32_t queue_depth; /* at the event's start */
	uint16_t kind;	      /* PTG_REC_OP_ENTER, PTG_REC_PY_ENTER or PTG_REC_CUDA_CALL */
	bool nested;	      /* inside an open event of the same symbol (recursion) */
	double score;
};

/* Totals of all events of one name. total_ns and idle_ns count an interval
 * once however deep the name recurses in it, as cProfile's cumtime does. */
struct idle_name {
	uint32_t sym;
	uint16_t kind;
	uint64_t count, total_ns, self_ns, idle_ns;
	uint64_t qd_sum;
};

struct idle_delay {
	uint64_t count;
	double mean_ns;
	uint64_t p50_ns, p95_ns, max_ns;
};

struct idle_report {
	uint64_t first_ts, last_ts; /* whole trace */
	uint64_t cpu_events, gpu_ops;
	uint64_t gpu_first, gpu_last; /* 0, 0 without GPU activity */
	uint64_t gpu_idle_ns;	      /* no device busy, within [gpu_first, gpu_last] */
	uint64_t gap_count;
	struct idle_device *devices;
	size_t ndevices;
	struct idle_stream *streams;
	size_t nstreams;
	struct idle_gap *gaps; /* the top_n longest, longest first */
	size_t ngaps;
	struct idle_delay launch_delay;
	/* launch-queue depth (BasicEvaluation) */
	uint32_t qd_max;
	double qd_mean; /* time-weighted over [first launch, last kernel start] */
	uint64_t qd_hist_ns[IDLE_QD_BUCKETS];
	uint64_t qd_timeline_max[IDLE_TIMELINE_BUCKETS];
	double qd_timeline_mean[IDLE_TIMELINE_BUCKETS];
	uint64_t qd_first, qd_last;
	/* optimizable events */
	uint64_t decreases, candidates;
	struct idle_event *ranked; /* all candidates, best first */
	size_t nranked;		   /* how many of them to show: min(candidates, top_n) */
	struct idle_name *names;   /* top_n names by self time */
	size_t nnames;
	uint64_t nnames_total;
	/* timelines kept for the queries below */
	uint64_t *busy;	       /* merged busy intervals of all devices: start, end pairs */
	uint64_t *busy_before; /* busy time before busy[2 * i] */
	size_t nbusy;
	uint64_t *launches; /* sorted launch times of matched kernels */
	uint64_t *kstarts;  /* sorted start times of the same kernels */
	size_t nqd;
};

/* Kernels launched and not yet started at t (launches at t count, starts at t too). */
uint32_t idle_report__queue_depth(const struct idle_report *rep, uint64_t t);
/* Time of [start, end) during which no GPU is busy, within [gpu_first, gpu_last]. */
uint64_t idle_report__idle_overlap(const struct idle_report *rep, uint64_t start, uint64_t end);

#endif /* PTG_IDLE_REPORT_H */
