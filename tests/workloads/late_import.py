"""Threads of a program that imports threading only after the tracer attached.

Until the gate nothing but sys and os is imported: no threading module for
an agent to hook (3.11's profile function is per thread, and threading's
profile hook is what puts it on a new one). After it: threading is
imported, three threads call leaf() recursively, then the main thread
does. Run with --oracle to count the calls in-process with sys.setprofile
and threading.setprofile instead, printed as JSON.
"""
import os
import sys


def leaf(n):
    return n if n < 2 else leaf(n - 1) + leaf(n - 2)


def worker():
    for _ in range(3):
        leaf(10)


def run():
    import threading

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    leaf(8)


if __name__ == "__main__":
    if "--oracle" in sys.argv:
        import gate

        gate.print_oracle(run, __file__, threads=True)
    else:
        if "--wait" in sys.argv:
            # blocks in C: no Python frame runs while the tracer attaches
            print("ready", os.getpid(), flush=True)
            sys.stdin.readline()
        run()
        print("done", flush=True)
