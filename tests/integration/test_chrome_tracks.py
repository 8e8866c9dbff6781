# SPDX-License-Identifier: MIT
"""export --chrome: every track's complete events nest, parents come first.

Perfetto and chrome://tracing draw the "X" events of one (pid, tid) as a
stack: two that overlap without one holding the other are drawn wrong, and
of two that start together the one written first becomes the parent. The
checker here reads the JSON with the standard library and asserts, per
track: no partial overlap, and at equal start the longer event first.

It runs on the real Kineto traces (imported with `ptrace-gpu import`) and on
a recorded PyTorch training loop (tests/workloads/mlp.py under Debian's
python3.11 with torch): its ProfilerStep#N spans, which end where
optimizer.step() returns, deep inside the loop's frames, must be on a track
of their own, as must its off-CPU intervals, each named by thread_name
metadata.
"""
import collections
import decimal
import glob
import gzip
import json
import os
import subprocess
import tempfile
import unittest

import ptg

PY = "/usr/bin/python3.11"


def ns(v):
    return int(decimal.Decimal(str(v)) * 1000)


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f, parse_float=decimal.Decimal)["traceEvents"]


def nesting_errors(events):
    """Per track: children written before their equal-start parents (file
    order), and partial overlaps. Returns (order, overlap), lists of messages."""
    tracks = collections.defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X":
            tracks[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["dur"]), i, e["name"]))
    order, overlap = [], []
    for track, evs in tracks.items():
        stack = []  # ends of the open events
        last = None
        for ts, dur, i, name in evs:
            if last and last[0] == ts and last[1] < dur:
                order.append(f"{track}: {name} ({dur} ns) written after {last[2]} "
                             f"({last[1]} ns) that starts with it")
            last = (ts, dur, name)
        for ts, dur, i, name in sorted(evs, key=lambda e: (e[0], -e[1], e[2])):
            while stack and stack[-1] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1]:
                overlap.append(f"{track}: {name} [{ts}, {ts + dur}] overhangs the event "
                               f"ending at {stack[-1]}")
            stack.append(ts + dur)
    return order, overlap


