"""What every benchmark workload shares: arguments, the start gate, the timing.

A workload module defines `setup(args)`, which builds its inputs (imports,
models, warm-up) and returns a function doing the fixed amount of work; `run()`
then times only that function, so interpreter startup, imports and a tracer's
attach time are never counted:

  python3 WORKLOAD.py [--wait] [--mode plain|cprofile|torchprof] [--repeat N]
                      [--scale X] [--threads T]

--mode     plain: no profiler; cprofile: the work runs under cProfile.Profile
           (and so does every thread it starts, each with its own, as cProfile
           is per thread); torchprof: under torch.profiler.profile(
           activities=[CPU], with_stack=True). In-process profilers start
           before and stop after the timed region, so their start-up and
           post-processing are not counted either (as a tracer's attach and
           detach are not).
--repeat   do the work N times, each timed on its own (default 1).
--scale    multiplies the amount of work (default 1).
--threads  threads of work, for the workloads that have a choice (default 1).
--wait     the gate: print "ready PID" and block in a read of stdin (C code,
           no Python frame runs) so that `record -p` or a sampler can attach
           first. Each line then runs the work: "go [MODE [N]]" (MODE and N
           default to --mode and --repeat; any other line is a plain "go");
           end of input or "quit" ends the process. A tracer can attach and detach between
           lines, so one process serves every configuration and the untraced
           runs are measured in the very process that is traced.

After each run, one JSON line on stdout: workload, mode, elapsed_s (median of
the repetitions), runs_s (the wall time of each repetition), cpu_s (the CPU
time of the whole process, all threads, user and system, during each
repetition: less disturbed by other load on a shared machine than wall time)
and `calls`, the exact number of Python calls one repetition makes when the
workload can know it (else null).
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

_profile_threads = False


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--wait", action="store_true")
    p.add_argument("--mode", choices=("plain", "cprofile", "torchprof"), default="plain")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def _install_thread_profiling():
    """cProfile is per thread: while on, every thread the work starts gets its own profiler."""
    import cProfile

    run = threading.Thread.run

    def maybe_profiled_run(self):
        if not _profile_threads:
            return run(self)
        prof = cProfile.Profile()
        prof.enable()
        try:
            return run(self)
        finally:
            prof.disable()

    threading.Thread.run = maybe_profiled_run


def _profiler(mode):
    if mode == "cprofile":
        import cProfile

        return cProfile.Profile()
    if mode == "torchprof":
        import torch.profiler

        return torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True)
    return None


def _timed(work, mode, repeat):
    global _profile_threads
    prof = _profiler(mode)
    times = []
    if prof is not None:
        prof.__enter__()
    _profile_threads = mode == "cprofile"
    try:
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            calls = work()
            times.append((time.perf_counter() - t0, time.process_time() - c0))
    finally:
        _profile_threads = False
        if prof is not None:
            prof.__exit__(None, None, None)
    return times, calls


def _report(name, mode, times, calls):
    wall = [t[0] for t in times]
    print(json.dumps({"workload": name, "mode": mode, "elapsed_s": statistics.median(wall),
                      "runs_s": wall, "cpu_s": [t[1] for t in times], "calls": calls}),
          flush=True)


def run(name, setup):
    args = parse_args()
    work = setup(args)
    _install_thread_profiling()
    if not args.wait:
        _report(name, args.mode, *_timed(work, args.mode, args.repeat))
        return
    print("ready", os.getpid(), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["quit"]:
            break
        mode = words[1] if len(words) > 1 else args.mode
        repeat = int(words[2]) if len(words) > 2 else args.repeat
        _report(name, mode, *_timed(work, mode, repeat))
