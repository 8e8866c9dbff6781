/* SPDX-License-Identifier: MIT */
/*
 * ptrace-gpu check: what this machine (and with -p, a process) gives record,
 * one line a thing, each with what its absence costs. cmd_check.c runs it;
 * check_system.c looks at the kernel, the privileges and the agents;
 * check_process.c at a process; check.c prints the lines of all three.
 */
#ifndef PTG_CHECK_H
#define PTG_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum check_status {
	CHECK_OK,
	CHECK_DEGRADED, /* record runs, with less */
	CHECK_MISSING,
	CHECK_UNKNOWN, /* could not be looked at (a probe needs the privileges missing) */
};

struct check {
	unsigned int shortfalls; /* lines that keep record from working in full */
	uint64_t caps;		 /* effective capabilities */
	bool privileged;	 /* the capabilities syscheck_tracing() asks for */
	int tracing;		 /* syscheck_tracing(): 0, or why record is refused */
	char tracing_err[256];
};

/*
 * Prints one line: the status word, then what the format says. needed: a
 * status other than CHECK_OK there means record does not work in full (a
 * missing feature that costs nothing is not needed).
 */
void check_line(struct check *c, enum check_status st, bool needed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool check_has_cap(const struct check *c, int cap);

/* The kernel and its BPF features, its security settings, our capabilities, the agents. */
void check_system(struct check *c);
/* The uprobe trap's cost here, measured in this process. */
void check_trap_cost(struct check *c);
/* What record -p pid would find and do. */
void check_process(struct check *c, pid_t pid);

#endif /* PTG_CHECK_H */