class ChromeTracks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def export(self, trace):
        out = os.path.join(self.tmp.name, os.path.basename(trace) + ".json")
        res = ptg.run(["export", "--chrome", out, trace])
        self.assertEqual(res.returncode, 0, res.stderr)
        return load(out)

    def test_checker_sees_bad_nesting(self):
        bad = [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "name": "child"},
               {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "name": "parent"},
               {"ph": "X", "pid": 1, "tid": 1, "ts": 8, "dur": 5, "name": "across"}]
        order, overlap = nesting_errors(bad)
        self.assertEqual((len(order), len(overlap)), (1, 1))

    def test_kineto_traces(self):
        kdir = os.path.join(os.environ.get("PTG_SHARED_DIR", ""), "traces", "kineto")
        traces = sorted(glob.glob(os.path.join(kdir, "*.json.gz")))
        if not traces:
            self.skipTest(f"no Kineto traces in {kdir}")
        for src in traces:
            with self.subTest(trace=os.path.basename(src)):
                ptg_path = os.path.join(self.tmp.name, os.path.basename(src) + ".ptg")
                res = ptg.run(["import", src, "-o", ptg_path])
                self.assertEqual(res.returncode, 0, res.stderr)
                order, overlap = nesting_errors(self.export(ptg_path))
                self.assertEqual(order[:5], [], f"{len(order)} errors")
                # Kineto's own GPU rows may overlap (a memcpy and a Stream
                # Sync on one stream): export must add no overlap of its own
                _, inherent = nesting_errors(load(src))
                extra = sorted(set(overlap) - set(inherent))
                self.assertEqual(extra[:5], [], f"{len(extra)} new overlaps")

    def test_recorded_training_loop(self):
        if subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode:
            self.skipTest(f"no torch in {PY}")
        trace = os.path.join(self.tmp.name, "mlp.ptg")
        res = ptg.run(["record", "-q", "--steps", "4", "-o", trace, "--", PY,
                       os.path.join(ptg.WORKLOADS, "mlp.py"), "--steps", "6"])
        self.assertEqual(res.returncode, 0, res.stderr)
        events = self.export(trace)
        order, overlap = nesting_errors(events)
        self.assertEqual(order[:5] + overlap[:5], [], f"{len(order) + len(overlap)} errors")
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e["name"] == "thread_name"}
        steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        self.assertGreaterEqual(len(steps), 3)
        step_tracks = {(e["pid"], e["tid"]) for e in steps}
        self.assertEqual(len(step_tracks), 1, step_tracks)
        track = step_tracks.pop()
        self.assertTrue(names.get(track, "").endswith(" steps"), names.get(track))
        others = {(e["pid"], e["tid"]) for e in events
                  if e.get("ph") == "X" and e["cat"] in ("python_function", "cpu_op")}
        self.assertNotIn(track, others)
        off = [e for e in events if e.get("ph") == "X" and e["cat"] == "off_cpu"]
        self.assertTrue(off, "no off-CPU intervals exported")
        for t in {(e["pid"], e["tid"]) for e in off}:
            self.assertTrue(names.get(t, "").endswith(" off-CPU"), names.get(t))
            self.assertNotIn(t, others)
        # metadata first, then the events by start
        kinds = [e.get("ph") == "M" for e in events]
        self.assertEqual(kinds, sorted(kinds, reverse=True))
        starts = [ns(e["ts"]) for e in events if e.get("ph") == "X"]
        self.assertEqual(starts, sorted(starts))

    def test_recorded_cuda_calls(self):
        """Every CUDA call of the fake driver's workload has for parent the
        Python function that made it (or, for a runtime call's driver call,
        that runtime call): the exported file order says so to a reader."""
        libdir = os.path.join(ptg.BUILD, "tests", "helpers")
        if not os.path.exists(os.path.join(libdir, "libcuda.so.1")):
            self.skipTest(f"no fake CUDA libraries in {libdir}")
        trace = os.path.join(self.tmp.name, "cuda.ptg")
        w = ptg.Workload(ptg.Python("debian-3.11"), "cuda_driver.py", libdir)
        rec = None
        try:
            rec = ptg.Recorder(["-p", str(w.pid)], trace)
            w.go()
            self.assertEqual(w.proc.stdout.readline().strip(), "loaded")
            probed = 0
            while probed < 2:
                line = rec.proc.stderr.readline()
                self.assertTrue(line, "record ended before probing: " + rec.stderr)
                rec.lines.append(line)
                # only the fake's: CUDA's own may be probed ahead (ld.so.cache)
                probed += "cuda: probing" in line and libdir in line
            w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.close(rec)
        events = self.export(trace)
        order, overlap = nesting_errors(events)
        self.assertEqual(order[:5] + overlap[:5], [], f"{len(order) + len(overlap)} errors")
        parents = collections.Counter()
        calls = 0
        stacks = {}
        for e in events:
            if e.get("ph") != "X":
                continue
            stack = stacks.setdefault((e["pid"], e["tid"]), [])
            ts, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if e["cat"] in ("cuda_runtime", "cuda_driver"):
                calls += 1
                parent = stack[-1][1] if stack else ""
                parents[parent.rpartition(": ")[2]] += 1
            stack.append((end, e["name"]))
        self.assertGreater(calls, 30)
        good = set(NESTED.values()) | set(NESTED) | {
            "launch_kernels", "launch_graph", "copy_and_set", "wait_for_gpu", "fail_sync",
            "runtime_calls"}
        wrong = {k: v for k, v in parents.items() if k not in good}
        self.assertEqual(wrong, {}, f"{sum(wrong.values())} of {calls} calls under the wrong "
                         "parent")


# A fake runtime call makes one driver call, nested in it.
NESTED = {"cudaLaunchKernel": "cuLaunchKernel", "cudaLaunchKernelExC": "cuLaunchKernelEx",
          "cudaMemcpyAsync": "cuMemcpyAsync", "cudaStreamSynchronize": "cuStreamSynchronize"}


if __name__ == "__main__":
    ptg.main()
