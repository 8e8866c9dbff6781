"""Loads the fake CUDA driver (tests/fakecuda) only once released, and calls
it at once: LAUNCHES cuLaunchKernel and SYNCS cuStreamSynchronize, with no
pause for a tracer to catch up, as PyTorch calls libcuda right after mapping
it at its first CUDA use.

usage: cuda_late.py [--wait] LIB
LIB: a name the loader looks up ("libcuda.so.1", through LD_LIBRARY_PATH)
or a path.
"""
import ctypes
import sys

import gate

LAUNCHES = 1000
SYNCS = 10
STREAM = 0x1000


def run(lib):
    cu = ctypes.CDLL(lib)
    cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    assert cu.cuInit(0) == 0
    for i in range(LAUNCHES):
        # 1 us of GPU time, no host time: a burst, the hardest case for late probes
        assert cu.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, STREAM, None, None) == 0
        if i % (LAUNCHES // SYNCS) == LAUNCHES // SYNCS - 1:
            assert cu.cuStreamSynchronize(STREAM) == 0


def main():
    if "--wait" in sys.argv:
        gate.wait_for_go()
    run(sys.argv[-1])
    gate.done()


if __name__ == "__main__":
    main()
