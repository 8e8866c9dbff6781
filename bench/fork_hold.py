#!/usr/bin/env python3
"""What holding a set's processes under ptrace costs a fork and an exec.

`record --children` holds each process of the set under ptrace so that its
exec waits while what it execs is probed (docs/late-libs.md): each fork then
stops the parent once (the fork event) and the child once (its first stop),
and each exec stops the process while the recorder looks at the new image.
This times, in a Python process (Debian's python3.11 unless --python), the
round trip of N forks whose child exits at once (a DataLoader worker's start,
without its work) and of N fork+exec of /bin/true, untraced and under
`record -p PID --children` of each ptrace-gpu given (say, this build and one
from before the change), in the same rounds, alternating. Medians in
microseconds per operation; nothing is asserted.

  sudo bench/fork_hold.py [--forks N] [--rounds R] [--python EXE] PTG [PTG...]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import reclib

WORK = r"""
import os, sys, time
n = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
def fork_exit():
    t = time.perf_counter_ns()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return time.perf_counter_ns() - t
def fork_exec():
    t = time.perf_counter_ns()
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/true", ["true"])
    os.waitpid(pid, 0)
    return time.perf_counter_ns() - t
a = sorted(fork_exit() for _ in range(n))
b = sorted(fork_exec() for _ in range(n))
print(a[n // 2] / 1e3, b[n // 2] / 1e3, flush=True)
"""


def one(python, forks, ptg, tmp):
    """(fork+exit µs, fork+exec µs) medians of one process, recorded by ptg or not."""
    w = subprocess.Popen([python, "-c", WORK, str(forks)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    rec = None
    try:
        assert w.stdout.readline() == "ready\n"
        if ptg:
            rec = reclib.attach(ptg, w.pid, ["--children", "--no-sched"],
                                os.path.join(tmp, "f.ptg"))
        w.stdin.write("go\n")
        w.stdin.flush()
        out = w.stdout.readline().split()
        w.wait()
        reclib.finish(rec)
        return float(out[0]), float(out[1])
    finally:
        reclib.kill(w, rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forks", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("ptg", nargs="+", help="ptrace-gpu executables to compare")
    o = ap.parse_args()
    configs = [None] + o.ptg
    got = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(o.rounds):
            for c in configs:
                got[c].append(one(o.python, o.forks, c, tmp))
    print(f"{o.forks} forks per run, {o.rounds} rounds, load {os.getloadavg()[0]:.1f}; "
          "median of the runs' medians, microseconds per operation")
    print(f"{'recorded by':<50} {'fork+exit':>10} {'fork+exec':>10}")
    for c in configs:
        a = statistics.median(x for x, _ in got[c])
        b = statistics.median(y for _, y in got[c])
        print(f"{c or 'untraced':<50} {a:>10.1f} {b:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
