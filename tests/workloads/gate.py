"""Start gate for workloads recorded with `record -p`: say ready, wait for go.
And the in-process oracle the recordings are compared with."""
import json
import os
import sys
import threading


def wait_for_go():
    """Blocks in C (a read) so that no Python frame runs while the tracer attaches."""
    print("ready", os.getpid(), flush=True)
    sys.stdin.readline()


def done():
    print("done", flush=True)


def print_oracle(run, filename, new_call=lambda frame: True, threads=False):
    """Runs run() under sys.setprofile (and threading.setprofile with
    threads) and prints, as JSON, the "call" events per function of
    filename ("qualname:firstline" -> count) that new_call accepts."""
    counts = {}

    def profiler(frame, event, arg):
        if event != "call" or frame.f_code.co_filename != filename or not new_call(frame):
            return
        key = f"{frame.f_code.co_qualname}:{frame.f_code.co_firstlineno}"
        counts[key] = counts.get(key, 0) + 1

    if threads:
        threading.setprofile(profiler)
    sys.setprofile(profiler)
    try:
        run()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    print(json.dumps(counts, sort_keys=True))
