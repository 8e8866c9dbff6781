"""Off-CPU time for the kernel matrix (tests/kernels/guest.py), small enough
for an emulated machine: once released, the main thread sleeps NAPS times
NAP_S in nap(), then blocks in read_pipe() on a pipe that the feeder thread
writes PIPE_DELAY_S after it starts.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
import gate  # noqa: E402

NAPS = 8
NAP_S = 0.05
PIPE_DELAY_S = 0.2


def nap():
    time.sleep(NAP_S)


def naps():
    for _ in range(NAPS):
        nap()


def feed(fd):
    time.sleep(PIPE_DELAY_S)
    os.write(fd, b"x")


def read_pipe(fd):
    return os.read(fd, 1)


def main():
    r, w = os.pipe()
    if "--wait" in sys.argv:
        gate.wait_for_go()
    naps()
    feeder = threading.Thread(target=feed, args=(w,), name="feeder")
    feeder.start()
    read_pipe(r)
    feeder.join()


if __name__ == "__main__":
    main()
    gate.done()
