// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "trace/losses.h"

/* The stored names: never change one (traces on disk carry them). */
static const char *const lost_names[PTG_LOST_NR] = {
    [PTG_LOST_PY_EVENT] = "py_event",
    [PTG_LOST_PY_STACK] = "py_stack",
    [PTG_LOST_PY_CODE_NAMES] = "py_code_names",
    [PTG_LOST_PY_FRAME_READ] = "py_frame_read",
    [PTG_LOST_PY_STACK_DEPTH] = "py_stack_depth",
    [PTG_LOST_PY_CODE_UNRESOLVED] = "py_code_unresolved",
    [PTG_LOST_PY_UNMATCHED_EXIT] = "py_unmatched_exit",
    [PTG_LOST_PY_UNROUTED] = "py_unrouted",
    [PTG_LOST_OP_EVENT] = "op_event",
    [PTG_LOST_CUDA_EVENT] = "cuda_event",
    [PTG_LOST_CUDA_NESTING] = "cuda_nesting",
    [PTG_LOST_CUDA_THREAD_STATE] = "cuda_thread_state",
    [PTG_LOST_CUDA_PROBE_ATTACH] = "cuda_probe_attach",
    [PTG_LOST_CUPTI_DROPPED] = "cupti_dropped",
    [PTG_LOST_CUPTI_UNKNOWN] = "cupti_unknown",
    [PTG_LOST_CUPTI_INCOMPLETE] = "cupti_incomplete",
    [PTG_LOST_CUPTI_UNDECODED_BYTES] = "cupti_undecoded_bytes",
    [PTG_LOST_LIB_EVENT] = "lib_event",
    [PTG_LOST_LIB_UNPROBED_WINDOW] = "lib_unprobed_window",
    [PTG_LOST_SCHED_EVENT] = "sched_event",
    [PTG_LOST_SCHED_THREAD_STATE] = "sched_thread_state",
    [PTG_LOST_SCHED_SWITCH_UNSEEN] = "sched_switch_unseen",
    [PTG_LOST_PROC_EVENTS] = "proc_events",
    [PTG_LOST_PROC_SET_FULL] = "proc_set_full",
    [PTG_LOST_TRACE_WRITE] = "trace_write",
    [PTG_LOST_TRACE_TRUNCATED] = "trace_truncated",
    [PTG_LOST_PY_EXEC_UNFOLLOWED] = "py_exec_unfollowed",
    [PTG_LOST_PY_INPROC_DROPPED] = "py_inproc_dropped",
    [PTG_LOST_PY_INPROC_BAD] = "py_inproc_bad",
};

const char *ptg_lost_name(enum ptg_lost kind)
{
	return (unsigned int)kind < PTG_LOST_NR ? lost_names[kind] : NULL;
}

enum ptg_lost ptg_lost_parse(const char *name)
{
	for (unsigned int k = 1; k < PTG_LOST_NR; k++) {
		if (lost_names[k] && !strcmp(lost_names[k], name))
			return (enum ptg_lost)k;
	}
	return PTG_LOST_OTHER;
}

const char *ptg_loss_name(const struct ptg_loss *l)
{
	return ptg_lost_name((enum ptg_lost)l->kind) ?: l->what;
}

int loss_table__add(struct loss_table *t, const char *what, uint32_t cpu, uint64_t count)
{
	uint64_t h = u64map_hash(U64MAP_HASH_SEED, what, strlen(what)), *idx;
	struct ptg_loss *l;

	h = u64map_hash(h, &cpu, sizeof(cpu));
	/* two counters may share a hash: probe on */
	for (;; h++) {
		idx = u64map__get(&t->idx, u64map_key(h));
		if (!idx)
			break;
		l = &t->v[*idx];
		if (l->cpu == cpu && !strcmp(l->what, what)) {
			/* a corrupt file's counts must not wrap: saturate */
			l->count = l->count + count < l->count ? UINT64_MAX : l->count + count;
			return 0;
		}
	}
	if (array_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v)) ||
	    u64map__put(&t->idx, u64map_key(h), t->n))
		return -ENOMEM;
	l = &t->v[t->n++];
	memset(l, 0, sizeof(*l));
	strncpy(l->what, what, sizeof(l->what) - 1);
	l->cpu = cpu;
	l->count = count;
	l->kind = ptg_lost_parse(what);
	return 0;
}

void loss_table__free(struct loss_table *t)
{
	free(t->v);
	u64map__free(&t->idx);
}
