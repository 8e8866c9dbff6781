"""A Python program that execs an interpreter: says "ready PID", waits for a
line, calls g 50 times, then execs argv[1] on this file with --child, which
calls f 300 times and says "done". For `record -p` of a process that runs
Python and execs another (tests/integration/test_exec_python.py)."""
import os
import sys


def g(n):
    return n


def f(n):
    return n


if "--child" in sys.argv:
    for i in range(300):
        f(i)
    print("done", flush=True)
else:
    print("ready", os.getpid(), flush=True)
    sys.stdin.readline()
    for i in range(50):
        g(i)
    sys.stdout.flush()
    os.execv(sys.argv[1], [sys.argv[1], __file__, "--child"])
