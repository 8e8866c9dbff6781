#!/usr/bin/env python3
"""What the hold at the loader's notice costs a full-path dlopen, and what it saves.

A CUDA library loaded by full path from a folder on no search path cannot
be probed ahead (docs/late-libs.md). A thread record holds under ptrace
waits at the loader's notice until its probes are in; any other is probed
at the notice while it runs on, and its calls meanwhile are missing. This
times, in a Python process (Debian's python3.11 unless --python), one
ctypes.CDLL() of the fake driver (tests/fakecuda) by full path, then LAUNCHES
cuLaunchKernel at once, untraced, under `record -p PID` (the thread not
held) and under `record -p PID --hold`, in the same rounds, alternating.
Each round loads a fresh copy (a new file: no probe is on it yet). It
prints the median load time in milliseconds and the median number of the
launches the trace holds; nothing is asserted.

  sudo bench/notice_hold.py [--rounds R] [--launches N] [--python EXE] [PTG]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import reclib

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(HERE, "..", "build"))

WORK = r"""
import ctypes, sys, time
lib, n = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
t = time.perf_counter_ns()
cu = ctypes.CDLL(lib)
load = time.perf_counter_ns() - t
cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
for i in range(n):
    cu.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
print(load / 1e6, flush=True)
"""


def launches(ptg, trace):
    """cuLaunchKernel records in trace."""
    out = subprocess.run([ptg, "dump", trace], capture_output=True, text=True,
                         check=True).stdout
    return sum(1 for line in out.splitlines() if " cuda_call " in line and "cuLaunchKernel" in line)


def one(o, flags, lib, tmp):
    """(load ms, launches recorded or None) of one process."""
    w = subprocess.Popen([o.python, "-c", WORK, lib, str(o.launches)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    rec, trace = None, os.path.join(tmp, "h.ptg")
    try:
        assert w.stdout.readline() == "ready\n"
        if flags is not None:
            rec = reclib.attach(o.ptg, w.pid, [*flags, "--no-sched", "--no-cupti"], trace)
        w.stdin.write("go\n")
        w.stdin.flush()
        load = float(w.stdout.readline())
        w.wait()
        reclib.finish(rec)
        return load, launches(o.ptg, trace) if rec else None
    finally:
        reclib.kill(w, rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=1000)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("ptg", nargs="?", default=os.path.join(BUILD, "ptrace-gpu"))
    o = ap.parse_args()
    driver = os.path.join(BUILD, "tests", "helpers", "libcuda.so.1")
    configs = {"untraced": None, "record -p": [], "record -p --hold": ["--hold"]}
    got = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(o.rounds):
            for name, flags in configs.items():
                d = os.path.join(tmp, f"r{r}-{len(got[name])}-{name.replace(' ', '')}")
                os.makedirs(d)
                lib = shutil.copy(driver, d)
                got[name].append(one(o, flags, lib, tmp))
    print(f"{o.rounds} rounds, {o.launches} launches right after the load, "
          f"load {os.getloadavg()[0]:.1f}; medians")
    print(f"{'':<20} {'dlopen ms':>10} {'launches in trace':>18}")
    for name in configs:
        load = statistics.median(x for x, _ in got[name])
        seen = [y for _, y in got[name] if y is not None]
        print(f"{name:<20} {load:>10.2f} {statistics.median(seen) if seen else '-':>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
