/* SPDX-License-Identifier: MIT */
/*
 * What a CUDA call does, from its API name alone (driver, runtime or
 * Kineto's): no probe and no trace needed, so that any report can use it.
 */
#ifndef PTG_CUDA_API_CLASS_H
#define PTG_CUDA_API_CLASS_H

enum cuda_api_class {
	CUDA_API_LAUNCH,
	CUDA_API_GRAPH,
	CUDA_API_MEMCPY,
	CUDA_API_MEMSET,
	CUDA_API_SYNC,
	CUDA_API_EVENT,
	CUDA_API_OTHER,
	CUDA_API_NR_CLASSES,
};

enum cuda_api_class cuda_api_classify(const char *name);

#endif /* PTG_CUDA_API_CLASS_H */
