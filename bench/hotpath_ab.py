#!/usr/bin/env python3
"""A/B of ptrace-gpu binaries on the hot path of exact Python call tracing.

  sudo python3 bench/hotpath_ab.py [--stats] [--rounds 5] [--scale 2]
                                   [--workload fib|spread]
                                   --python NAME|PATH BINARY...

One process of bench/workloads/fib.py, or with --workload spread of
spread.py (calls over SPREAD_FUNCS code objects, 4,096 unless the
environment says; with 128, --scale 64 makes as many calls as fib's), under
interpreter NAME of tests/integration/ptg.py (or PATH), serves every run.
Per round: the work untraced, then under `record -p` of each BINARY in
turn, so that the load of a shared machine hits each binary alike.
Without --stats: the CPU time each binary adds per Python call (BPF
statistics off). With --stats: the run time of
py_probe per program run, from the kernel's BPF statistics, turned on
through a BPF_ENABLE_STATS file descriptor only while the work runs (it
counts with the sysctl, so another user's statistics are never turned off).
Prints the median and every round of each binary. A benchmark, not a test.

With --inprocess: each round also times the work under cProfile and, on
3.12+, under the exact sys.monitoring recorder of bench/workloads/benchlib.py
(--mode monitoring: what an in-process mode would run in the target, with
the packing of its events) and the same recorder with its callbacks in C
(--mode monitoring-c, bench/workloads/moncost.c, built here for NAME when
its Python.h is there), in the same process, and checks that the recorders
saw every call.

With --inprocess, each round also times the work under
`record --in-process -p` of each BINARY (the agent injected into this same
process: sys.monitoring C callbacks on 3.12+, a C profile function on 3.11;
the column next to `record -p`), and checks that its trace has every call of
fib. The sys.monitoring recorders are 3.12+ only: n/a on 3.11.

A BINARY may be a script that sets the environment and execs ptrace-gpu:
PTG_PYFRAME_NO_REGS=1 takes the frame from the thread state instead of the
handler's register (docs/design.md), for an A/B of that alone.
"""
import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import ptg  # noqa: E402  (the interpreters and how to run each)
import versions  # noqa: E402  (PathPython)

FIB = os.path.join(HERE, "workloads", "fib.py")
WORKLOADS = {"fib": FIB, "spread": os.path.join(HERE, "workloads", "spread.py")}
SYS_BPF = 321  # x86_64
BPF_ENABLE_STATS = 32
BPF_STATS_RUN_TIME = 0


def enable_stats():
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 2)(BPF_STATS_RUN_TIME, 0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, ctypes.byref(attr), 4)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"BPF_ENABLE_STATS: {os.strerror(err)}")
    return fd


def probe_stats(pid):
    """{prog id: (run_time_ns, run_cnt)} of the py_probe programs pid holds."""
    res = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.startswith("prog_id:"):
                continue
            out = subprocess.run(["bpftool", "-j", "prog", "show", "id", line.split()[1]],
                                 capture_output=True, text=True).stdout
            prog = json.loads(out) if out.strip() else {}
            if prog.get("name") == "py_probe":
                res[prog["id"]] = (prog.get("run_time_ns", 0), prog.get("run_cnt", 0))
    return res


def build_moncost(python):
    """bench/workloads/moncost.c built for python, in a folder it sees; None if it cannot be."""
    res = subprocess.run(python.argv("-c", "import sysconfig; "
                                           "print(sysconfig.get_paths()['include'])"),
                         capture_output=True, text=True)
    inc = python.on_host(res.stdout.strip()) if res.returncode == 0 else ""
    if not os.path.exists(os.path.join(inc, "Python.h")):
        print(f"{python}: no Python.h ({inc or res.stderr.strip()}): no C recorder")
        return None
    out = os.path.join(os.path.abspath(ptg.BUILD), "bench", f"moncost-{python}")
    os.makedirs(out, exist_ok=True)
    # Debian's multiarch pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>:
    # that folder alone, not the chroot's libc headers
    incs = ["-I" + inc]
    arch = python.on_host(f"/usr/include/x86_64-linux-gnu/python{python.version[0]}."
                          f"{python.version[1]}")
    if python.root and os.path.isdir(arch):
        link = os.path.join(out, "include", "x86_64-linux-gnu")
        os.makedirs(link, exist_ok=True)
        dst = os.path.join(link, os.path.basename(arch))
        if not os.path.islink(dst):
            os.symlink(arch, dst)
        incs.append("-I" + os.path.join(out, "include"))
    res = subprocess.run(["cc", "-O2", "-shared", "-fPIC", *incs,
                          os.path.join(HERE, "workloads", "moncost.c"), "-o",
                          os.path.join(out, "ptg_moncost.so")], capture_output=True, text=True)
    if res.returncode:
        print(f"{python}: moncost.c does not build: no C recorder\n{res.stderr[-400:]}")
        return None
    return out


