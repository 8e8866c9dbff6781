// SPDX-License-Identifier: MIT
/*
 * A stand-in for the CUDA driver (libcuda.so.1) for tests on machines with no
 * GPU: the entry points that ptrace-gpu probes, with the driver's C ABI and a
 * small, deterministic amount of work each, so that a test knows what every
 * call must look like in a trace.
 *
 * The "GPU" is a count of pending microseconds per stream (streams are any
 * handle value, 0 included):
 *   - a kernel launch sleeps sharedMemBytes us on the host (the launch cost)
 *     and queues gridDimX us of work on its stream;
 *   - a graph launch queues *(uint64_t *)hGraphExec us;
 *   - a copy or memset queues one us per KiB;
 *   - cuStreamSynchronize sleeps for what its stream has pending and clears
 *     it; cuCtxSynchronize does so for every stream; a synchronous copy for
 *     the default stream (0) plus the copy itself;
 *   - an event handle points at a uint64_t of microseconds:
 *     cuEventSynchronize sleeps that long, cuStreamWaitEvent queues it;
 *   - cuStreamSynchronize of stream 0xbad fails with CUDA_ERROR_INVALID_HANDLE.
 *
 * Where CUDA's cuda.h is present the prototypes are checked against it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef FAKECUDA_HAVE_CUPTI
#include <cupti.h> /* cuda.h, the callback ids and parameter structs */
#elif defined(FAKECUDA_HAVE_CUDA_H)
#include <cuda.h>
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
#define CUDA_SUCCESS 0
#define CUDAAPI
#endif

#define FAKE_EXPORT	    __attribute__((visibility("default")))
#define FAKE_BAD_STREAM	    0xbad
#define FAKE_INVALID_HANDLE 400 /* CUDA_ERROR_INVALID_HANDLE */
#define MAX_STREAMS	    64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t stream;
	uint64_t pending_us;
} streams[MAX_STREAMS];
static int nstreams;

static void sleep_us(uint64_t us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};

	while (nanosleep(&ts, &ts))
		;
}

static uint64_t *pending_of(uintptr_t stream)
{
	for (int i = 0; i < nstreams; i++) {
		if (streams[i].stream == stream)
			return &streams[i].pending_us;
	}
	if (nstreams == MAX_STREAMS)
		return &streams[0].pending_us;
	streams[nstreams].stream = stream;
	return &streams[nstreams++].pending_us;
}

static void queue(CUstream s, uint64_t us)
{
	pthread_mutex_lock(&lock);
	*pending_of((uintptr_t)s) += us;
	pthread_mutex_unlock(&lock);
}

/* Takes what stream s has pending, or every stream's with all set. */
static uint64_t drain(CUstream s, int all)
{
	uint64_t us = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nstreams; i++) {
		if (all || streams[i].stream == (uintptr_t)s) {
			us += streams[i].pending_us;
			streams[i].pending_us = 0;
		}
	}
	pthread_mutex_unlock(&lock);
	return us;
}

/*
 * Where tests/helpers/inject_fakecupti.c (the stand-in libcupti) is loaded
 * RTLD_GLOBAL, every call reports to it from inside, with CUPTI's callback
 * id and parameter struct, as CUPTI's callbacks see the real library's
 * functions (REPORTED). kernel_ns: a launch's kernel, for its activity.
 */
typedef uint64_t (*cupti_enter_fn)(int driver, uint32_t cbid, const void *params);
typedef void (*cupti_exit_fn)(int driver, uint32_t cbid, const void *params, int result,
			      uint64_t start, uint64_t kernel_ns);

