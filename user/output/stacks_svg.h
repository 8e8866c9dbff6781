/* SPDX-License-Identifier: MIT */
/* The interactive SVG of a stack trie (hover, click to zoom, search). */
#ifndef PTG_STACKS_SVG_H
#define PTG_STACKS_SVG_H

#include <stdio.h>

#include "model/stacks.h"

/*
 * Writes st to out; what names the weight in the heading ("on-CPU time"),
 * title heads the image. Sorts st's children by name. Returns 0 or -ENOMEM.
 */
int stacks__write_svg(struct stacks *st, FILE *out, const char *what, const char *title);

#endif /* PTG_STACKS_SVG_H */
