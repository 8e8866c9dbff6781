"""A process of a multi-process recording that drives the fake CUDA driver
(tests/fakecuda): LAUNCHES cuLaunchKernel and SYNCS cuStreamSynchronize,
its own numbers, so that each process's calls can be told apart.

usage: cuda_multi.py [--wait] [--preload] [--fork] [--exec] LAUNCHES SYNCS
--preload: map libcuda.so.1 (through LD_LIBRARY_PATH) at start, before
"ready"; else only once released, as PyTorch maps it at its first CUDA use.
--fork: once released, fork a child that makes CHILD calls (loading the
library itself if the parent has not); --exec: fork a child that execs this
script again for EXEC calls. The parent makes its own calls after theirs.
Each process prints "ROLE PID" (main, child, exec).
"""
import ctypes
import os
import sys

import gate

LIB = "libcuda.so.1"
STREAM = 0x2000
CHILD = (200, 2)
EXEC = (150, 3)


def run(launches, syncs):
    cu = ctypes.CDLL(LIB)
    cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    cu.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    assert cu.cuInit(0) == 0
    for i in range(launches):
        assert cu.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, STREAM, None, None) == 0
        if i % (launches // syncs) == launches // syncs - 1:
            assert cu.cuStreamSynchronize(STREAM) == 0


def child(role, argv):
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        return
    try:
        if argv:
            os.execv(sys.executable, [sys.executable, *argv])
        print(role, os.getpid(), flush=True)
        run(*CHILD)
        sys.stdout.flush()
    finally:
        os._exit(0)


def main():
    launches, syncs = int(sys.argv[-2]), int(sys.argv[-1])
    if "--preload" in sys.argv:
        ctypes.CDLL(LIB)
    if "--wait" in sys.argv:
        gate.wait_for_go()
    role = "exec" if os.environ.get("CUDA_MULTI_EXEC") else "main"
    print(role, os.getpid(), flush=True)
    if "--fork" in sys.argv:
        child("child", None)
    if "--exec" in sys.argv:
        os.environ["CUDA_MULTI_EXEC"] = "1"
        child("exec", [os.path.abspath(__file__), *map(str, EXEC)])
    run(launches, syncs)
    if role == "main":
        gate.done()


if __name__ == "__main__":
    main()