static uint64_t cupti_enter(int driver, uint32_t cbid, const void *params)
{
	cupti_enter_fn fn = (cupti_enter_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_enter");

	return fn ? fn(driver, cbid, params) : 0;
}

static void cupti_exit(int driver, uint32_t cbid, const void *params, int result, uint64_t start,
		       uint64_t kernel_ns)
{
	cupti_exit_fn fn = (cupti_exit_fn)dlsym(RTLD_DEFAULT, "fakecupti_api_exit");

	if (fn && start)
		fn(driver, cbid, params, result, start, kernel_ns);
}

#ifdef FAKECUDA_HAVE_CUPTI
/* the parameters as CUPTI gives them (generated_cuda_meta.h), in the call's order */
#define REPORTED(name, kernel_ns, body, ...)                                                       \
	do {                                                                                       \
		name##_params p_ = {__VA_ARGS__};                                                  \
		uint64_t t_ = cupti_enter(1, CUPTI_DRIVER_TRACE_CBID_##name, &p_);                 \
		CUresult r_ = (body);                                                              \
		cupti_exit(1, CUPTI_DRIVER_TRACE_CBID_##name, &p_, r_, t_, (kernel_ns));           \
		return r_;                                                                         \
	} while (0)
#else
#define REPORTED(name, kernel_ns, body, ...) return (body)
#endif

static CUresult launch(unsigned int gridDimX, unsigned int sharedMemBytes, CUstream hStream)
{
	sleep_us(sharedMemBytes);
	queue(hStream, gridDimX);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    CUstream hStream, void **kernelParams, void **extra)
{
	REPORTED(cuLaunchKernel, gridDimX * 1000ull, launch(gridDimX, sharedMemBytes, hStream), f,
		 gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
		 hStream, kernelParams, extra);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams, void **extra)
{
	REPORTED(cuLaunchKernel_ptsz, gridDimX * 1000ull, launch(gridDimX, sharedMemBytes, hStream),
		 f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
		 hStream, kernelParams, extra);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
	REPORTED(cuLaunchCooperativeKernel, gridDimX * 1000ull,
		 launch(gridDimX, sharedMemBytes, hStream), f, gridDimX, gridDimY, gridDimZ,
		 blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
					      void **kernelParams, void **extra)
{
	REPORTED(cuLaunchKernelEx, config->gridDimX * 1000ull,
		 launch(config->gridDimX, config->sharedMemBytes, config->hStream), config, f,
		 kernelParams, extra);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
						   void **kernelParams, void **extra)
{
	REPORTED(cuLaunchKernelEx_ptsz, config->gridDimX * 1000ull,
		 launch(config->gridDimX, config->sharedMemBytes, config->hStream), config, f,
		 kernelParams, extra);
}

static CUresult queued(CUstream s, uint64_t us)
{
	queue(s, us);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	REPORTED(cuGraphLaunch, 0, queued(hStream, *(const uint64_t *)hGraphExec), hGraphExec,
		 hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
					   CUstream hStream)
{
	REPORTED(cuMemcpyAsync, 0, queued(hStream, ByteCount >> 10), dst, src, ByteCount, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
						  size_t ByteCount, CUstream hStream)
{
	REPORTED(cuMemcpyHtoDAsync_v2, 0, queued(hStream, ByteCount >> 10), dstDevice, srcHost,
		 ByteCount, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
						  size_t ByteCount, CUstream hStream)
{
	REPORTED(cuMemcpyDtoHAsync_v2, 0, queued(hStream, ByteCount >> 10), dstHost, srcDevice,
		 ByteCount, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
						  size_t ByteCount, CUstream hStream)
{
	REPORTED(cuMemcpyDtoDAsync_v2, 0, queued(hStream, ByteCount >> 10), dstDevice, srcDevice,
		 ByteCount, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
					     CUstream hStream)
{
	REPORTED(cuMemsetD8Async, 0, queued(hStream, N >> 10), dstDevice, uc, N, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
					      CUstream hStream)
{
	REPORTED(cuMemsetD32Async, 0, queued(hStream, (N * 4) >> 10), dstDevice, ui, N, hStream);
}

static CUresult slept(uint64_t us)
{
	sleep_us(us);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
					     size_t ByteCount)
{
	REPORTED(cuMemcpyHtoD_v2, 0, slept(drain(0, 0) + (ByteCount >> 10)), dstDevice, srcHost,
		 ByteCount);
}

static CUresult stream_sync(CUstream hStream)
{
	if ((uintptr_t)hStream == FAKE_BAD_STREAM)
		return FAKE_INVALID_HANDLE;
	return slept(drain(hStream, 0));
}

FAKE_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	REPORTED(cuStreamSynchronize, 0, stream_sync(hStream), hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
	REPORTED(cuStreamSynchronize_ptsz, 0, slept(drain(hStream, 0)), hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
#ifdef FAKECUDA_HAVE_CUPTI
	/* no parameters: CUPTI has no struct for them */
	uint64_t t = cupti_enter(1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, NULL);
	CUresult r = slept(drain(0, 1));

	cupti_exit(1, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, NULL, r, t, 0);
	return r;
#else
	return slept(drain(0, 1));
#endif
}

FAKE_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	REPORTED(cuEventRecord, 0, CUDA_SUCCESS, hEvent, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	REPORTED(cuEventSynchronize, 0, slept(*(const uint64_t *)hEvent), hEvent);
}

FAKE_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	REPORTED(cuStreamWaitEvent, 0, queued(hStream, *(const uint64_t *)hEvent), hStream, hEvent,
		 Flags);
}
