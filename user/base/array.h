/* SPDX-License-Identifier: MIT */
/* Arrays that grow by doubling. */
#ifndef PTG_ARRAY_H
#define PTG_ARRAY_H

#include <stddef.h>

/*
 * Makes room for need elements of elem bytes in *arr, of *cap now: doubles
 * *cap (from 16) until it holds need, and zeroes the new elements. Returns 0
 * or -ENOMEM, leaving *arr and *cap as they were.
 */
int array_grow(void **arr, size_t *cap, size_t need, size_t elem);

/*
 * qsort() of n elements at arr, where arr may be NULL when n is 0 (an array
 * nothing was added to): qsort() itself must never be given NULL.
 */
void array_sort(void *arr, size_t n, size_t elem, int (*cmp)(const void *, const void *));

#endif /* PTG_ARRAY_H */
