"""Imports torch only once it runs (after recording started), then multiplies
matrices for --seconds (default 3) and prints how many it did.

The tracer finds libtorch on the target's search path when it attaches and
probes its ops before the loader maps it: every one of these calls must be
in the trace.
"""
import argparse
import time

import gate


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wait", action="store_true")
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    if a.wait:
        gate.wait_for_go()
    import torch

    x = torch.ones(8, 8)
    n, end = 0, time.monotonic() + a.seconds
    while time.monotonic() < end:
        torch.mm(x, x)
        n += 1
    print("mm", n, flush=True)
    gate.done()


if __name__ == "__main__":
    main()
