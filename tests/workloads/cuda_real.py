"""Calls NVIDIA's own CUDA runtime (libcudart) and driver stub (stubs/libcuda.so)
on a machine with no GPU driver: every call fails (no driver, or the stub's
CUDA_ERROR_STUB_LIBRARY), but it runs NVIDIA's code, so the probes see the
real libraries' symbols and argument layouts. Loaded after the start gate,
like cuda_driver.py.

usage: cuda_real.py [--wait] LIBCUDART STUB_LIBCUDA
"""
import ctypes
import sys

import gate

STREAM_RT = 0x1234
STREAM_DRV = 0x5678
LAUNCHES = 3


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def runtime_calls(rt):
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_void_p]
    for _ in range(LAUNCHES):
        assert rt.cudaLaunchKernel(None, Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, STREAM_RT)
    assert rt.cudaStreamSynchronize(ctypes.c_void_p(STREAM_RT))


def driver_calls(cu):
    cu.cuLaunchKernel.argtypes = ([ctypes.c_void_p] + [ctypes.c_uint] * 7
                                  + [ctypes.c_void_p] * 3)
    for _ in range(LAUNCHES):
        assert cu.cuLaunchKernel(None, 1, 1, 1, 32, 1, 1, 0, STREAM_DRV, None, None)
    assert cu.cuStreamSynchronize(ctypes.c_void_p(STREAM_DRV))


def main():
    if "--wait" in sys.argv:
        gate.wait_for_go()
    rt = ctypes.CDLL(sys.argv[-2])
    cu = ctypes.CDLL(sys.argv[-1])
    if "--wait" in sys.argv:
        print("loaded", flush=True)
        sys.stdin.readline()
    runtime_calls(rt)
    driver_calls(cu)


if __name__ == "__main__":
    main()
    gate.done()
