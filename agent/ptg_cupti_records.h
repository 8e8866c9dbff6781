/* SPDX-License-Identifier: MIT */
/*
 * The activity record versions this build decodes: CUPTI fills the newest
 * version of each struct that its release knows, so the agent (which checks
 * every record's size against CUPTI's own walk of the buffer) and the loader
 * (which decodes the fields) must both use these. CMake builds the agent only
 * if this header compiles against the CUPTI it found.
 */
#ifndef PTG_CUPTI_RECORDS_H
#define PTG_CUPTI_RECORDS_H

/* not <cupti.h>: user/gpu/cupti.h has that name in the loader's include path */
#include <cupti_activity.h>
#include <cupti_version.h>

#if CUPTI_API_VERSION >= 130000
/* CUDA 13 */
typedef CUpti_ActivityKernel10 ptg_cupti_kernel;
typedef CUpti_ActivityMemcpy6 ptg_cupti_memcpy;
typedef CUpti_ActivityMemset4 ptg_cupti_memset;
typedef CUpti_ActivitySynchronization2 ptg_cupti_sync;
#else
/* CUDA 12: the field names used here are the same in these older versions */
typedef CUpti_ActivityKernel9 ptg_cupti_kernel;
typedef CUpti_ActivityMemcpy5 ptg_cupti_memcpy;
typedef CUpti_ActivityMemset4 ptg_cupti_memset;
typedef CUpti_ActivitySynchronization ptg_cupti_sync;
#endif
typedef CUpti_ActivityAPI ptg_cupti_api;

/* Size of one record of kind as this build knows it; 0 for kinds it does not decode. */
static inline size_t ptg_cupti_record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return sizeof(ptg_cupti_kernel);
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		return sizeof(ptg_cupti_memcpy);
	case CUPTI_ACTIVITY_KIND_MEMSET:
		return sizeof(ptg_cupti_memset);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return sizeof(ptg_cupti_sync);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER:
		return sizeof(ptg_cupti_api);
	default:
		return 0;
	}
}

#endif /* PTG_CUPTI_RECORDS_H */
