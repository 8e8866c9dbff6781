#!/usr/bin/env python3
"""How long `record -- CMD` lasts past its command on the per-site uprobe path.

Before Linux 6.6 (no uprobe_multi) every uprobe site is a perf event, and
closing one waits for a tracepoint grace period (docs/torch.md, "Kernels
without uprobe_multi"). This runs `record -o T -- PYTHON tests/workloads/fib.py`
(Debian's python3.11 has python3-torch on its search path; fib.py never
imports it) ROUNDS times under PTG_NO_UPROBE_MULTI=1 (the per-site path on
any kernel) and, unless --no-multi-only, with uprobe_multi, and prints per
round the recorder's wall time, the command's own time as record says it
("target exited after S s"), and, where record leaves a child to close the
probes ("N probe links are closed by pid P"), N and how long P took to end
after the recorder did (each round waits for it: closes of two rounds
would contend for event_mutex). Nothing is asserted.

  sudo bench/teardown.py [--rounds R] [--python EXE] [--no-multi-only] [PTG]
"""
import argparse
import os
import re
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(HERE, "..", "build"))


def wait_gone(pid):
    t0 = time.monotonic()
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    return time.monotonic() - t0


def one(ptg, python, env):
    out = "/tmp/ptg-bench-teardown.ptg"
    t0 = time.monotonic()
    res = subprocess.run([ptg, "record", "-o", out, "--", python,
                          os.path.join(HERE, "..", "tests", "workloads", "fib.py")],
                         capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    if res.returncode:
        raise SystemExit(res.stderr)
    target = float(re.search(r"target exited after ([\d.]+) s", res.stderr).group(1))
    m = re.search(r"(\d+) probe links are closed by pid (\d+)", res.stderr)
    links, closer = (int(m.group(1)), wait_gone(int(m.group(2)))) if m else (0, 0.0)
    os.unlink(out)
    return wall, target, links, closer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--no-multi-only", action="store_true")
    ap.add_argument("ptg", nargs="?", default=os.path.join(BUILD, "ptrace-gpu"))
    a = ap.parse_args()
    modes = [("no uprobe_multi", dict(os.environ, PTG_NO_UPROBE_MULTI="1"))]
    if not a.no_multi_only:
        modes.append(("uprobe_multi", dict(os.environ)))
    print(f"kernel {os.uname().release}, {a.ptg}, {a.python} fib.py, {a.rounds} rounds")
    for name, env in modes:
        rows = [one(a.ptg, a.python, env) for _ in range(a.rounds)]
        for wall, target, links, closer in rows:
            print(f"  {name:16} record {wall:6.2f} s, target {target:5.2f} s, "
                  f"{links} links closed by a child in {closer:5.1f} s after")
        print(f"  {name:16} median record {statistics.median(r[0] for r in rows):.2f} s")


if __name__ == "__main__":
    main()
