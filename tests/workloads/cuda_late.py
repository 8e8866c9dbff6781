"""Loads the fake CUDA driver (tests/fakecuda) only once released, and calls
it at once: LAUNCHES cuLaunchKernel and SYNCS cuStreamSynchronize, with no
pause for a tracer to catch up, as PyTorch calls libcuda right after mapping
it at its first CUDA use.

usage: cuda_late.py [--wait] [--via-exe | --via OBJ] [--gate-loaded] [--thread] LIB
LIB: a name the loader looks up ("libcuda.so.1", through LD_LIBRARY_PATH)
or a path. --via-exe: loaded by the executable's own ptg_dlopen
(workloads/pylaunch.c and dlopener.c), so that its RUNPATH applies; --via
OBJ: by the ptg_dlopen of the shared library OBJ, loaded at start.
--gate-loaded: once loaded, say "loaded" and wait for a second go before
calling it. --thread: loaded and called by a thread started once released.
"""
import ctypes
import sys
import threading

import gate

LAUNCHES = 1000
SYNCS = 10
STREAM = 0x1000


def load(lib, via):
    """LIB through ctypes, or through the ptg_dlopen of via (a CDLL)."""
    if via is None:
        return ctypes.CDLL(lib)
    dlopen = via.ptg_dlopen
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p]
    handle = dlopen(lib.encode())
    assert handle, f"ptg_dlopen({lib}) failed"
    return ctypes.CDLL(lib, handle=handle)


def run(cu):
    cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    assert cu.cuInit(0) == 0
    for i in range(LAUNCHES):
        # 1 us of GPU time, no host time: a burst, the hardest case for late probes
        assert cu.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, STREAM, None, None) == 0
        if i % (LAUNCHES // SYNCS) == LAUNCHES // SYNCS - 1:
            assert cu.cuStreamSynchronize(STREAM) == 0


def main():
    via = None
    if "--via-exe" in sys.argv:
        via = ctypes.CDLL(None)
    elif "--via" in sys.argv:
        via = ctypes.CDLL(sys.argv[sys.argv.index("--via") + 1])
    if "--wait" in sys.argv:
        gate.wait_for_go()
    if "--thread" in sys.argv:
        th = threading.Thread(target=lambda: run(load(sys.argv[-1], via)))
        th.start()
        th.join()
    else:
        cu = load(sys.argv[-1], via)
        if "--gate-loaded" in sys.argv:
            print("loaded", flush=True)
            sys.stdin.readline()
        run(cu)
    gate.done()


if __name__ == "__main__":
    main()