class Target:
    def __init__(self, python, scale, env=None, workload=FIB):
        self.proc = subprocess.Popen(
            python.argv(python.path(workload), "--wait", "--scale", str(scale)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"{python}: workload did not start: {line!r}")
        self.pid = self.proc.pid

    def run(self, mode="plain"):
        """CPU ns per call of one run of the work, and the calls it made."""
        self.proc.stdin.write(f"go {mode}\n")
        self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        # besides fib's calls, the recorder sees the frames of work() and fib_calls(),
        # and the C one the recorder's own flush() and __exit__() too
        extra = {"monitoring": 2, "monitoring-c": 4}.get(mode)
        if extra is not None and r["recorded_starts"] != r["calls"] + extra:
            raise RuntimeError(f"sys.monitoring recorder: {r['recorded_starts']} starts for "
                               f"{r['calls']} calls")
        return statistics.median(r["cpu_s"]) / r["calls"] * 1e9, r["calls"]

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def traced(target, binary, tmp, stats, extra=()):
    log = os.path.join(tmp, "record.log")
    out = os.path.join(tmp, "out.ptg")
    with open(log, "w") as err:
        rec = subprocess.Popen([binary, "record", *extra, "-p", str(target.pid), "-o", out],
                               stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 60
    while rec.poll() is None and time.monotonic() < deadline:
        with open(log) as f:
            if "recording pid" in f.read():
                break
        time.sleep(0.05)
    if rec.poll() is not None:
        with open(log) as f:
            raise RuntimeError(f"{binary} record -p failed: {f.read().strip()[-200:]}")
    fd = enable_stats() if stats else -1
    try:
        before = probe_stats(rec.pid) if stats else {}
        cpu, calls = target.run()
        after = probe_stats(rec.pid) if stats else {}
    finally:
        if fd >= 0:
            os.close(fd)
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=120)
    if extra:
        # every call of fib in the trace, as the target counted them
        got = ptg.Trace(out).count("fib.py").get("fib:10", 0)
        if got != calls:
            raise RuntimeError(f"{binary} record {' '.join(extra)}: {got} calls of fib "
                               f"recorded, {calls} made")
    if not stats:
        return cpu, None
    ns = sum(after[i][0] - before.get(i, (0, 0))[0] for i in after)
    runs = sum(after[i][1] - before.get(i, (0, 0))[1] for i in after)
    if not runs:
        raise RuntimeError(f"{binary}: py_probe did not run")
    return ns / runs, runs / calls


def path_python(exe):
    """An interpreter given by its path (a machine without ptg.INTERPRETERS'), with its version."""
    python = versions.PathPython(exe)
    python.version = (0, 0)
    if not python.missing:
        out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.split()
        python.version = tuple(int(x) for x in out) if len(out) == 2 else (0, 0)
    return python


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", required=True,
                    help="an interpreter of ptg.INTERPRETERS, or an interpreter's absolute path")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=2.0)
    ap.add_argument("--stats", action="store_true", help="BPF run time per py_probe run")
    ap.add_argument("--inprocess", action="store_true",
                    help="also cProfile and a sys.monitoring recorder (3.12+) in each round")
    ap.add_argument("--workload", choices=sorted(WORKLOADS), default="fib",
                    help="fib (one code object, always cached) or spread (4,096 small "
                    "functions called in turn: code objects mostly not in the caches)")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    if a.inprocess and a.workload != "fib":
        sys.exit("bench/hotpath_ab.py: --inprocess checks its counts on fib only")
    if os.geteuid() != 0:
        sys.exit("bench/hotpath_ab.py: needs root (record -p, BPF statistics)")
    python = path_python(a.python) if os.path.isabs(a.python) else ptg.Python(a.python)
    if python.missing:
        sys.exit(f"bench/hotpath_ab.py: {a.python}: {python.missing}")
    res = {b: [] for b in a.binaries}
    modes, env = [], None
    if a.inprocess and not a.stats:
        modes = ["cprofile"] + (["monitoring"] if python.version >= (3, 12) else [])
        moncost = build_moncost(python) if python.version >= (3, 12) else None
        if moncost:
            modes.append("monitoring-c")
            env = dict(os.environ, PTG_MONCOST_DIR=python.path(moncost))
    inproc = {m: [] for m in modes}
    # the agent of record --in-process, next to each binary's record -p
    # 3.11 has no sys.monitoring: the agent's C profile function instead
    agent = a.inprocess and not a.stats
    res_agent = {b: [] for b in a.binaries}
    target = Target(python, a.scale, env, WORKLOADS[a.workload])
    try:
        target.run()  # warm-up: specialization, caches
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(a.rounds):
                base, _ = target.run()
                for b in a.binaries:
                    v, per_call = traced(target, b, tmp, a.stats)
                    res[b].append((v if a.stats else v - base, per_call))
                    if agent:
                        v, _ = traced(target, b, tmp, False, ["--in-process"])
                        res_agent[b].append(v - base)
                for m in modes:
                    inproc[m].append(target.run(m)[0] - base)
    finally:
        target.close()
    if a.inprocess and not a.stats and python.version < (3, 12):
        print(f"{a.python} monitoring, monitoring-c (in-process): n/a (no sys.monitoring "
              f"before 3.12)")
    for m, vals in inproc.items():
        print(f"{a.python} {m} (in-process): CPU ns added per call: median "
              f"{statistics.median(vals):,.0f} [{', '.join(f'{v:.0f}' for v in vals)}]")
    what = "py_probe ns per run" if a.stats else "CPU ns added per call"
    for b in a.binaries:
        vals = [v for v, _ in res[b]]
        extra = ""
        if a.stats:
            extra = f", {statistics.median(p for _, p in res[b]):.2f} runs per call"
        print(f"{a.python} {b}: {what}: median {statistics.median(vals):,.0f} "
              f"[{', '.join(f'{v:.0f}' for v in vals)}]{extra}")
        if res_agent[b]:
            vals = res_agent[b]
            print(f"{a.python} {b} --in-process: {what}: median "
                  f"{statistics.median(vals):,.0f} [{', '.join(f'{v:.0f}' for v in vals)}]")


if __name__ == "__main__":
    main()
