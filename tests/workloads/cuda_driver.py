"""Drives the fake CUDA driver and runtime (tests/fakecuda) through ctypes.

The libraries are loaded only once the workload is released, so that they are
mapped after recording started, as PyTorch maps libcuda at its first CUDA
call. Then it waits again (a second line on stdin) so that a test can let the
tracer probe them first, and makes the calls of PLAN: a known number per
entry point, on known streams, each in its own Python function.

With --cupti, it starts the CUPTI agent first, as the real libcuda's cuInit
does under CUDA_INJECTION64_PATH (the stand-in libcupti.so.13 on
LD_LIBRARY_PATH, which the fake libraries report every call to); with
--cupti-late, only after its first calls (launch_kernels), which the
uprobes then have.

usage: cuda_driver.py [--wait] [--cupti | --cupti-late] LIBDIR
"""
import ctypes
import os
import sys
import time

import gate

STREAM_A = 0x1000
STREAM_B = 0x2000
STREAM_RT = 0x3000
BAD_STREAM = 0xBAD
HOST_US = 300      # host-side cost of each launch (sharedMemBytes)
KERNEL_US = 2000   # GPU time of each kernel (gridDimX)
GRAPH_US = 7000
EVENT_US = 4000
COPY_BYTES = 64 << 10  # 64 us of GPU time each
SET_ELEMS = 8 << 10    # cuMemsetD32Async: 32 KiB, 32 us

# Calls per entry point, the function making them, and their stream. The
# runtime calls each make one driver call, which the trace nests in them.
PLAN = [
    ("cuLaunchKernel", "launch_kernels", STREAM_A, 10),
    ("cuLaunchKernel_ptsz", "launch_kernels", STREAM_B, 5),
    ("cuLaunchKernelEx", "launch_kernels", STREAM_B, 3),
    ("cuLaunchCooperativeKernel", "launch_kernels", STREAM_A, 2),
    ("cuGraphLaunch", "launch_graph", STREAM_B, 1),
    ("cuMemcpyHtoDAsync_v2", "copy_and_set", STREAM_A, 2),
    ("cuMemcpyDtoHAsync_v2", "copy_and_set", STREAM_B, 1),
    ("cuMemcpyDtoDAsync_v2", "copy_and_set", STREAM_A, 1),
    ("cuMemsetD32Async", "copy_and_set", STREAM_B, 1),
    ("cuStreamWaitEvent", "wait_for_gpu", STREAM_A, 1),
    ("cuStreamSynchronize", "wait_for_gpu", STREAM_A, 1),
    ("cuStreamSynchronize", "wait_for_gpu", STREAM_B, 1),
    ("cuStreamSynchronize", "fail_sync", BAD_STREAM, 1),
    ("cuEventSynchronize", "wait_for_gpu", 0, 1),
    ("cuCtxSynchronize", "wait_for_gpu", 0, 1),
    ("cudaLaunchKernel", "runtime_calls", STREAM_RT, 4),
    ("cudaLaunchKernelExC", "runtime_calls", STREAM_RT, 2),
    ("cudaMemcpyAsync", "runtime_calls", STREAM_RT, 1),
    ("cudaStreamSynchronize", "runtime_calls", STREAM_RT, 1),
]

# What each stream has pending when it is synchronized (us).
PENDING_A = 12 * KERNEL_US + 3 * (COPY_BYTES >> 10) + EVENT_US
PENDING_B = 8 * KERNEL_US + GRAPH_US + (COPY_BYTES >> 10) + (SET_ELEMS * 4 >> 10)
PENDING_RT = 6 * KERNEL_US + (COPY_BYTES >> 10)


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class CudaLaunchConfig(ctypes.Structure):
    _fields_ = [("gridDim", Dim3), ("blockDim", Dim3), ("dynamicSmemBytes", ctypes.c_size_t),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def load(libdir):
    rt = ctypes.CDLL(os.path.join(libdir, "libcudart.so.12"))
    cu = ctypes.CDLL(os.path.join(libdir, "libcuda.so.1"))
    launch_args = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    cu.cuLaunchKernel.argtypes = launch_args
    cu.cuLaunchKernel_ptsz.argtypes = launch_args
    cu.cuLaunchCooperativeKernel.argtypes = launch_args[:-1]
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_void_p]
    for name in ("cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2",
                 "cuMemsetD32Async"):
        getattr(cu, name).argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_size_t, ctypes.c_int,
                                                           ctypes.c_void_p]
    return cu, rt


