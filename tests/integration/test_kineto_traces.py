# SPDX-License-Identifier: MIT
"""Import the real torch.profiler traces and check idle against totals computed here
straight from their JSON (standard library only)."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal

PTG = os.environ.get("PTRACE_GPU", "ptrace-gpu")
SHARED = os.environ.get("PTG_SHARED_DIR", "/work/shared")
TRACES = ["alexnet_1gpu", "sampled_rank0", "train_rank0"]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_CATS = ("cpu_op", "python_function", "cuda_runtime", "cuda_driver")
KERNEL_WAIT_NS = 30000

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what, file=sys.stderr)


def ns(v):
    """Kineto µs (int, float text) -> ns, exactly as the importer rounds."""
    return int((Decimal(str(v)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def merged(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def stream_breakdown(ops, launch_ts):
    """HTA's idle_time_breakdown of one stream's ops (start, end, corr)."""
    host = kern = other = 0
    ops = sorted(ops)
    for prev, cur in zip(ops, ops[1:]):
        gap = max(cur[0] - prev[1], 0)
        lts = launch_ts.get(cur[2])
        if lts is not None and lts > prev[1]:
            host += gap
        elif gap < KERNEL_WAIT_NS:
            kern += gap
        else:
            other += gap
    return host, kern, other


def expected(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    exp = {"kernels": 0, "kernel_ns": 0, "cpu_events": 0, "gpu_ops": 0}
    by_dev = defaultdict(list)
    by_stream = defaultdict(list)
    launch_ts = {}
    kernel_corrs = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args", {})
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        if cat in CPU_CATS:
            exp["cpu_events"] += 1
        if cat == "cuda_runtime" and args.get("correlation"):
            launch_ts.setdefault(args["correlation"], start)
        if cat not in GPU_CATS:
            continue
        exp["gpu_ops"] += 1
        by_dev[args.get("device", e["pid"])].append((start, end))
        by_stream[(args.get("device", e["pid"]), args.get("stream", e["tid"]))].append(
            (start, end, args.get("correlation", 0)))
        if cat == "kernel":
            exp["kernels"] += 1
            exp["kernel_ns"] += end - start
            kernel_corrs.append(args.get("correlation", 0))
    exp["devices"] = {}
    for dev, iv in by_dev.items():
        m = merged(iv)
        span = m[-1][1] - m[0][0]
        idle = span - sum(e - s for s, e in m)
        exp["devices"][dev] = (span, idle)
    exp["streams"] = {k: stream_breakdown(v, launch_ts) for k, v in by_stream.items()}
    exp["delays"] = sum(1 for c in kernel_corrs if c in launch_ts)
    return exp


def run(*args):
    return subprocess.run([PTG, *args], capture_output=True, text=True, timeout=300)


def check_json(name, out, exp):
    rep = json.loads(out)
    check(rep["trace"]["gpu_ops"] == exp["gpu_ops"], f"{name}: GPU ops")
    check(rep["trace"]["cpu_events"] == exp["cpu_events"],
          f"{name}: CPU events {rep['trace']['cpu_events']} != {exp['cpu_events']}")
    check(rep["launch_delay"]["count"] == exp["delays"], f"{name}: launch delays")
    devs = {d["device"]: d for d in rep["devices"]}
    check(set(devs) == set(exp["devices"]), f"{name}: devices")
    for dev, (span, idle) in exp["devices"].items():
        d = devs.get(dev, {})
        check(d.get("span_ns") == span, f"{name}: span of GPU {dev}")
        check(d.get("idle_ns") == idle, f"{name}: idle of GPU {dev}: {d.get('idle_ns')} != {idle}")
        check(abs(d.get("idle_pct", -1) - 100.0 * idle / span) < 1e-3, f"{name}: idle %")
        print(f"{name}: GPU {dev} idle {100.0 * idle / span:.2f}% (JSON) "
              f"vs {d.get('idle_pct')}% (ptrace-gpu idle)")
    check(sum(d["kernels"] for d in devs.values()) == exp["kernels"], f"{name}: kernel count")
    check(sum(d["kernel_ns"] for d in devs.values()) == exp["kernel_ns"], f"{name}: kernel time")
    for s in rep["streams"]:
        want = exp["streams"].get((s["device"], s["stream"]))
        got = (s["host_wait_ns"], s["kernel_wait_ns"], s["other_wait_ns"])
        check(want == got, f"{name}: stream {s['stream']} idle breakdown {got} != {want}")
    check(len(rep["streams"]) == len(exp["streams"]), f"{name}: streams")
    check(len(rep["optimizable_events"]["events"]) <= 5, f"{name}: -n 5")


def test_trace(tmp, name):
    src = os.path.join(SHARED, "traces", "kineto", name + ".json.gz")
    ptg = os.path.join(tmp, name + ".ptg")
    exp = expected(src)
    r = run("import", src, "-o", ptg)
    check(r.returncode == 0, f"{name}: import: {r.stderr.strip()}")
    if r.returncode:
        return
    r = run("idle", ptg)
    check(r.returncode == 0, f"{name}: idle: {r.stderr.strip()}")
    check("GPU time breakdown" in r.stdout and "Optimizable events" in r.stdout,
          f"{name}: text sections")
    for dev, (span, idle) in exp["devices"].items():
        check(f"{100.0 * idle / span:.2f}%" in r.stdout, f"{name}: idle % in text")
    r = run("idle", ptg, "--json", "-n", "5")
    check(r.returncode == 0, f"{name}: idle --json: {r.stderr.strip()}")
    if r.returncode == 0:
        check_json(name, r.stdout, exp)


def test_bad_input(tmp):
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents": [{"ph": "X",')
    r = run("import", bad, "-o", os.path.join(tmp, "bad.ptg"))
    check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, "malformed JSON")
    with open(bad, "w") as f:
        f.write('{"schemaVersion": 1}')
    r = run("import", bad, "-o", os.path.join(tmp, "bad.ptg"))
    check(r.returncode == 1 and "traceEvents" in r.stderr, "missing traceEvents")


def test_cpu_only(tmp):
    src = os.path.join(tmp, "cpu.json")
    with open(src, "w") as f:
        json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add",
                                    "pid": 1, "tid": 1, "ts": 1.5, "dur": 2}]}, f)
    r = run("import", src, "-o", os.path.join(tmp, "cpu.ptg"))
    check(r.returncode == 0, "CPU-only import")
    r = run("idle", os.path.join(tmp, "cpu.ptg"))
    check(r.returncode == 0 and "no GPU activity in this trace" in r.stdout
          and "aten::add" in r.stdout, "CPU-only idle")


def main():
    kineto = os.path.join(SHARED, "traces", "kineto")
    have = os.path.isdir(kineto)
    with tempfile.TemporaryDirectory() as tmp:
        for name in TRACES if have else ():
            test_trace(tmp, name)
        test_bad_input(tmp)
        test_cpu_only(tmp)
    print(f"test_kineto_traces: {len(failures)} failed")
    if not failures and not have:
        # the project's shared folder beside the clone (PTG_SHARED_DIR)
        print(f"test_kineto_traces: real traces skipped, none in {kineto}")
        return 77
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
