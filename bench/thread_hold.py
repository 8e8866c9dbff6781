#!/usr/bin/env python3
"""What holding every thread of a process costs the threads it starts.

A held process (record -p of one with no Python, -- CMD until it runs
Python, a set's members, -p PID --hold) has each of its threads under
ptrace, those it starts from birth (docs/late-libs.md, "Held"): a thread's
start stops the starting thread at the clone and the new one at its birth,
each until the recorder resumes it. This times, in a Python process
(Debian's python3.11 unless --python), THREADS threads started and joined
one after the other (each returns at once), untraced, under `record -p PID`
(not held) and under `record -p PID --hold`, in the same rounds,
alternating. It prints the median time per thread in microseconds; nothing
is asserted.

  sudo bench/thread_hold.py [--rounds R] [--threads N] [--python EXE] [PTG]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import reclib

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(HERE, "..", "build"))

WORK = r"""
import sys, threading, time
n = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
t = time.perf_counter_ns()
for i in range(n):
    th = threading.Thread(target=int)
    th.start()
    th.join()
print((time.perf_counter_ns() - t) / n / 1e3, flush=True)
"""


def one(o, flags, tmp):
    """Microseconds per thread in one process."""
    w = subprocess.Popen([o.python, "-c", WORK, str(o.threads)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    rec = None
    try:
        assert w.stdout.readline() == "ready\n"
        if flags is not None:
            rec = reclib.attach(o.ptg, w.pid, [*flags, "--no-sched", "--no-cupti"],
                                os.path.join(tmp, "t.ptg"))
        w.stdin.write("go\n")
        w.stdin.flush()
        us = float(w.stdout.readline())
        w.wait()
        reclib.finish(rec)
        return us
    finally:
        reclib.kill(w, rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=500)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("ptg", nargs="?", default=os.path.join(BUILD, "ptrace-gpu"))
    o = ap.parse_args()
    configs = {"untraced": None, "record -p": [], "record -p --hold": ["--hold"]}
    got = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(o.rounds):
            for name, flags in configs.items():
                got[name].append(one(o, flags, tmp))
    print(f"{o.rounds} rounds, {o.threads} threads started and joined one after the other, "
          f"load {os.getloadavg()[0]:.1f}; medians")
    print(f"{'':<20} {'us per thread':>14}")
    for name in configs:
        print(f"{name:<20} {statistics.median(got[name]):>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
