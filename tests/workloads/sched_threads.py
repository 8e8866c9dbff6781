"""Threads that are off the CPU for known reasons, once released together:

  sleeper     time.sleep(SLEEP_S) SLEEPS times in sleep_loop()      -> blocked
  reader      os.read() of a pipe in read_pipe(), fed by the main
              thread PIPE_DELAY_S after the release                 -> blocked, woken by main
  hasher0/1   sha256 of HASH_BYTES without the GIL in hash_pinned(),
              both pinned to one CPU                                -> preempted by each other
  spinner     a busy loop of SPIN_S in spin(), alone once the others
              are done (no GIL handoffs)                            -> never blocked
"""
import hashlib
import os
import sys
import threading
import time

import gate

SLEEPS = 10
SLEEP_S = 0.05
PIPE_DELAY_S = 0.3
SPIN_S = 0.3
HASH_BYTES = 96 << 20

start = threading.Event()
alone = threading.Event()
pipe_r, pipe_w = os.pipe()
cpu = min(os.sched_getaffinity(0))


def sleep_loop():
    for _ in range(SLEEPS):
        time.sleep(SLEEP_S)


def read_pipe():
    return os.read(pipe_r, 1)


def spin():
    end, n = time.monotonic() + SPIN_S, 0
    while time.monotonic() < end:
        n += 1
    return n


def spin_alone():
    alone.wait()
    return spin()


def hash_pinned(data):
    os.sched_setaffinity(0, {cpu})  # this thread only
    return hashlib.sha256(data).digest()


def feed_pipe():
    time.sleep(PIPE_DELAY_S)
    os.write(pipe_w, b"x")


def worker(fn, *args):
    start.wait()
    fn(*args)


def main():
    data = b"x" * HASH_BYTES
    jobs = [("sleeper", sleep_loop), ("reader", read_pipe), ("hasher0", hash_pinned, data),
            ("hasher1", hash_pinned, data), ("spinner", spin_alone)]
    threads = [threading.Thread(target=worker, args=job[1:], name=job[0]) for job in jobs]
    for t in threads:
        t.start()
    if "--wait" in sys.argv:
        gate.wait_for_go()
    start.set()
    feed_pipe()
    for t in threads[:4]:
        t.join()
    alone.set()
    threads[4].join()


if __name__ == "__main__":
    main()
    gate.done()
