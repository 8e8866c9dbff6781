#!/usr/bin/env python3
"""The loader's memory and throughput on a call-dense target, end to end.

Starts --procs Python processes, each running --threads threads of a tight
recursive fib loop (--work N: N empty loop iterations in each call, for a
lower rate of calls), and one `ptrace-gpu record -p PID` per process for
--duration seconds, all at once. For each recorder it prints the command,
its peak RSS (VmHWM from /proc/PID/status while it runs, and ru_maxrss
from wait4 when it exits, the larger), the events it wrote per second, the
events it lost and the bytes per event on disk (trace size / events).

Not a test: nothing here asserts anything about time. Run as root:

  sudo bench/loader.py [--ptg build/ptrace-gpu] [--ringbuf-mb N] [--procs 2]
                      [--record-args="--in-process"]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

FIB = r"""
import sys, threading
WORK = range(int(sys.argv[2]))
def fib(n):
    for _ in WORK:
        pass
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def loop():
    while True:
        fib(18)
ts = [threading.Thread(target=loop, daemon=True) for _ in range(int(sys.argv[1]))]
for t in ts:
    t.start()
print("ready", flush=True)
for t in ts:
    t.join()
"""

SUMMARY = re.compile(r"after ([0-9.]+) s: (\d+) Python calls .*\((\d+) events\), (\d+) events lost")


def vmhwm(pid):
    """Peak RSS of a live process in KiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--ptg", default=os.path.join(here, "..", "build", "ptrace-gpu"))
    p.add_argument("--python", default="/usr/bin/python3.11")
    p.add_argument("--ringbuf-mb", type=int, default=None, help="default: the recorder's own")
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--work", type=int, default=0,
                   help="loop iterations in each call of fib, to lower the rate of calls "
                        "(0: none, the densest)")
    p.add_argument("--record-args", default="",
                   help='more for each recorder, e.g. "--in-process" (the agent\'s ring)')
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("loader.py: run as root (record attaches uprobes)")

    targets = []
    for _ in range(args.procs):
        t = subprocess.Popen([args.python, "-c", FIB, str(args.threads), str(args.work)],
                             stdout=subprocess.PIPE, text=True)
        if t.stdout.readline().strip() != "ready":
            sys.exit("loader.py: a target did not start")
        targets.append(t)

    tmp = tempfile.mkdtemp(prefix="ptg-loader-")
    recs = []
    try:
        for i, t in enumerate(targets):
            out = os.path.join(tmp, f"t{i}.ptg")
            cmd = [args.ptg, "record", "-p", str(t.pid), "--duration", str(args.duration),
                   "-o", out]
            if args.ringbuf_mb:
                cmd += ["--ringbuf-mb", str(args.ringbuf_mb)]
            cmd += args.record_args.split()
            r = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
            recs.append((cmd, out, r))
        hwm = {}
        cpu = {}
        live = {r.pid: r for _, _, r in recs}
        while live:
            for pid, r in list(live.items()):
                v = vmhwm(pid)
                if v is not None:
                    hwm[pid] = max(hwm.get(pid, 0), v)
                # wait4 for this child's own peak, past the last sample
                done, status, ru = os.wait4(pid, os.WNOHANG)
                if done:
                    r.returncode = os.waitstatus_to_exitcode(status)
                    hwm[pid] = max(hwm.get(pid, 0), ru.ru_maxrss)
                    cpu[pid] = ru.ru_utime + ru.ru_stime
                    del live[pid]
            time.sleep(0.05)
        load = os.getloadavg()[0]
        total = 0
        for cmd, out, r in recs:
            err = r.stderr.read()
            m = SUMMARY.search(err)
            if r.returncode or not m:
                print(f"$ {' '.join(cmd)}\nfailed ({r.returncode}): {err.strip()}")
                continue
            secs, events, lost = float(m.group(1)), int(m.group(3)), int(m.group(4))
            size = os.path.getsize(out)
            total += events / secs
            print(f"$ {' '.join(cmd)}")
            print(f"  peak RSS {hwm.get(r.pid, 0) / 1024:.1f} MiB, {events / secs:,.0f} events/s "
                  f"({events:,} in {secs:.2f} s), {lost:,} lost, "
                  f"{size / max(events, 1):.2f} bytes/event ({size:,} bytes)")
            # set-up (BTF, probes) included: an upper bound on the cost per event
            ns = cpu[r.pid] * 1e9 / max(events, 1)
            print(f"  loader CPU {cpu[r.pid]:.2f} s, {ns:.0f} ns/event: "
                  f"{1e9 / max(ns, 1e-9):,.0f} events/s per core")
        print(f"all recorders: {total:,.0f} events/s; load average {load:.2f} on "
              f"{os.cpu_count()} CPUs")
    finally:
        for t in targets:
            t.kill()
            t.wait()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
