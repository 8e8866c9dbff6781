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
           activities=[CPU], with_stack=True); monitoring (3.12+): under an
           exact in-process call recorder on sys.monitoring (PEP 669), what
           an opt-in in-process mode of record would run in the target: each
           frame start, resume, return, yield, unwind and throw of every
           thread as (event, code object, perf_counter_ns, thread), packed
           into a byte buffer at the end of each repetition (inside its
           time), as a recorder would before it ships its events out;
           monitoring-c: the same with the callbacks in C (moncost.c, built
           by bench/hotpath_ab.py --inprocess into $PTG_MONCOST_DIR), as an
           agent injected into the target would register them. In-process profilers start
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
    p.add_argument("--mode", choices=("plain", "cprofile", "torchprof", "monitoring",
                                      "monitoring-c"),
                   default="plain")
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


class MonitoringRecorder:
    """Every Python frame event of every thread, exactly, through sys.monitoring.

    The callbacks do what a recorder must do and no more: one tuple per event
    into a list. flush() turns them into fixed-size records (code objects
    numbered at first sight, their names sent once) as a recorder ships them.
    The code objects stay referenced while recording, so an id is never reused.
    """

    def __init__(self):
        self.mon = sys.monitoring
        self.tool = self.mon.PROFILER_ID
        self.events, self.codes, self.packed = [], {}, 0
        self.starts = 0  # frames started, not counting the recorder's own
        self.own = {MonitoringRecorder.flush.__code__, MonitoringRecorder.__exit__.__code__}

    def __enter__(self):
        import struct

        mon, E, ev = self.mon, self.mon.events, self.events
        add, now, ident = ev.append, time.perf_counter_ns, threading.get_ident
        self.rec = struct.Struct("<BxxxIqQ")
        mon.use_tool_id(self.tool, "ptrace-gpu bench")
        cb = {E.PY_START: lambda code, off: add((1, code, now(), ident())),
              E.PY_RESUME: lambda code, off: add((2, code, now(), ident())),
              E.PY_RETURN: lambda code, off, val: add((3, code, now(), ident())),
              E.PY_YIELD: lambda code, off, val: add((4, code, now(), ident())),
              E.PY_UNWIND: lambda code, off, exc: add((5, code, now(), ident())),
              E.PY_THROW: lambda code, off, exc: add((6, code, now(), ident()))}
        mask = 0
        for event, fn in cb.items():
            mon.register_callback(self.tool, event, fn)
            mask |= event
        mon.set_events(self.tool, mask)
        return self

    def flush(self):
        """Packs the events so far; its own frames are not recorded (events off meanwhile)."""
        mask = self.mon.get_events(self.tool)
        self.mon.set_events(self.tool, 0)
        ev, codes, pack = self.events, self.codes, self.rec.pack
        out, names = [], []
        for kind, code, ts, tid in ev:
            n = codes.get(code)
            if n is None:
                n = codes[code] = len(codes) + 1
                names.append((n, code.co_qualname, code.co_filename, code.co_firstlineno))
            out.append(pack(kind, n, ts, tid))
            self.starts += kind == 1 and code not in self.own
        self.packed += len(b"".join(out)) + len(repr(names))
        ev.clear()
        self.mon.set_events(self.tool, mask)

    def __exit__(self, *exc):
        self.flush()
        self.mon.set_events(self.tool, 0)
        self.mon.free_tool_id(self.tool)


class CMonitoringRecorder:
    """MonitoringRecorder's events, recorded by C callbacks (moncost.c)."""

    def __init__(self):
        sys.path.insert(0, os.environ["PTG_MONCOST_DIR"])
        import ptg_moncost

        self.m, self.mon, self.tool = ptg_moncost, sys.monitoring, sys.monitoring.PROFILER_ID
        self.starts, self.first = 0, ptg_moncost.take()[1]

    def __enter__(self):
        E, m = self.mon.events, self.m
        self.mon.use_tool_id(self.tool, "ptrace-gpu bench")
        mask = 0
        for event, fn in ((E.PY_START, m.start), (E.PY_RESUME, m.resume), (E.PY_RETURN, m.ret),
                          (E.PY_YIELD, m.yield_), (E.PY_UNWIND, m.unwind),
                          (E.PY_THROW, m.throw)):
            self.mon.register_callback(self.tool, event, fn)
            mask |= event
        self.mon.set_events(self.tool, mask)
        return self

    def flush(self):
        pass  # the records are in shared memory already

    def __exit__(self, *exc):
        self.mon.set_events(self.tool, 0)
        self.mon.free_tool_id(self.tool)
        self.starts = self.m.take()[1] - self.first


def _profiler(mode):
    if mode == "monitoring":
        return MonitoringRecorder()
    if mode == "monitoring-c":
        return CMonitoringRecorder()
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
            if mode.startswith("monitoring"):
                prof.flush()
            times.append((time.perf_counter() - t0, time.process_time() - c0))
    finally:
        _profile_threads = False
        if prof is not None:
            prof.__exit__(None, None, None)
    extra = {"recorded_starts": prof.starts} if mode.startswith("monitoring") else {}
    return times, calls, extra


def _report(name, mode, times, calls, extra):
    wall = [t[0] for t in times]
    print(json.dumps({"workload": name, "mode": mode, "elapsed_s": statistics.median(wall),
                      "runs_s": wall, "cpu_s": [t[1] for t in times], "calls": calls,
                      **extra}),
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
