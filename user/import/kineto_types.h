/* SPDX-License-Identifier: MIT */
/*
 * What an import of torch.profiler's JSON counts (kineto.h), apart from the
 * importer itself, so that its working state (kineto_import.h) holds the
 * counters without the importer's functions.
 */
#ifndef PTG_KINETO_TYPES_H
#define PTG_KINETO_TYPES_H

#include <stdint.h>

struct kineto_stats {
	uint64_t events;  /* entries of traceEvents */
	uint64_t records; /* records written */
	uint64_t clipped; /* X events cut to their parent's end */
	uint64_t unknown; /* events of an unknown category or shape: kept whole as EVENT records */
};

#endif /* PTG_KINETO_TYPES_H */
