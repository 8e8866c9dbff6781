/* SPDX-License-Identifier: MIT */
/*
 * Finding PyTorch's dispatcher entry points in a library file: every
 * exported at::_ops::<op>::call, the name torch.profiler gives it
 * ("aten::addmm", read from the op's c10::Dispatcher::findSchemaOrThrow
 * call, which is where the dispatcher itself learns it), and the uprobe
 * sites of its entry and of each of its exits, found by disassembling it
 * (capstone): every ret, and the jump of a tail call.
 */
#ifndef PTG_OPSCAN_H
#define PTG_OPSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "torch/opscan_types.h"

/*
 * Scans the ELF file at path. Returns 0 (with nops 0 for a library without
 * ops), or a negative errno after a message on stderr.
 */
int opscan__run(const char *path, struct opscan **out);
void opscan__free(struct opscan *s);

#endif /* PTG_OPSCAN_H */
