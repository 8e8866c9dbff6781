/* SPDX-License-Identifier: MIT */
/*
 * What a file that is not a .ptg trace is instead (a pstats dump, a Chrome
 * JSON trace, a pprof profile, gzipped or not), from its first bytes, so the
 * reader's error tells the user which tool reads it.
 */
#ifndef PTG_TRACE_SNIFF_H
#define PTG_TRACE_SNIFF_H

#include <stddef.h>
#include <stdint.h>

/* A phrase ("a JSON file (...)") for the n first bytes at head, or NULL: unknown. */
const char *trace_sniff(const uint8_t *head, size_t n);

#endif /* PTG_TRACE_SNIFF_H */
