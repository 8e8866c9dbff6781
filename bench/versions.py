#!/usr/bin/env python3
"""Cost per Python call of `record -p` on every supported interpreter.

  sudo python3 bench/versions.py [--rounds 5] [--scale 2] [--only NAME,...]
                                 [--python PATH]...

For each interpreter of tests/integration/ptg.py that is on this machine
(pyenv's, the host's, the chroots of tools/make-chroots.sh), or each given
with --python, one process of bench/workloads/fib.py serves every run:
untraced, under `record -p` and under `record --in-process -p` (each attached
before the run, stopped after it), and under cProfile, interleaved round by
round so that machine noise hits each alike. Per round the work is timed in
the target (thread CPU and wall time of the timed region only: neither the
interpreter's start nor the tracer's attach is counted). The table gives the
medians over the rounds: ns per untraced call, and ns each tool adds per
call. BPF run-time statistics stay off (they add ~150 ns per probe hit). A
benchmark, not a test: numbers depend on the machine.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import ptg  # noqa: E402  (the interpreters and how to run each)

FIB = os.path.join(HERE, "workloads", "fib.py")


class Target:
    def __init__(self, python, scale):
        self.proc = subprocess.Popen(
            python.argv(python.path(FIB), "--wait", "--scale", str(scale)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"{python}: workload did not start: {line!r}")
        self.pid = self.proc.pid

    def run(self, mode="plain"):
        self.proc.stdin.write(f"go {mode}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)


class PathPython:
    """An interpreter given by its path (--python), run as it is."""

    def __init__(self, exe):
        self.name = self.exe = exe
        self.missing = None if os.access(exe, os.X_OK) else f"{exe}: not an executable"

    def argv(self, *args):
        return [self.exe, *args]

    def path(self, p):
        return p

    def __str__(self):
        return os.path.basename(self.exe)


def traced_run(target, out, extra=()):
    log = out + ".log"
    with open(log, "w") as err:
        rec = subprocess.Popen([ptg.PTG, "record", "-p", str(target.pid), "-o", out, *extra],
                               stdout=subprocess.DEVNULL, stderr=err)
    # the probes are in once it says "recording pid"
    deadline = time.monotonic() + 60
    while rec.poll() is None and time.monotonic() < deadline:
        with open(log) as f:
            if "recording pid" in f.read():
                break
        time.sleep(0.05)
    if rec.poll() is not None:
        with open(log) as f:
            raise RuntimeError(f"record -p failed: {f.read().strip()[-200:]}")
    res = target.run()
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=120)
    return res


def measure(python, rounds, scale, tmp):
    target = Target(python, scale)
    runs = {"plain": [], "record": [], "inprocess": [], "cprofile": []}
    try:
        target.run()  # warm-up: specialization, caches
        for i in range(rounds):
            runs["plain"].append(target.run())
            runs["record"].append(traced_run(target, os.path.join(tmp, f"{python}-{i}.ptg")))
            runs["inprocess"].append(traced_run(target, os.path.join(tmp, f"{python}-{i}i.ptg"),
                                                ["--in-process"]))
            runs["cprofile"].append(target.run("cprofile"))
    finally:
        target.close()
    calls = runs["plain"][0]["calls"]
    row = {"python": python.name, "exe": python.exe, "calls": calls}
    for what, key in (("wall", "elapsed_s"), ("cpu", "cpu_s")):
        def per_call(r):
            v = r[key]
            return (statistics.median(v) if isinstance(v, list) else v) / calls * 1e9
        base = [per_call(r) for r in runs["plain"]]
        row[f"{what}_untraced_ns"] = statistics.median(base)
        for tool in ("record", "inprocess", "cprofile"):
            row[f"{what}_{tool}_added_ns"] = statistics.median(
                [per_call(r) - b for r, b in zip(runs[tool], base)])
    return row


def table(rows):
    lines = ["| interpreter | calls/run | untraced | record -p adds | --in-process adds "
             "| cProfile adds |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['python']} | {r['error']} | | | | |")
            continue
        lines.append(f"| {r['python']} | {r['calls']:,} | {r['cpu_untraced_ns']:.0f} ns | "
                     f"{r['cpu_record_added_ns']:,.0f} ns | {r['cpu_inprocess_added_ns']:,.0f} ns | "
                     f"{r['cpu_cprofile_added_ns']:,.0f} ns |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=2.0)
    ap.add_argument("--only", help="comma-separated interpreter names")
    ap.add_argument("--python", action="append", default=[],
                    help="an interpreter by its path instead (repeatable)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/versions.py: needs root (record -p)")
    names = a.only.split(",") if a.only else [] if a.python else list(ptg.INTERPRETERS)
    tmp = os.path.join("/tmp", f"ptg-versions-{os.getpid()}")
    os.makedirs(tmp, mode=0o700)
    rows = []
    for name in names + a.python:
        python = PathPython(name) if name in a.python else ptg.Python(name)
        if python.missing:
            print(f"skip {name}: {python.missing}", file=sys.stderr)
            continue
        print(f"{name}: {a.rounds} rounds", file=sys.stderr)
        try:
            rows.append(measure(python, a.rounds, a.scale, tmp))
        except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
            rows.append({"python": name, "error": str(e)[:200]})
    subprocess.run(["rm", "-rf", tmp])
    if not rows:
        sys.exit("bench/versions.py: no interpreter to measure (see the skips above)")
    print("CPU time of the work per Python call (thread CPU, median of "
          f"{a.rounds} interleaved rounds; fib, BPF statistics off):\n")
    print(table(rows))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "versions-latest.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
