"""Start gate for workloads recorded with `record -p`: say ready, wait for go."""
import os
import sys


def wait_for_go():
    """Blocks in C (a read) so that no Python frame runs while the tracer attaches."""
    print("ready", os.getpid(), flush=True)
    sys.stdin.readline()


def done():
    print("done", flush=True)
