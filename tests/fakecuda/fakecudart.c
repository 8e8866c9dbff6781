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

#ifdef FAKECUDA_HAVE_CUPTI
#include <cuda_runtime_api.h>
#include <cupti.h> /* cuda.h, the callback ids and parameter structs */
#elif defined(FAKECUDA_HAVE_CUDA_H)
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
 * RTLD_GLOBAL, every call reports to it from inside, with CUPTI's callback
 * id and parameter struct, as CUPTI's callbacks see the real library's
 * functions (REPORTED). kernel_ns: a launch's kernel, for its activity.
 */
typedef uint64_t (*cupti_enter_fn)(int driver, uint32_t cbid, const void *params);
typedef void (*cupti_exit_fn)(int driver, uint32_t cbid, const void *params, int result,
			      uint64_t start, uint64_t kernel_ns);

static uint64_t cupti_enter(uint32_t cbid, const void *params)
{
	cupti_enter_fn fn = (cupti_enter_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_enter");

	return fn ? fn(0, cbid, params) : 0;
}

static void cupti_exit(uint32_t cbid, const void *params, int result, uint64_t start,
		       uint64_t kernel_ns)
{
	cupti_exit_fn fn = (cupti_exit_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_exit");

	if (fn && start)
		fn(0, cbid, params, result, start, kernel_ns);
}

#ifdef FAKECUDA_HAVE_CUPTI
/* the parameters as CUPTI gives them (generated_cuda_runtime_api_meta.h), in the call's order */
#define REPORTED(cbid, kernel_ns, body, ...)                                                       \
	do {                                                                                       \
		cbid##_params p_ = {__VA_ARGS__};                                                  \
		uint64_t t_ = cupti_enter(CUPTI_RUNTIME_TRACE_CBID_##cbid, &p_);                   \
		cudaError_t r_ = (cudaError_t)(body);                                              \
		cupti_exit(CUPTI_RUNTIME_TRACE_CBID_##cbid, &p_, r_, t_, (kernel_ns));             \
		return r_;                                                                         \
	} while (0)
#else
#define REPORTED(cbid, kernel_ns, body, ...) return (cudaError_t)(body)
#endif

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim,
						   void **args, size_t sharedMem,
						   cudaStream_t stream)
{
	REPORTED(cudaLaunchKernel_v7000, gridDim.x * 1000ull,
		 cuLaunchKernel((CUfunction)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x,
				blockDim.y, blockDim.z, (unsigned int)sharedMem, (CUstream)stream,
				args, NULL),
		 func, gridDim, blockDim, args, sharedMem, stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 gridDim,
							dim3 blockDim, void **args,
							size_t sharedMem, cudaStream_t stream)
{
	REPORTED(cudaLaunchKernel_ptsz_v7000, gridDim.x * 1000ull,
		 cuLaunchKernel_ptsz((CUfunction)func, gridDim.x, gridDim.y, gridDim.z, blockDim.x,
				     blockDim.y, blockDim.z, (unsigned int)sharedMem,
				     (CUstream)stream, args, NULL),
		 func, gridDim, blockDim, args, sharedMem, stream);
}

static CUresult launch_ex(const cudaLaunchConfig_t *config, const void *func, void **args)
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

	return cuLaunchKernelEx(&c, (CUfunction)func, args, NULL);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *config,
						      const void *func, void **args)
{
	REPORTED(cudaLaunchKernelExC_v11060, config->gridDim.x * 1000ull,
		 launch_ex(config, func, args), config, func, args);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	REPORTED(cudaGraphLaunch_v10000, 0, cuGraphLaunch((CUgraphExec)graphExec, (CUstream)stream),
		 graphExec, stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count,
						  enum cudaMemcpyKind kind, cudaStream_t stream)
{
	REPORTED(cudaMemcpyAsync_v3020, 0,
		 cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, count, (CUstream)stream), dst,
		 src, count, kind, stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count,
						  cudaStream_t stream)
{
	REPORTED(
	    cudaMemsetAsync_v3020, 0,
	    cuMemsetD8Async((CUdeviceptr)devPtr, (unsigned char)value, count, (CUstream)stream),
	    devPtr, value, count, stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
	REPORTED(cudaStreamSynchronize_v3020, 0, cuStreamSynchronize((CUstream)stream), stream);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
#ifdef FAKECUDA_HAVE_CUPTI
	/* no parameters: CUPTI has no struct for them */
	uint64_t t = cupti_enter(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, NULL);
	cudaError_t r = (cudaError_t)cuCtxSynchronize();

	cupti_exit(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, NULL, r, t, 0);
	return r;
#else
	return (cudaError_t)cuCtxSynchronize();
#endif
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
	REPORTED(cudaEventSynchronize_v3020, 0, cuEventSynchronize((CUevent)event), event);
}

FAKE_EXPORT cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
						      unsigned int flags)
{
	REPORTED(cudaStreamWaitEvent_v3020, 0,
		 cuStreamWaitEvent((CUstream)stream, (CUevent)event, flags), stream, event, flags);
}
