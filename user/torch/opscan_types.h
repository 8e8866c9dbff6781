/* SPDX-License-Identifier: MIT */
/*
 * What a scan of PyTorch's ops finds (struct opscan, opscan.h), and the op
 * name a symbol gives when the library does not say: shared by opscan.h's
 * users and the scan's own files below opscan.c (opscan_insns.c,
 * opscan_image.c).
 */
#ifndef PTG_OPSCAN_TYPES_H
#define PTG_OPSCAN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

struct opscan_op {
	const char *name; /* "aten::addmm"; points into the scan's string pool */
	uint64_t addr;	  /* link-time address of the function */
	uint32_t size;
};

/*
 * One uprobe site: a file offset, and what its bpf_cookie says (PTG_OP_COOKIE
 * with a local op index): the kind of site, and where the entry's stack
 * pointer is there: rsp (fp 0) or rbp (fp 1) plus delta.
 */
struct opscan_site {
	uint64_t offset;
	uint32_t op;
	uint8_t site; /* enum ptg_op_site */
	uint8_t fp;
	int16_t delta;
};

struct opscan_stats {
	uint32_t ops;	  /* functions found */
	uint32_t rets;	  /* ret instructions */
	uint32_t checks;  /* rets probed at the stack-protector check before them */
	uint32_t tails;	  /* tail-call jump sites: the op ends there, before its callee */
	uint32_t no_exit; /* ops with no exit site at all (never closed but by the stack rules) */
	uint32_t cond_tails; /* conditional jumps out of the function: not probed (a uprobe
			      * there fires whether or not the jump is taken) */
	uint32_t unnamed;    /* ops named from their symbol, findSchemaOrThrow not found */
	uint32_t stepped;    /* sites on an instruction the kernel runs out of line with a
			      * single step, one more trap each hit (not a push or a
			      * relative branch: a ret without a check before it) */
	uint64_t elapsed_ns;
};

struct opscan {
	struct opscan_op *ops;
	size_t nops;
	struct opscan_site *sites;
	size_t nsites;
	struct opscan_stats st;
	struct buf pool; /* op names, NUL-separated */
};

/*
 * The op name torch.profiler shows for an at::_ops::<op>::call symbol when
 * the library does not say: "aten::" and <op> up to its overload suffix is
 * unknowable, so <op> whole. For tests and the fallback only.
 */
int opscan_name_from_symbol(const char *sym, char *buf, size_t len);

#endif /* PTG_OPSCAN_TYPES_H */
