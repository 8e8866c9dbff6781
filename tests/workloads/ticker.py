"""Prints a deterministic sequence, one value every 10 ms: tick(i) = i * i % 97.

Used to show that a target runs on unchanged while, and after, it is traced.
"""
import sys
import time

import gate


def tick(i):
    return i * i % 97


def main(n):
    for i in range(n):
        print(tick(i), flush=True)
        time.sleep(0.01)


if __name__ == "__main__":
    n = next((int(a) for a in sys.argv[1:] if a.isdigit()), 300)
    if "--wait" in sys.argv:
        gate.wait_for_go()
    main(n)
    gate.done()