def launch_kernels(cu):
    grid = (KERNEL_US, 1, 1, 128, 1, 1, HOST_US)
    for _ in range(10):
        assert cu.cuLaunchKernel(None, *grid, STREAM_A, None, None) == 0
    for _ in range(5):
        assert cu.cuLaunchKernel_ptsz(None, *grid, STREAM_B, None, None) == 0
    config = CUlaunchConfig(KERNEL_US, 1, 1, 128, 1, 1, HOST_US, STREAM_B, None, 0)
    for _ in range(3):
        assert cu.cuLaunchKernelEx(ctypes.byref(config), None, None, None) == 0
    for _ in range(2):
        assert cu.cuLaunchCooperativeKernel(None, *grid, STREAM_A, None) == 0


def launch_graph(cu):
    graph = ctypes.c_uint64(GRAPH_US)
    assert cu.cuGraphLaunch(ctypes.byref(graph), ctypes.c_void_p(STREAM_B)) == 0


def copy_and_set(cu):
    assert cu.cuMemcpyHtoDAsync_v2(0xd000, 0, COPY_BYTES, STREAM_A) == 0
    assert cu.cuMemcpyHtoDAsync_v2(0xd000, 0, COPY_BYTES, STREAM_A) == 0
    assert cu.cuMemcpyDtoHAsync_v2(0, 0xd000, COPY_BYTES, STREAM_B) == 0
    assert cu.cuMemcpyDtoDAsync_v2(0xd000, 0xe000, COPY_BYTES, STREAM_A) == 0
    assert cu.cuMemsetD32Async(0xd000, 0, SET_ELEMS, STREAM_B) == 0


def wait_for_gpu(cu):
    event = ctypes.c_uint64(EVENT_US)
    assert cu.cuStreamWaitEvent(ctypes.c_void_p(STREAM_A), ctypes.byref(event), 0) == 0
    assert cu.cuStreamSynchronize(ctypes.c_void_p(STREAM_A)) == 0
    assert cu.cuStreamSynchronize(ctypes.c_void_p(STREAM_B)) == 0
    assert cu.cuEventSynchronize(ctypes.byref(event)) == 0
    assert cu.cuCtxSynchronize() == 0


def fail_sync(cu):
    return cu.cuStreamSynchronize(ctypes.c_void_p(BAD_STREAM))


def runtime_calls(rt):
    grid, block = Dim3(KERNEL_US, 1, 1), Dim3(128, 1, 1)
    for _ in range(4):
        assert rt.cudaLaunchKernel(None, grid, block, None, HOST_US, STREAM_RT) == 0
    config = CudaLaunchConfig(grid, block, HOST_US, STREAM_RT, None, 0)
    for _ in range(2):
        assert rt.cudaLaunchKernelExC(ctypes.byref(config), None, None) == 0
    assert rt.cudaMemcpyAsync(0xd000, 0, COPY_BYTES, 4, STREAM_RT) == 0
    assert rt.cudaStreamSynchronize(ctypes.c_void_p(STREAM_RT)) == 0


def start_cupti_agent():
    ctypes.CDLL("libcupti.so.13", mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()


def main():
    libdir = sys.argv[-1]
    if "--wait" in sys.argv:
        gate.wait_for_go()
    if "--cupti" in sys.argv:
        start_cupti_agent()
        time.sleep(0.5)  # record takes the agent's calls before the libraries come
    cu, rt = load(libdir)
    assert cu.cuInit(0) == 0
    if "--wait" in sys.argv:
        print("loaded", flush=True)
        sys.stdin.readline()
    launch_kernels(cu)
    if "--cupti-late" in sys.argv:
        start_cupti_agent()
        time.sleep(0.5)  # and record takes them over from the uprobes
    launch_graph(cu)
    copy_and_set(cu)
    wait_for_gpu(cu)
    assert fail_sync(cu) == 400
    runtime_calls(rt)


if __name__ == "__main__":
    main()
    gate.done()
