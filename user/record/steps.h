/* SPDX-License-Identifier: MIT */
/*
 * Training steps: each return of an optimizer's step() (a Python function
 * whose qualified name ends in ".step" in a file under torch/optim/, or the
 * function --step-function names) ends a step. Steps are numbered from 0
 * like torch.profiler's step_num; step k runs from the end of step k - 1
 * (or the start of recording) to the end of its step() call and gets a
 * ProfilerStep#k span. `record --steps N` stops after N steps and
 * `record --schedule` keeps torch.profiler.schedule()'s active steps, one
 * trace per active cycle, cut out of the recording with trace_slice().
 */
#ifndef PTG_STEPS_H
#define PTG_STEPS_H

#include <stdbool.h>
#include <stdint.h>

#include "pyinterp/pyinterp.h"
#include "tracer/tracer.h"

struct steps_opts {
	uint32_t max_steps;   /* stop after this many steps; 0: no limit */
	const char *function; /* "module:qualname" that ends a step; NULL: torch.optim's step() */
	bool schedule;	      /* wait/warmup/active/repeat/skip_first are set */
	uint32_t wait, warmup, active, repeat, skip_first;
};

/* "wait=1,warmup=1,active=3,repeat=2[,skip_first=0]" into o. Returns 0 or -EINVAL. */
int steps_parse_schedule(const char *s, struct steps_opts *o);
/* "module:qualname". Returns 0 or -EINVAL. */
int steps_check_function(const char *s);
/* torch.profiler.ProfilerAction of step k: 0 NONE, 1 WARMUP, 2 RECORD, 3 RECORD_AND_SAVE. */
int steps_action(const struct steps_opts *o, uint32_t k);

struct steps;

/* Registers for Python frame events: open it after pyframe__open(). */
int steps__open(struct tracer *t, const struct py_interp *py, const struct steps_opts *o,
		struct steps **out);
/* Every step the options ask for has ended: recording can stop. */
bool steps__done(const struct steps *s);
uint32_t steps__count(const struct steps *s);
/*
 * Writes the trace(s) the options ask for, cut from the finished recording
 * at tmp: out itself (--steps), or out with a ".cycleC" suffix before its
 * extension per active cycle (--schedule). stop_ts ends an unfinished step.
 * Returns the number of files written, or -errno.
 */
int steps__write(struct steps *s, const char *tmp, const char *out, uint64_t stop_ts, bool quiet);
void steps__destroy(struct steps *s);

#endif /* PTG_STEPS_H */
