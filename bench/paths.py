#!/usr/bin/env python3
"""The two ways record takes Python calls, against the in-process profilers, in one table.

  sudo python3 bench/paths.py [--rounds 3] [--scale 2] [--steps 100]
                              [--only NAME,...] [--uprobe-cost PATH]

For each interpreter of tests/integration/ptg.py on this machine, in the
same run:
- fib (bench/workloads/fib.py, one process serving every run, interleaved
  round by round): CPU ns per untraced call, and what cProfile,
  torch.profiler(with_stack=True) (where torch imports), `record -p` (its
  default: the agent in the target where it can go in) and
  `record --uprobes -p` add per call (thread CPU time of the timed work,
  the medians of --rounds); and `record -- CMD` of the same program, by
  its default (3.12+: the agent from where its script starts) and by
  --uprobes, a recorded command per round, its second run timed;
- the training loop of bench/torch_overhead.py (an MLP with SGD, one
  intra-op thread), where torch imports: CPU time per step untraced, and
  x untraced under torch.profiler(with_stack=True), `record -p` and
  `record --uprobes -p` (medians of --rounds);
and once, before and after, the trap pair of bench/uprobe_cost (a push hit +
a jmp hit: what every uprobed call pays before any BPF runs). The load
average before and after is printed with the table. A benchmark, not a
test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import ptg  # noqa: E402  (the interpreters and how to run each)
import torch_overhead  # noqa: E402  (the training loop)
from versions import FIB, Target, traced_run  # noqa: E402  (fib, and record -p of it)

NAMES = ("debian-3.11", "pyenv-3.12", "trixie-3.13", "forky-3.14", "sid-3.15")


def has_torch(python):
    return subprocess.run(python.argv("-c", "import torch"), capture_output=True).returncode == 0


def trap_pair(tool):
    """ns of a push hit + a jmp hit (bench/uprobe_cost), or None."""
    if not tool or not os.access(tool, os.X_OK):
        return None
    res = subprocess.run([tool, "200000", "5"], capture_output=True, text=True)
    try:
        r = json.loads(res.stdout)
        return r["push"]["hit_ns"] + r["jmp"]["hit_ns"]
    except (ValueError, KeyError):
        return None


class CmdTarget(Target):
    """fib started by record -- CMD, which passes its pipes through."""

    def __init__(self, python, scale, out, extra=()):
        self.proc = subprocess.Popen(
            [ptg.PTG, "record", "-q", "-o", out, *extra, "--",
             *python.argv(python.path(FIB), "--wait", "--scale", str(scale))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"{python}: recorded workload did not start: {line!r}")
        self.pid = self.proc.pid


def command_run(python, scale, out, extra=()):
    """The second run (the first warms up) of fib under record -- CMD."""
    target = CmdTarget(python, scale, out, extra)
    try:
        target.run()
        return target.run()
    finally:
        target.close()


def fib_row(python, rounds, scale, torch, tmp):
    """{what: CPU ns added per call} of fib, and the untraced ns per call."""
    target = Target(python, scale)
    modes = ["cprofile"] + (["torchprof"] if torch else [])
    runs = {k: [] for k in ["plain", "record", "uprobes", "cmd", "cmd_uprobes", *modes]}
    try:
        target.run()  # warm-up: specialization, caches
        for i in range(rounds):
            runs["plain"].append(target.run())
            runs["record"].append(traced_run(target, os.path.join(tmp, f"d{i}.ptg")))
            runs["uprobes"].append(traced_run(target, os.path.join(tmp, f"u{i}.ptg"),
                                              ["--uprobes"]))
            for m in modes:
                runs[m].append(target.run(m))
            runs["cmd"].append(command_run(python, scale, os.path.join(tmp, f"c{i}.ptg")))
            runs["cmd_uprobes"].append(command_run(python, scale, os.path.join(tmp, f"v{i}.ptg"),
                                                   ["--uprobes"]))
    finally:
        target.close()
    calls = runs["plain"][0]["calls"]

    def per_call(r):
        v = r["cpu_s"]
        return (statistics.median(v) if isinstance(v, list) else v) / calls * 1e9

    base = [per_call(r) for r in runs["plain"]]
    row = {"untraced": statistics.median(base)}
    for k in runs:
        if k != "plain":
            row[k] = statistics.median([per_call(r) - b for r, b in zip(runs[k], base)])
    return row


def train_row(name, rounds, steps):
    """{what: x untraced} of the training loop, and the untraced ms per step."""
    a = SimpleNamespace(interp=name, python=None, steps=steps, hidden=256, batch=64,
                        ptrace_gpu=ptg.PTG, record_args="")
    times = {"untraced": [], "profiler": [], "record": [], "uprobes": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for mode in times:
                times[mode].append(torch_overhead.run_one(a, mode, os.path.join(tmp, "t.ptg")))
    med = {k: statistics.median(v) for k, v in times.items()}
    row = {"untraced_ms": med["untraced"] * 1e3}
    for k in ("profiler", "record", "uprobes"):
        row[k] = med[k] / med["untraced"]
    return row


def table(rows, pair):
    pair_s = f"{pair:,.0f} ns" if pair else "n/a"
    lines = ["| interpreter | fib: untraced call | cProfile adds | torch.profiler(with_stack) "
             "adds | `record -p` adds | `record --uprobes -p` adds | `record -- CMD` adds | "
             "`record --uprobes -- CMD` adds | trap pair | "
             "training step: untraced | torch.profiler(with_stack) | `record -p` | "
             "`record --uprobes -p` |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f, t = r.get("fib"), r.get("train")
        if "error" in r:
            lines.append(f"| {r['python']} | {r['error']} |" + " |" * 12)
            continue
        cells = [r["python"], f"{f['untraced']:.0f} ns", f"{f['cprofile']:,.0f} ns",
                 f"{f['torchprof']:,.0f} ns" if "torchprof" in f else "n/a (no torch)",
                 f"{f['record']:,.0f} ns", f"{f['uprobes']:,.0f} ns", f"{f['cmd']:,.0f} ns",
                 f"{f['cmd_uprobes']:,.0f} ns", pair_s]
        if t:
            # a loop that died (torch.profiler(with_stack) of trixie's PyTorch 2.6: SIGSEGV)
            cells += [f"{t['untraced_ms']:.2f} ms"] + [
                "died" if t[k] != t[k] else f"{t[k]:.2f}x"
                for k in ("profiler", "record", "uprobes")]
        else:
            cells += ["n/a (no torch)"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=2.0)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--only", help="comma-separated interpreter names (default: " +
                    ",".join(NAMES) + ")")
    ap.add_argument("--uprobe-cost", default=os.path.join(HERE, "..", "build-bench", "bench",
                                                          "uprobe_cost"),
                    help="the bench/uprobe_cost binary (bench/run.sh builds it)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/paths.py: needs root (record -p)")
    load0 = os.getloadavg()
    pair0 = trap_pair(a.uprobe_cost)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in (a.only.split(",") if a.only else NAMES):
            python = ptg.Python(name)
            if python.missing:
                print(f"skip {name}: {python.missing}", file=sys.stderr)
                continue
            print(f"{name}: {a.rounds} rounds", file=sys.stderr)
            row = {"python": name}
            try:
                torch = has_torch(python)
                row["fib"] = fib_row(python, a.rounds, a.scale, torch, tmp)
                if torch:
                    row["train"] = train_row(name, a.rounds, a.steps)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                row = {"python": name, "error": str(e)[:200]}
            rows.append(row)
    pair1 = trap_pair(a.uprobe_cost)
    pairs = [p for p in (pair0, pair1) if p]
    print(f"load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after; trap pair "
          f"{', '.join(f'{p:,.0f} ns' for p in pairs) or 'n/a'} (before, after); fib: CPU ns "
          f"per call, medians of {a.rounds} interleaved rounds; training loop: CPU time per "
          f"step, {a.steps} steps, medians of {a.rounds} rounds\n")
    print(table(rows, statistics.median(pairs) if pairs else None))
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "paths-latest.json"), "w") as f:
        json.dump({"rows": rows, "trap_pair_ns": pairs, "load": [load0[0], os.getloadavg()[0]]},
                  f, indent=1)


if __name__ == "__main__":
    main()
