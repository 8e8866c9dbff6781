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

#ifdef FAKECUDA_HAVE_CUDA_H
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
	uint64_t t = cupti_enter();
	CUresult r = launch(gridDimX, sharedMemBytes, hStream);

	cupti_exit(1, 307 /* cuLaunchKernel */, t, gridDimX * 1000ull);
	return r;
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams, void **extra)
{
	uint64_t t = cupti_enter();
	CUresult r = launch(gridDimX, sharedMemBytes, hStream);

	cupti_exit(1, 442 /* cuLaunchKernel_ptsz */, t, gridDimX * 1000ull);
	return r;
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
	return launch(gridDimX, sharedMemBytes, hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
					      void **kernelParams, void **extra)
{
	return launch(config->gridDimX, config->sharedMemBytes, config->hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
						   void **kernelParams, void **extra)
{
	return launch(config->gridDimX, config->sharedMemBytes, config->hStream);
}

FAKE_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	queue(hStream, *(const uint64_t *)hGraphExec);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
					   CUstream hStream)
{
	queue(hStream, ByteCount >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
						  size_t ByteCount, CUstream hStream)
{
	queue(hStream, ByteCount >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice,
						  size_t ByteCount, CUstream hStream)
{
	queue(hStream, ByteCount >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
						  size_t ByteCount, CUstream hStream)
{
	queue(hStream, ByteCount >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
					     CUstream hStream)
{
	queue(hStream, N >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
					      CUstream hStream)
{
	queue(hStream, (N * 4) >> 10);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost,
					     size_t ByteCount)
{
	sleep_us(drain(0, 0) + (ByteCount >> 10));
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	if ((uintptr_t)hStream == FAKE_BAD_STREAM)
		return FAKE_INVALID_HANDLE;
	sleep_us(drain(hStream, 0));
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
	sleep_us(drain(hStream, 0));
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
	sleep_us(drain(0, 1));
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	sleep_us(*(const uint64_t *)hEvent);
	return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	queue(hStream, *(const uint64_t *)hEvent);
	return CUDA_SUCCESS;
}
