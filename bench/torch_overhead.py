#!/usr/bin/python3
"""Overhead of recording a PyTorch CPU training loop, measured in one run.

Runs the same training loop (an MLP with SGD, fixed data, one intra-op
thread) in three ways, alternating them --rounds times, and prints the
median time per step of each and the ratios to the untraced loop:

  untraced        the loop alone
  record -p       ptrace-gpu record attached to it (Python frames, ops,
                  module paths, steps, scheduler)
  torch.profiler  the loop inside torch.profiler.profile(with_stack=True)

Times are the worker's CPU time (time.process_time(): user + system,
uprobe handlers included), so other load on the machine does not count.
It also counts the loop's ops in the trace and gives the recording's cost
per op call: (record time - untraced time) / op calls.

usage (as root): bench/torch_overhead.py [--ptrace-gpu PATH] [--steps N]
                 [--rounds R] [--hidden H] [--batch B] [--record-args ARGS]
                 [--interp NAME]

--interp runs the loop on one of tests/integration/ptg.py's interpreters
(e.g. trixie-3.13 for PyTorch 2.6, forky-3.14 for 2.14, in their chroots);
the default is Debian's /usr/bin/python3.11 with PyTorch 1.13.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3.11"


def worker(a):
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, a.hidden), nn.ReLU(),
                          nn.Linear(a.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    x, y = torch.randn(a.batch, a.hidden), torch.randn(a.batch, 10)

    def train(steps):
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()

    def ops_only(n):
        # torch.mm is a builtin: no Python frame per call, only its ops (mm, resolve_conj)
        a = torch.ones(2, 2)
        for _ in range(n):
            torch.mm(a, a)

    train(3)  # warm up allocator and kernels before anyone measures
    ops_only(10)
    print("ready", flush=True)
    sys.stdin.readline()
    # CPU time of the process: uprobe handlers run in its context and count,
    # while time spent waiting for a CPU on a busy machine does not
    t0 = time.process_time()
    if a.mode == "opsloop":
        ops_only(a.steps)
    elif a.mode == "profiler":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], with_stack=True):
            train(a.steps)
    else:
        train(a.steps)
    print("elapsed", time.process_time() - t0, flush=True)


def run_one(a, mode, out, steps=None):
    steps = steps or a.steps
    args = ["--worker", mode, "--steps", str(steps), "--hidden", str(a.hidden),
            "--batch", str(a.batch)]
    if a.interp:
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
        import ptg
        py = ptg.Python(a.interp)
        if py.missing:
            sys.exit(f"torch_overhead: {a.interp}: {py.missing}")
        cmd = py.argv(py.path(os.path.abspath(__file__)), *args)
    else:
        cmd = [PYTHON, os.path.abspath(__file__), *args]
    w = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert w.stdout.readline().startswith("ready")
    rec = None
    if mode in ("record", "opsrecord"):
        rec = subprocess.Popen([a.ptrace_gpu, "record", "-p", str(w.pid), "-o", out,
                                *a.record_args.split()],
                               stderr=subprocess.PIPE, text=True)
        # the probes are in once it says so
        for line in rec.stderr:
            if "recording pid" in line:
                break
    w.stdin.write("go\n")
    w.stdin.flush()
    line = w.stdout.readline()
    w.wait()
    if rec:
        rec.communicate()
    if not line.startswith("elapsed"):
        # torch.profiler(with_stack=True) of Debian's PyTorch 2.6 on 3.13 dies of SIGSEGV
        print(f"  {mode}: the loop died ({'signal %d' % -w.returncode if w.returncode < 0 else 'status %d' % w.returncode})",
              file=sys.stderr)
        return float("nan")
    return float(line.split()[1]) / steps


def ops_in(a, path):
    res = subprocess.run([a.ptrace_gpu, "report", "--ops", path], capture_output=True, text=True)
    m = re.search(r"op calls: (\d+)", res.stdout)
    return int(m.group(1)) if m else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--worker")
    p.add_argument("--ptrace-gpu", default=os.environ.get(
        "PTRACE_GPU", os.path.join(HERE, "..", "build", "ptrace-gpu")))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--record-args", default="", help="more options of record, e.g. --no-sched")
    p.add_argument("--op-iters", type=int, default=20000)
    p.add_argument("--interp", help="an interpreter of tests/integration/ptg.py, e.g. trixie-3.13")
    a = p.parse_args()
    if a.worker:
        a.mode = {"opsrecord": "opsloop"}.get(a.worker, a.worker)
        worker(a)
        return
    times = {"untraced": [], "record": [], "profiler": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.ptg")
        for r in range(a.rounds):
            for mode in times:
                times[mode].append(run_one(a, mode, out))
        ops = ops_in(a, out) / a.steps
        # the cost of one op alone: a loop of torch.mm, untraced and recorded
        per_op = {"opsloop": [], "opsrecord": []}
        for r in range(a.rounds):
            per_op["opsloop"].append(run_one(a, "opsloop", out, a.op_iters))
            per_op["opsrecord"].append(run_one(a, "opsrecord", out, a.op_iters))
        loop_ops = ops_in(a, out) / a.op_iters
    med = {k: statistics.median(v) for k, v in times.items()}
    op_med = {k: statistics.median(v) for k, v in per_op.items()}
    print(f"MLP {a.hidden}x3, batch {a.batch}, {a.steps} steps x {a.rounds} rounds, "
          f"{ops:.0f} op calls per step")
    for k, label in (("untraced", "untraced"), ("record", "ptrace-gpu record -p"),
                     ("profiler", "torch.profiler(with_stack=True)")):
        print(f"  {label:34s} {med[k] * 1e3:8.3f} ms CPU/step  x{med[k] / med['untraced']:.2f}")
    if ops:
        print(f"  recording cost per op call of the loop: "
              f"{(med['record'] - med['untraced']) / ops * 1e6:.2f} us "
              f"(Python frames, scheduler and ops together)")
    if loop_ops:
        print(f"torch.mm loop, {a.op_iters} calls x {a.rounds} rounds, {loop_ops:.0f} ops per call: "
              f"{op_med['opsloop'] * 1e6:.2f} us untraced, {op_med['opsrecord'] * 1e6:.2f} us "
              f"recorded: {(op_med['opsrecord'] - op_med['opsloop']) / loop_ops * 1e6:.2f} us "
              f"per op (entry and exit probes)")


if __name__ == "__main__":
    main()
