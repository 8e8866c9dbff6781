// SPDX-License-Identifier: MIT
#include <string.h>

#include "trace/cuda_api_class.h"

/*
 * By substring, so that the driver's (cuLaunchKernel), the runtime's
 * (cudaLaunchKernel) and Kineto's spellings of one API fall in one class.
 */
enum cuda_api_class cuda_api_classify(const char *name)
{
	if (strstr(name, "GraphLaunch"))
		return CUDA_API_GRAPH;
	if (strstr(name, "LaunchHostFunc"))
		return CUDA_API_OTHER;
	if (strstr(name, "Launch"))
		return CUDA_API_LAUNCH;
	if (strstr(name, "Memcpy"))
		return CUDA_API_MEMCPY;
	if (strstr(name, "Memset"))
		return CUDA_API_MEMSET;
	if (strstr(name, "Synchronize") || strstr(name, "WaitEvent"))
		return CUDA_API_SYNC;
	if (strstr(name, "EventRecord"))
		return CUDA_API_EVENT;
	return CUDA_API_OTHER;
}
