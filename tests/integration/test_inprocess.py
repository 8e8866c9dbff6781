"""record --in-process (the sys.monitoring agent) on every interpreter: the same
exact counts as the uprobes, frames open at attach, threads; a recorder killed
with SIGKILL leaves the target running with its tool id free; a second
recording finds the agent loaded and works. Python 3.11 is refused in one line."""
import collections
import json
import os
import signal
import subprocess
import tempfile
import unittest

import ptg

# what this file checks is the Python calls: the other probes only cost time here
QUIET_PROBES = ["--no-cuda", "--no-ops", "--no-sched", "--no-cupti"]


class InProcess(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def needs_312(self, python, check_refusal=False):
        """3.11: skip (after checking the one-line refusal, once)."""
        if python.version >= (3, 12):
            return
        if not check_refusal:
            self.skipTest(f"{python}: record --in-process needs sys.monitoring, Python 3.12+")
        w = ptg.Workload(python, "fib.py")
        try:
            res = ptg.run(["record", "--in-process", "-p", str(w.pid), "-o",
                           os.path.join(self.tmp.name, "no.ptg")])
        finally:
            w.kill()
        self.assertEqual(res.returncode, 1, res.stderr)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn("needs sys.monitoring, Python 3.12+", lines[0])
        self.skipTest(f"{python}: record --in-process needs sys.monitoring, Python 3.12+")

    def record(self, python, script, *extra):
        return ptg.Trace(self.record_path(python, script, *extra))

    def record_path(self, python, script, *extra):
        """The trace of script recorded --in-process from go to its exit, checked whole."""
        out = os.path.join(self.tmp.name, f"{script}.ptg")
        w = ptg.Workload(python, script)
        try:
            rec = ptg.Recorder(["--in-process", "-p", str(w.pid), *extra], out)
            self.assertIn("in-process: sys.monitoring tool id", rec.stderr)
            w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [], "events were lost")
        # a training workload's trace says its steps instead
        self.assertIn(trace.meta["stop.reason"], ("target exited", "2 steps recorded"))
        return out

    def check_fib(self, python):
        """Every probe as by default: only the Python calls change source."""
        self.needs_312(python, check_refusal=True)
        calls = [c for c in self.record(python, "fib.py").calls()
                 if c[1] == "f" and c[2].endswith("fib.py")]
        self.assertEqual(len(calls), 5919)
        self.assertTrue(all(c[7] == 0 for c in calls))
        self.assertEqual(sum(1 for c in calls if c[8] == min(x[8] for x in calls)), 3)

    def check_mixed_matches_oracle(self, python):
        """Generators, exceptions, recursion, methods: sys.setprofile's counts."""
        self.needs_312(python)
        oracle = json.loads(subprocess.run(
            python.argv(python.path(os.path.join(ptg.WORKLOADS, "mixed.py")), "--oracle"),
            check=True, capture_output=True, text=True).stdout)
        counts = self.record(python, "mixed.py", *QUIET_PROBES).count("mixed.py")
        got = {k: v for k, v in counts.items() if k in oracle or not k.startswith("<module>")}
        self.assertEqual(got, oracle)

    def check_threads_and_open_frames(self, python):
        self.needs_312(python)
        counts = self.record(python, "threads.py", *QUIET_PROBES).count(
            "threads.py", by_tid=True)
        leaves = sorted((k.split(":")[0], n) for (tid, k), n in counts.items()
                        if k.startswith("leaf"))
        self.assertEqual(leaves, [(f"leaf{i}", 1000) for i in range(4)])
        self.assertEqual(len({tid for (tid, k) in counts if k.startswith("leaf")}), 4)
        # frames open at the attach: as the uprobes record them, opened at the start
        trace = self.record(python, "deep.py", *QUIET_PROBES)
        pre = [r for r in trace.records
               if r.kind == "py_enter" and r.flags & ptg.ENTER_PREEXISTING]
        names = [r.name for r in pre if r.file.endswith(("deep.py", "gate.py"))]
        self.assertEqual(names, ["<module>", "main"] + ["deep"] * 20 + ["wait_for_go"])
        start = int(trace.meta["start.monotonic_ns"])
        self.assertTrue(all(r.ts == start for r in pre))

    def check_torch_ops_nest_in_frames(self, python):
        """Ops (uprobes) and Python frames (the agent) merged in time: each op
        runs under the frame that called it, as with record -p."""
        self.needs_312(python)
        if not python.has_torch:
            self.skipTest(f"no PyTorch in {python}")
        out = self.record_path(python, "mlp.py", "--steps", "2")
        trace = ptg.Trace(out)
        stacks, linear, addmm = collections.defaultdict(list), [], 0
        for r in trace.records:
            if r.kind in ("py_enter", "op_enter"):
                stacks[r.tid].append(r)
            elif r.kind in ("py_exit", "op_exit"):
                e = stacks[r.tid].pop()
                self.assertEqual(e.kind == "op_enter", r.kind == "op_exit", (e.ts, r.ts))
                py = [x.name for x in stacks[r.tid] if x.kind == "py_enter"]
                if e.name == "aten::linear":
                    linear.append(py[-1] if py else None)
                addmm += e.name == "aten::addmm"
        self.assertEqual(linear, ["Linear.forward"] * 4)
        self.assertEqual(addmm, 4)
        # nn.Module paths, from the first locals the agent sends
        res = ptg.run(["report", "--group-by-module", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        for fc in ("fc1", "fc2"):
            self.assertRegex(res.stdout, rf"aten::addmm\s.*\s2\s+TOP\(Net\)::forward\.{fc}"
                                         rf"\(Linear\)::forward")

    def check_killed_then_again(self, python):
        """SIGKILL of the recorder: the target goes on, its tool id is freed; a
        second recording (the agent already loaded) counts exactly."""
        self.needs_312(python)
        w = ptg.Workload(python, "inproc_again.py")
        try:
            first = ptg.Recorder(["--in-process", "-p", str(w.pid), *QUIET_PROBES],
                                 os.path.join(self.tmp.name, "killed.ptg"))
            w.go()
            self.assertEqual(w.proc.stdout.readline().strip(), "phase1")
            first.proc.kill()
            first.proc.wait()
            w.go()
            after = json.loads(w.proc.stdout.readline())
            self.assertEqual(after, {"tools": {}, "fib20": 6765})
            out = os.path.join(self.tmp.name, "again.ptg")
            second = ptg.Recorder(["--in-process", "-p", str(w.pid), *QUIET_PROBES], out)
            w.go()
            self.assertEqual(w.proc.stdout.readline().strip(), "phase2")
            second.proc.send_signal(signal.SIGINT)
            self.assertEqual(second.wait(), 0, second.stderr)
            w.go()
            self.assertEqual(json.loads(w.proc.stdout.readline()), {"tools": {}})
            self.assertIn("done", w.finish())
            self.assertEqual(w.proc.returncode, 0)
        finally:
            w.kill()
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.count("inproc_again.py")["f:15"], 5919)


ptg.per_interpreter(InProcess)


@ptg.once
class Refusals(unittest.TestCase):
    """What --in-process does not take: one line, a non-zero status, nothing started."""

    def refused(self, args, text, status):
        res = ptg.run(["record", "--in-process", "-o", "/nonexistent/x.ptg", *args])
        self.assertEqual(res.returncode, status, res.stderr)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn(text, lines[0])

    def test_command_and_sets(self):
        for args in (["--", "true"], ["-p", f"{os.getpid()},1"],
                     ["-p", str(os.getpid()), "--children"], ["--uid", "0"]):
            # a usage error
            self.refused(args, "--in-process takes one running process (-p PID)", 2)

    def test_agent_not_root_only(self):
        """$PTG_PYMON_AGENT in a folder others may write: refused, the target untouched."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        with tempfile.TemporaryDirectory(dir="/tmp") as d:
            os.chmod(d, 0o777)
            lib = os.path.join(d, "libptg_pymon.so")
            with open(os.path.join(ptg.BUILD, "libptg_pymon.so"), "rb") as src, \
                    open(lib, "wb") as dst:
                dst.write(src.read())
            w = ptg.Workload(python, "fib.py")
            try:
                res = subprocess.run([ptg.PTG, "record", "--in-process", "-p", str(w.pid),
                                      "-o", os.path.join(d, "x.ptg"), *QUIET_PROBES],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, PTG_PYMON_AGENT=lib))
                maps = open(f"/proc/{w.pid}/maps").read()
            finally:
                w.kill()
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertIn("refusing the agent", res.stderr)
        self.assertNotIn("ptg_pymon", maps)
        self.assertNotIn("libptg_pymon", maps)

    def test_hostile_agent(self):
        """An agent that lies (tests/helpers/inject_pymon_hostile.c): every bad
        record counted and ignored, the recording ends as asked."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        liar = ptg.trusted_lib(os.path.join(ptg.BUILD, "tests", "libinject_pymon_hostile.so"))
        with tempfile.TemporaryDirectory() as d:
            w = ptg.Workload(python, "fib.py")
            try:
                out = os.path.join(d, "liar.ptg")
                res = subprocess.run([ptg.PTG, "record", "--in-process", "-p", str(w.pid),
                                      "-d", "1", "-o", out, *QUIET_PROBES],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, PTG_PYMON_AGENT=liar), timeout=120)
            finally:
                w.kill()
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertLess(len(res.stderr.splitlines()), 10, res.stderr)
            trace = ptg.Trace(out)
        # 6 malformed records and 465 threads beyond 65,536; 65,536 returns of
        # frames never seen; one code object at an address that holds none
        self.assertEqual(sorted(trace.losses), [
            "py_code_unresolved cpu=-1: 1", "py_inproc_bad cpu=-1: 471",
            "py_inproc_dropped cpu=-1: 7", "py_unmatched_exit cpu=-1: 65536"])

    def test_no_python(self):
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            self.refused(["-p", str(sleeper.pid), *QUIET_PROBES], "runs no Python", 1)
        finally:
            sleeper.kill()
            sleeper.wait()

if __name__ == "__main__":
    ptg.main()
