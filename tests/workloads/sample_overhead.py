"""Measures what `ptrace-gpu sample` costs: run as root, prints one JSON line.

    python3 tests/workloads/sample_overhead.py PTRACE_GPU [--seconds 60] [--threads 100]
                                               [--freq 99] [--native] [--pids]

Starts --threads busy Python threads (sample_split.py loops), split over one
process per interpreter found, then `ptrace-gpu sample -a` (with --pids:
`-p` those processes, so that other Python processes on a shared machine
add nothing) for --seconds.
Costs measured:
  - the sampler process: user + system CPU time from wait4()'s rusage (all
    of it: loading, /proc scans each second, resolving, writing the profile);
  - the BPF programs: run_time_ns and run_cnt from bpf_prog_info (bpftool),
    with kernel.bpf_stats_enabled=1, read just before the sampler is stopped.
Both are reported as a share of one CPU over the wall time sampled.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTERPRETERS = ["/usr/bin/python3.11", "/root/.pyenv/versions/3.11.7/bin/python3.11"]


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def prog_stats(name):
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    for p in json.loads(out):
        if p.get("name") == name:
            return p.get("run_time_ns", 0), p.get("run_cnt", 0)
    return 0, 0


def main():
    ptg = sys.argv[1]
    seconds, threads = arg("--seconds", 60.0), arg("--threads", 100)
    freq = arg("--freq", 99)
    pythons = [p for p in INTERPRETERS if os.path.exists(p)]
    per = [threads // len(pythons) + (i < threads % len(pythons)) for i in range(len(pythons))]
    work = [subprocess.Popen([py, os.path.join(HERE, "sample_split.py"), "--threads", str(n)],
                             stdout=subprocess.PIPE, text=True)
            for py, n in zip(pythons, per)]
    for w in work:
        w.stdout.readline()
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    out = os.path.join(tempfile.mkdtemp(), "overhead.pb.gz")
    target = ["-p", ",".join(str(w.pid) for w in work)] if "--pids" in sys.argv else ["-a"]
    cmd = [ptg, "sample", *target, "-F", str(freq), "-o", out, "-q"]
    if "--native" in sys.argv:
        cmd.append("--native")
    try:
        sampler = subprocess.Popen(cmd)
        t0 = time.monotonic()
        time.sleep(seconds)
        run_ns, run_cnt = prog_stats("sample_cpu")
        wall = time.monotonic() - t0
        sampler.send_signal(signal.SIGINT)
        _, status, ru = os.wait4(sampler.pid, 0)
    finally:
        for w in work:
            w.kill()
            w.wait()
        subprocess.run(["sysctl", "-q", f"kernel.bpf_stats_enabled={old}"])
    cpu = ru.ru_utime + ru.ru_stime
    print(json.dumps({
        "mode": target[0], "seconds": round(wall, 2), "threads": threads, "processes": len(work), "freq": freq,
        "exit_status": status, "sampler_user_s": round(ru.ru_utime, 3),
        "sampler_sys_s": round(ru.ru_stime, 3), "sampler_cpu_pct": round(100 * cpu / wall, 3),
        "bpf_runs": run_cnt, "bpf_run_time_s": round(run_ns / 1e9, 4),
        "bpf_ns_per_run": round(run_ns / run_cnt) if run_cnt else 0,
        "bpf_cpu_pct": round(100 * run_ns / 1e9 / wall, 3),
        "total_cpu_pct": round(100 * (cpu + run_ns / 1e9) / wall, 3),
    }))


if __name__ == "__main__":
    main()
