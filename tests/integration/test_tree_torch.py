"""Dispatcher ops of every process of a multi-process recording (-p A,B,
--children, --per-process), on Debian's PyTorch: each process's op counts
exactly as torch.profiler counts the same steps in-process, libtorch
imported after the attach in one of them, and ops of a forked child (a
DataLoader worker) apart from its parent's. Runs for each interpreter that
imports torch.
"""
import collections
import json
import os
import re
import signal
import subprocess
import tempfile
import unittest

import ptg
from test_torch_ops import DISAGREE, STEPS, UNOBSERVED, Ops

# tests/workloads/torch_fork.py: torch.mm calls of each process
FORK_MM = {"parent": 200, "child": 300}


def ops_by_pid(trace):
    """{pid: Counter(aten op)} of the trace's closed ops."""
    got = collections.defaultdict(collections.Counter)
    for c in Ops(trace).calls:
        if c[1].startswith("aten::"):
            got[c[6].pid][c[1]] += 1
    return got


@ptg.per_interpreter(need_torch=True)
class TreeTorch(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def oracle(self, python):
        """torch.profiler's counts of mlp.py's STEPS steps, in a process of their own."""
        mlp = python.path(os.path.join(ptg.WORKLOADS, "mlp.py"))
        res = subprocess.run(python.argv(mlp, "--oracle", "--steps", str(STEPS)),
                             capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        line = next(l for l in res.stdout.splitlines() if l.startswith("oracle "))
        return {k: v for k, v in json.loads(line[7:]).items() if k.startswith("aten::")}

    def assert_oracle(self, ours, theirs, nested):
        self.assertGreater(len(theirs), 20)
        for name in sorted(set(ours) | set(theirs)):
            mine, torch_n = ours.get(name, 0), theirs.get(name, 0)
            if name in DISAGREE:
                self.assertLessEqual(torch_n, mine, name)
                self.assertGreaterEqual(torch_n, mine - nested[name], name)
            elif name in UNOBSERVED:
                self.assertEqual(torch_n, 0, name)
            else:
                self.assertEqual(mine, torch_n, f"{name}: ptrace-gpu {mine}, torch.profiler "
                                                f"{torch_n}")

    def check_two_pids_per_process(self, python):
        """-p A,B --per-process: A trains mlp.py (torch imported before the
        attach), B imports torch after it; each file holds its own ops."""
        theirs = self.oracle(python)
        out = os.path.join(self.tmp.name, "run.ptg")
        ws = []
        try:
            ws = [ptg.Workload(python, "mlp.py", "--steps", str(STEPS)),
                  ptg.Workload(python, "late_torch.py", "--seconds", "1")]
            rec = ptg.Recorder(["-p", ",".join(str(w.pid) for w in ws), "--per-process"], out)
            self.assertIn("PyTorch ops of", rec.stderr, "libtorch probed before recording")
            for w in ws:
                w.go()
            printed = [w.finish() for w in ws]
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            for w in ws:
                w.kill()
        n = int(re.search(r"mm (\d+)", printed[1]).group(1))
        mlp, late = (ptg.Trace(os.path.join(self.tmp.name, f"run.pid{w.pid}.ptg")) for w in ws)
        self.assertEqual(mlp.losses, [])
        ops = Ops(mlp)
        self.assertEqual({c[6].pid for c in ops.calls}, {ws[0].pid})
        self.assert_oracle(ops.count(), theirs, ops.nested_in_same())
        # from the first call after `import torch` maps libtorch
        self.assertEqual(ops_by_pid(late)[ws[1].pid]["aten::mm"], n)
        self.assertEqual(set(ops_by_pid(late)), {ws[1].pid})

    def module_rows(self, path):
        """{op: {module path: calls}} of report --group-by-module."""
        res = ptg.run(["report", "--group-by-module", path])
        self.assertEqual(res.returncode, 0, res.stderr)
        rows = collections.defaultdict(dict)
        for line in res.stdout.splitlines():
            m = re.match(r"\s*(aten::\S+)(?:\s+\S+){5}\s+(\d+)\s+(\S*)\s*$", line)
            if m:
                rows[m.group(1)][m.group(3)] = int(m.group(2))
        return rows

    def check_module_paths_two_pids(self, python):
        """-p A,B --per-process: nn.Module paths of each process's ops, read in
        its own memory; B's model has hooks and a module its parent does not
        hold, so the two name the same ops apart. Each is stopped while the
        trained workloads still live (names are read from their memory)."""
        out = os.path.join(self.tmp.name, "mods.ptg")
        ws, rec = [], None
        try:
            ws = [ptg.Workload(python, "mlp.py", "--steps", str(STEPS), "--hold"),
                  ptg.Workload(python, "mlp.py", "--steps", str(STEPS), "--hooks", "--hold")]
            rec = ptg.Recorder(["-p", ",".join(str(w.pid) for w in ws), "--per-process"], out)
            for w in ws:
                w.go()
            for w in ws:
                self.assertEqual(w.proc.stdout.readline().strip(), "trained")
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            for w in ws:
                w.go()
                self.assertIn("done", w.finish())
        finally:
            for w in ws:
                w.kill()
                for f in (w.proc.stdin, w.proc.stdout):
                    f.close()
            if rec:
                rec.proc.stderr.close()
        plain, hooked = (self.module_rows(os.path.join(self.tmp.name, f"mods.pid{w.pid}.ptg"))
                         for w in ws)
        fc1 = "TOP(Net)::forward.fc1(Linear)::forward"
        fc2 = "TOP(Net)::forward.fc2(Linear)::forward"
        self.assertEqual(plain["aten::addmm"], {fc1: STEPS, fc2: STEPS})
        self.assertEqual(plain["aten::relu"], {"TOP(Net)::forward": STEPS})
        self.assertEqual(plain["aten::mse_loss"], {"TOP(MSELoss)::forward": STEPS})
        self.assertNotIn("aten::clamp", plain)
        self.assertEqual(hooked["aten::addmm"], {
            fc1: STEPS, fc2: STEPS, "TOP(Net)::forward.Linear#0(Linear)::forward": STEPS})
        self.assertEqual(hooked["aten::clamp"], {"TOP(Net)::forward.fc1(Linear)::hook": STEPS})
        self.assertEqual(hooked["aten::relu"], {"TOP(Net)::forward": STEPS})

    def check_children_fork(self, python):
        """--children: a child forked after the attach (a DataLoader worker) and
        its parent, each with its own aten::mm count."""
        out = os.path.join(self.tmp.name, "fork.ptg")
        w = ptg.Workload(python, "torch_fork.py")
        try:
            rec = ptg.Recorder(["-p", str(w.pid), "--children"], out)
            w.go()
            printed = w.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        pids = {int(p): role for role, p in re.findall(r"^(parent|child) (\d+)$", printed, re.M)}
        self.assertEqual(sorted(pids.values()), ["child", "parent"], printed)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        got = ops_by_pid(trace)
        self.assertEqual({pid: got[pid]["aten::mm"] for pid in pids},
                         {pid: FORK_MM[role] for pid, role in pids.items()})
        self.assertEqual(set(got) - set(pids), set())


if __name__ == "__main__":
    ptg.main()
