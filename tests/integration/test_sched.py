"""Off-CPU intervals from the scheduler probes, on threads of a Python workload
that sleep, block on a pipe, spin, or compete for one CPU (sched_threads.py).

Bounds are loose enough never to flake on a busy machine, yet each one fails
if the reason, the time or the Python function is wrong: a thread that sleeps
SLEEPS x SLEEP_S is blocked at least that long inside sleep_loop() and never
longer than sleep_loop() ran; a spinning thread is never blocked; two threads
pinned to one CPU preempt each other and wait on its run queue.
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import collections
import os
import sys
import tempfile
import unittest

import ptg

sys.path.insert(0, ptg.WORKLOADS)
import sched_threads as load  # noqa: E402

PREEMPTED, BLOCKED = 1, 2
NS = 10**9


class Trace(ptg.Trace):
    """ptg.Trace, tolerant of names that are not UTF-8: module code objects read
    while the interpreter starts can come out garbled (pyframe's business, not
    this test's)."""

    def __init__(self, path):
        run = ptg.run
        ptg.run = lambda args, **kw: run(args, errors="replace", **kw)
        try:
            super().__init__(path)
        finally:
            ptg.run = run


def analyse(trace):
    """Per tid: the spans of each Python function (name -> [(start, end)]) and
    the off-CPU records with the innermost Python function they fell in."""
    stacks = collections.defaultdict(list)
    spans = collections.defaultdict(lambda: collections.defaultdict(list))
    off = collections.defaultdict(list)
    for r in trace.records:
        if r.kind == "py_enter":
            stacks[r.tid].append((r.name, r.ts))
        elif r.kind == "py_exit":
            name, ts = stacks[r.tid].pop()
            spans[r.tid][name].append((ts, r.ts))
        elif r.kind == "sched":
            inner = stacks[r.tid][-1][0] if stacks[r.tid] else None
            off[r.tid].append((r, inner))
    return spans, off


class Sched(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "sched.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, python, *opts):
        w = ptg.Workload(python, "sched_threads.py")
        try:
            rec = ptg.Recorder([*opts, "-p", str(w.pid)], self.out)
            w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        return w.pid, Trace(self.out)

    def tid_running(self, spans, func):
        tids = [tid for tid, funcs in spans.items() if func in funcs]
        self.assertEqual(len(tids), 1, f"one thread ran {func}")
        span = spans[tids[0]][func]
        self.assertEqual(len(span), 1, f"{func} ran once")
        return tids[0], span[0]

    def off_in(self, off, tid, func):
        return [r for r, inner in off[tid] if inner == func]

    def check_attached(self, python):
        pid, trace = self.record(python)
        lost = [x for x in trace.losses if x.startswith(("sched", "py_event", "py_stack"))]
        self.assertEqual(lost, [])
        spans, off = analyse(trace)
        for records in off.values():
            for r, _ in records:
                self.assertIn(r.fields.get("aux0"), (PREEMPTED, BLOCKED))
                self.assertGreater(r.fields.get("dur", 0), 0)
                self.assertEqual(r.pid, pid)
        self.verify_sleeper(spans, off)
        self.verify_reader(spans, off, pid)
        self.verify_spinner(spans, off)
        self.verify_hashers(spans, off)
        self.verify_report(spans)

    def verify_sleeper(self, spans, off):
        """Selected by time, not by the function they fell in: an interval
        whose switch back the kernel did not report is sent at the thread's
        next switch out, after the events of that run (the last sleep's, once
        sleep_loop() has returned)."""
        tid, (start, end) = self.tid_running(spans, "sleep_loop")
        inside = [r for r, _ in off[tid] if start <= r.ts < end]
        blocked = sum(r.fields["dur"] for r in inside if r.fields["aux0"] == BLOCKED)
        seen = [(r.ts - start, r.fields, inner) for r, inner in off[tid]]
        self.assertGreaterEqual(blocked, 0.98 * load.SLEEPS * load.SLEEP_S * NS, seen)
        self.assertLessEqual(sum(r.fields["dur"] for r in inside), end - start)
        long = [r for r in inside if r.fields["dur"] >= 0.9 * load.SLEEP_S * NS]
        self.assertGreaterEqual(len(long), load.SLEEPS, "one long interval per sleep")
        self.assertTrue(all(r.fields["aux0"] == BLOCKED for r in long), "sleeping is blocked")
        in_func = self.off_in(off, tid, "sleep_loop")
        self.assertGreaterEqual(len([r for r in in_func if r in long]), load.SLEEPS - 1, seen)
        for r in in_func:
            self.assertGreaterEqual(r.ts, start)
            self.assertLessEqual(r.ts + r.fields["dur"], end)

    def verify_reader(self, spans, off, main_tid):
        tid, (start, end) = self.tid_running(spans, "read_pipe")
        inside = self.off_in(off, tid, "read_pipe")
        self.assertTrue(inside)
        wait = max(inside, key=lambda r: r.fields["dur"])
        self.assertGreaterEqual(wait.fields["dur"], 0.5 * load.PIPE_DELAY_S * NS)
        self.assertEqual(wait.fields["aux0"], BLOCKED)
        self.assertEqual(wait.fields.get("aux2"), main_tid, "the main thread wrote the pipe")
        self.assertLessEqual(wait.fields.get("aux1", 0), wait.fields["dur"])

    def verify_spinner(self, spans, off):
        """Alone and busy, it is never blocked; how long others keep it off
        the CPU depends on the machine's load, so only the reason is checked.
        Selected by time, as the sleeper's: its wait for the others, before
        spin(), is sent at its first switch out inside spin() when the kernel
        did not report its switch back (CI once saw 550 ms of it there)."""
        tid, (start, end) = self.tid_running(spans, "spin")
        self.assertGreaterEqual(end - start, load.SPIN_S * NS)
        inside = [r for r, _ in off[tid] if start <= r.ts < end]
        self.assertLessEqual(sum(r.fields["dur"] for r in inside), end - start)
        blocked = sum(r.fields["dur"] for r in inside if r.fields["aux0"] == BLOCKED)
        self.assertLess(blocked, 0.05 * (end - start), "a spinning thread does not block")
        for r in inside:
            if r.fields["aux0"] == PREEMPTED:
                self.assertEqual(r.fields.get("aux1"), r.fields["dur"])

    def verify_hashers(self, spans, off):
        tids = [tid for tid, funcs in spans.items() if "hash_pinned" in funcs]
        self.assertEqual(len(tids), 2)
        for tid in tids:
            (start, end), = spans[tid]["hash_pinned"]
            pre = [r for r in self.off_in(off, tid, "hash_pinned")
                   if r.fields["aux0"] == PREEMPTED]
            self.assertTrue(pre, "two threads on one CPU preempt each other")
            self.assertGreaterEqual(sum(r.fields["dur"] for r in pre), 0.1 * (end - start))
            for r in pre:
                self.assertEqual(r.fields.get("aux1"), r.fields["dur"],
                                 "a preempted thread waits on the run queue all along")
                self.assertNotIn("aux2", r.fields, "nobody wakes a preempted thread")

    def verify_report(self, spans):
        tid, _ = self.tid_running(spans, "sleep_loop")
        res = ptg.run(["report", self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("off-CPU time by thread:\n", res.stdout)
        line = [x for x in res.stdout.splitlines() if x.startswith(f"  tid {tid} ")]
        self.assertEqual(len(line), 1, res.stdout)
        total = float(line[0].split(": ")[1].split(" s ")[0])
        self.assertGreaterEqual(total, 0.98 * load.SLEEPS * load.SLEEP_S)

    def check_command(self, python):
        script = python.path(os.path.join(ptg.WORKLOADS, "sched_threads.py"))
        res = ptg.run(["record", "-o", self.out, "--", *python.argv(script)])
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = Trace(self.out)
        spans, off = analyse(trace)
        self.verify_sleeper(spans, off)
        self.verify_hashers(spans, off)

    def check_no_sched(self, python):
        _, trace = self.record(python, "--no-sched")
        self.assertFalse([r for r in trace.records if r.kind == "sched"])
        self.assertNotIn("off-CPU time", ptg.run(["report", self.out]).stdout)


ptg.per_interpreter(Sched)

if __name__ == "__main__":
    ptg.main()
