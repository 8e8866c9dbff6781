#!/usr/bin/python3
"""Overhead of recording a PyTorch CPU training loop, measured in one run.

Runs the same training loop (an MLP with SGD, fixed data, one intra-op
thread) in five ways, alternating them --rounds times, and prints the
median time per step of each and the ratios to the untraced loop:

  untraced        the loop alone
  record -p       ptrace-gpu record attached to it (Python frames by
                  uprobes, ops by the agent's RecordFunction callback,
                  module paths, steps, scheduler): the default
  record -p --ops-from probes   the same with ops by uprobes on the
                  dispatcher (the default before the callback)
  record --in-process -p   the same, Python frames and ops from the agent
  torch.profiler  the loop inside torch.profiler.profile(with_stack=True),
                  timed inside the with-block (its start and its event
                  processing at the exit are left out, as the recorder's
                  start and writing are: they run in another process)

Times are the worker's CPU time (time.process_time(): user + system,
uprobe handlers included), so other load on the machine does not count.
It also counts the loop's ops in the trace and gives the recording's cost
per op call: (record time - untraced time) / op calls.

The torch.mm loop is timed untraced, recorded (both ways) and under
torch.profiler (CPU activity, no stacks): the cost per op of each.

Both loops are also recorded with record --in-process (Python frames from
sys.monitoring or 3.11's profile function, ops from a RecordFunction
callback, both in the target), in the same rounds.

usage (as root): bench/torch_overhead.py [--ptrace-gpu PATH] [--steps N]
                 [--rounds R] [--hidden H] [--batch B] [--record-args ARGS]
                 [--interp NAME | --python PATH]

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
    # torch.profiler: the time inside its with-block only; its start and the
    # event processing at its exit (longer than the loop itself) are left
    # out, as the recorder's start and its writing are (they run in the
    # recorder's process)
    if a.mode in ("opsprofiler", "profiler"):
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], with_stack=a.mode == "profiler"):
            t0 = time.process_time()
            (ops_only if a.mode == "opsprofiler" else train)(a.steps)
            t1 = time.process_time()
    else:
        t0 = time.process_time()
        (ops_only if a.mode == "opsloop" else train)(a.steps)
        t1 = time.process_time()
    print("elapsed", t1 - t0, flush=True)


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
        cmd = [a.python, os.path.abspath(__file__), *args]
    w = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert w.stdout.readline().startswith("ready")
    rec = None
    if mode in ("record", "opsrecord", "probes", "opsprobes", "inprocess", "opsinprocess",
                "uprobes"):
        extra = (["--in-process"] if "inprocess" in mode
                 else ["--uprobes"] if mode == "uprobes"
                 else ["--ops-from", "probes"] if "probes" in mode else [])
        rec = subprocess.Popen([a.ptrace_gpu, "record", "-p", str(w.pid), "-o", out, *extra,
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
    """aten:: op calls in the trace: the sum of report --ops's "# of Calls" column."""
    res = subprocess.run([a.ptrace_gpu, "report", "--ops", "--limit", "100000", path],
                         capture_output=True, text=True)
    return sum(int(m.group(1)) for m in
               re.finditer(r"^\s*aten::\S+\s.*\s(\d+)\s*$", res.stdout, re.M))


def progress(r, mode, t, per):
    """One line per run on stderr, so that a run cut short still says something."""
    print(f"round {r + 1} {mode}: {t * 1e6:.2f} us CPU {per}", file=sys.stderr, flush=True)


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
    p.add_argument("--python", default=PYTHON, help="the interpreter (with PyTorch) to run, "
                   "when not --interp")
    a = p.parse_args()
    if a.worker:
        a.mode = {"opsrecord": "opsloop", "opsinprocess": "opsloop", "opsprobes": "opsloop",
                  "inprocess": "record", "probes": "record",
                  "uprobes": "record"}.get(a.worker, a.worker)
        worker(a)
        return
    times = {"untraced": [], "record": [], "probes": [], "inprocess": [], "profiler": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.ptg")
        ops = {}
        for r in range(a.rounds):
            for mode in times:
                times[mode].append(run_one(a, mode, out))
                progress(r, mode, times[mode][-1], "a step")
                if mode in ("record", "probes", "inprocess"):
                    ops[mode] = ops_in(a, out) / a.steps
        # the cost of one op alone: a loop of torch.mm, untraced, recorded and profiled
        per_op = {"opsloop": [], "opsrecord": [], "opsprobes": [], "opsinprocess": [],
                  "opsprofiler": []}
        loop_ops = {}
        for r in range(a.rounds):
            for mode in per_op:
                per_op[mode].append(run_one(a, mode, out, a.op_iters))
                progress(r, mode, per_op[mode][-1], "a call")
                if mode in ("opsrecord", "opsprobes", "opsinprocess"):
                    loop_ops[mode] = ops_in(a, out) / a.op_iters
    med = {k: statistics.median(v) for k, v in times.items()}
    op_med = {k: statistics.median(v) for k, v in per_op.items()}
    print(f"MLP {a.hidden}x3, batch {a.batch}, {a.steps} steps x {a.rounds} rounds, "
          f"{ops.get('record', 0):.0f} op calls per step recorded by record -p, "
          f"{ops.get('probes', 0):.0f} with --ops-from probes, "
          f"{ops.get('inprocess', 0):.0f} by record --in-process")
    for k, label in (("untraced", "untraced"), ("record", "ptrace-gpu record -p"),
                     ("probes", "ptrace-gpu record -p --ops-from probes"),
                     ("inprocess", "ptrace-gpu record --in-process -p"),
                     ("profiler", "torch.profiler(with_stack=True)")):
        print(f"  {label:38s} {med[k] * 1e3:8.3f} ms CPU/step  x{med[k] / med['untraced']:.2f}")
    for k in ("record", "probes", "inprocess"):
        if ops.get(k):
            print(f"  {k}: cost per op call of the loop: "
                  f"{(med[k] - med['untraced']) / ops[k] * 1e6:.2f} us "
                  f"(Python frames, scheduler and ops together)")
    base = op_med["opsloop"]
    print(f"torch.mm loop, {a.op_iters} calls x {a.rounds} rounds "
          f"({loop_ops.get('opsrecord', 0):.0f} / {loop_ops.get('opsprobes', 0):.0f} / "
          f"{loop_ops.get('opsinprocess', 0):.0f} "
          f"ops per call recorded): {base * 1e6:.2f} us a call untraced; added per op:")
    for k, label in (("opsrecord", "record -p (RecordFunction callback)"),
                     ("opsprobes", "record -p --ops-from probes (uprobes)"),
                     ("opsinprocess", "record --in-process (RecordFunction callback)"),
                     ("opsprofiler", "torch.profiler (CPU, no stack)")):
        # torch.profiler sees the ops the RecordFunction callback sees
        n = loop_ops.get("opsinprocess" if k == "opsprofiler" else k) or 1
        print(f"  {label:46s} {(op_med[k] - base) / n * 1e6:6.2f} us")


if __name__ == "__main__":
    main()
