// SPDX-License-Identifier: MIT
/*
 * A stand-in for the CUDA runtime (libcudart.so.12) over the fake driver:
 * each runtime entry point calls the matching driver entry point, as the real
 * runtime does, so a trace shows the driver call nested in the runtime call.
 * The work done is the driver's (see fakecuda.c).
 *
 * Where CUDA's cuda_runtime_api.h is present the prototypes are checked
 * against it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#ifdef FAKECUDA_HAVE_CUDA_H
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUlaunchAttribute_st CUlaunchAttribute;
typedef struct CUlaunchConfig_st {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;
typedef int cudaError_t;
typedef CUstream cudaStream_t;
typedef CUevent cudaEvent_t;
typedef CUgraphExec cudaGraphExec_t;
typedef struct cudaLaunchAttribute_st cudaLaunchAttribute;
enum cudaMemcpyKind { cudaMemcpyDefault = 4 };
typedef struct dim3 {
	unsigned int x, y, z;
} dim3;
typedef struct cudaLaunchConfig_st {
	dim3 gridDim;
	dim3 blockDim;
	size_t dynamicSmemBytes;
	cudaStream_t stream;
	cudaLaunchAttribute *attrs;
	unsigned int numAttrs;
} cudaLaunchConfig_t;
#define CUDAAPI
#define CUDARTAPI

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			void **kernelParams, void **extra);
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
			  void **extra);
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuCtxSynchronize(void);
CUresult cuEventSynchronize(CUevent hEvent);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
#endif

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);

#define FAKE_EXPORT __attribute__((visibility("default")))

/*
 * Where tests/helpers/inject_fakecupti.c (the stand-in libcupti) is loaded
 * RTLD_GLOBAL, launches report to it from inside the call, as CUPTI's
 * callbacks do inside the real library's functions.
 */
typedef uint64_t (*cupti_enter_fn)(void);
typedef void (*cupti_exit_fn)(int driver, uint32_t cbid, uint64_t start, uint64_t kernel_ns);

static uint64_t cupti_enter(void)
{
	cupti_enter_fn fn = (cupti_enter_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_enter");

	return fn ? fn() : 0;
}

static void cupti_exit(int driver, uint32_t cbid, uint64_t start, uint64_t kernel_ns)
{
	cupti_exit_fn fn = (cupti_exit_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_exit");

	if (fn && start)
		fn(driver, cbid, start, kernel_ns);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
						   void **args, size_t sharedMem,
						   cudaStream_t stream)
{
	uint64_t t = cupti_enter();
	cudaError_t r = (cudaError_t)cuLaunchKernel(
	    (CUfunction)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y, blockDim.z,
	    (unsigned int)sharedMem, (CUstream)stream, args, NULL);

	cupti_exit(0, 211 /* cudaLaunchKernel_v7000 */, t, gridDim.x * 1000ull);
	return r;
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 gridDim,
							dim3 blockDim, void **args,
							size_t sharedMem, cudaStream_t stream)
{
	uint64_t t = cupti_enter();
	cudaError_t r = (cudaError_t)cuLaunchKernel_ptsz(
	    (CUfunction)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y, blockDim.z,
	    (unsigned int)sharedMem, (CUstream)stream, args, NULL);

	cupti_exit(0, 214 /* cudaLaunchKernel_ptsz_v7000 */, t, gridDim.x * 1000ull);
	return r;
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *config,
						      const void *func, void **args)
{
	CUlaunchConfig c = {
	    .gridDimX = config->gridDim.x,
	    .gridDimY = config->gridDim.y,
	    .gridDimZ = config->gridDim.z,
	    .blockDimX = config->blockDim.x,
	    .blockDimY = config->blockDim.y,
	    .blockDimZ = config->blockDim.z,
	    .sharedMemBytes = (unsigned int)config->dynamicSmemBytes,
	    .hStream = (CUstream)config->stream,
	};

	return (cudaError_t)cuLaunchKernelEx(&c, (CUfunction)func, args, NULL);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	return (cudaError_t)cuGraphLaunch((CUgraphExec)graphExec, (CUstream)stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count,
						  enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return (cudaError_t)cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, count,
					  (CUstream)stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count,
						  cudaStream_t stream)
{
	return (cudaError_t)cuMemsetD8Async((CUdeviceptr)devPtr, (unsigned char)value, count,
					    (CUstream)stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
	return (cudaError_t)cuStreamSynchronize((CUstream)stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
	return (cudaError_t)cuCtxSynchronize();
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
	return (cudaError_t)cuEventSynchronize((CUevent)event);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
						      unsigned int flags)
{
	return (cudaError_t)cuStreamWaitEvent((CUstream)stream, (CUevent)event, flags);
}
