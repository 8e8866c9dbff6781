/* SPDX-License-Identifier: MIT */
/* The names of Kineto's "M" events (trace_kineto.h). */
#include "trace/trace_kineto.h"

const char *const kineto_meta_names[KINETO_M_NR] = {
    [KINETO_M_THREAD_NAME] = "thread_name",
    [KINETO_M_PROCESS_NAME] = "process_name",
    [KINETO_M_PROCESS_LABELS] = "process_labels",
    [KINETO_M_PROCESS_SORT_INDEX] = "process_sort_index",
    [KINETO_M_THREAD_SORT_INDEX] = "thread_sort_index",
};
