"""A trace cut short reads up to its last complete chunk: a recorder killed by
SIGKILL leaves its temporary file, every report reads it with one warning and
the next recording of that name says where it is; a complete trace cut at any
offset reads a prefix of its records."""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import unittest

import ptg

WARNING = re.compile(r"^ptrace-gpu: warning: (.*) is truncated at byte (\d+) \(no end marker\): "
                     r"read (\d+) records of its complete chunks, to byte (\d+); frames still "
                     r"open at the cut have no exit, and its loss counters may be missing$")


class Checks:
    """What every command must do with a cut trace (a mixin of the tests below)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def run_ok(self, args, cut_path, size):
        """Runs a command on a cut trace: exit 0 and exactly the warning line.
        Returns (stdout, records read)."""
        res = ptg.run(args)
        self.assertEqual(res.returncode, 0, f"{args}: {res.stderr}")
        lines = res.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"{args}: {res.stderr}")
        m = WARNING.match(lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertEqual(m.group(1), cut_path)
        self.assertEqual(int(m.group(2)), size)
        self.assertLessEqual(int(m.group(4)), size)
        return res.stdout, int(m.group(3))

    def dump_records(self, path):
        res = ptg.run(["dump", path])
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = res.stdout.splitlines()
        return ([l for l in lines if not l.startswith("# ")],
                [l for l in lines if l.startswith("# lost ")])

    def assert_nesting(self, records):
        """Every exit closes an enter of its thread; frames may stay open."""
        stacks = {}
        for line in records:
            r = ptg.Trace._parse(line)
            if r.kind in ("py_enter", "op_enter"):
                stacks.setdefault(r.tid, []).append(r)
            elif r.kind in ("py_exit", "op_exit"):
                self.assertTrue(stacks.get(r.tid), f"exit without enter: {line}")
                stacks[r.tid].pop()
        return sum(len(s) for s in stacks.values())

    def check_reports(self, cut, size):
        """Every report reads the cut trace; returns (records, report's call count)."""
        report, n = self.run_ok(["report", cut], cut, size)
        calls = int(re.search(r"^function calls: (\d+)", report, re.M).group(1))
        self.assertRegex(report, r"lost events: \d+ \(.*trace_truncated 1")
        self.run_ok(["report", "--per-thread", cut], cut, size)
        folded, _ = self.run_ok(["flamegraph", cut], cut, size)
        for line in folded.splitlines():
            self.assertRegex(line, r" \d+$")
        self.run_ok(["idle", cut], cut, size)
        chrome, pstats = self.path("cut.json"), self.path("cut.pstats")
        self.run_ok(["export", "--chrome", chrome, "--pstats", pstats, cut], cut, size)
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
        self.assertGreater(len(events), 0)
        self.assertGreater(os.path.getsize(pstats), 0)
        records, losses = self.dump_records(cut)
        self.assertEqual(len(records), n)
        self.assertIn("# lost trace_truncated cpu=-1: 1", losses)
        return records, calls


class Killed(Checks, unittest.TestCase):
    def check_killed_recorder(self, python):
        out = self.path("run.ptg")
        w = ptg.Workload(python, "busy.py", "30")
        self.addCleanup(w.kill)
        rec = ptg.Recorder(["-p", str(w.pid)], out)
        self.addCleanup(lambda: rec.proc.poll() is None and (rec.proc.kill(), rec.proc.wait()))
        w.go()
        tmp = []

        def written():
            tmp[:] = glob.glob(self.path(".run.ptg.*.tmp"))
            return len(tmp) == 1 and os.path.getsize(tmp[0]) > 512 * 1024

        self.assertTrue(ptg.wait_until(written, 60), f"no temporary file grew: {tmp}")
        rec.proc.send_signal(signal.SIGKILL)
        rec.proc.wait()
        w.kill()
        for pipe in (rec.proc.stderr, w.proc.stdin, w.proc.stdout):
            pipe.close()
        self.assertFalse(os.path.exists(out), "a killed recorder renamed its file")
        size = os.path.getsize(tmp[0])
        records, calls = self.check_reports(tmp[0], size)
        self.assertGreater(len(records), 10000)
        self.assertGreater(calls, 5000)
        self.assert_nesting(records)
        # the next recording of that name says where the hidden trace is, and keeps it
        res = ptg.run(["record", "-q", "-o", out, "--", *python.argv("-c", "pass")],
                      timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(res.stderr.splitlines(),
                         [f"ptrace-gpu: note: {tmp[0]} is the trace of a recording killed "
                          "before its end, or of one still under way; report reads it; "
                          "remove it when done"])
        self.assertEqual(os.path.getsize(tmp[0]), size)
        self.assertTrue(os.path.exists(out))


class Cuts(Checks, unittest.TestCase):
    """A complete trace cut at several offsets reads a prefix of its records."""

    def check_cuts(self, python):
        full = self.path("full.ptg")
        code = ("def leaf(i):\n    return i\n"
                "def mid(i):\n    return leaf(i) + leaf(i + 1)\n"
                "for i in range(150000):\n    mid(i)\n")
        res = ptg.run(["record", "-q", "-o", full, "--", *python.argv("-c", code)], timeout=300)
        self.assertEqual(res.returncode, 0, res.stderr)
        all_records, _ = self.dump_records(full)
        report = ptg.run(["report", full])
        self.assertEqual(report.returncode, 0, report.stderr)
        all_calls = int(re.search(r"^function calls: (\d+)", report.stdout, re.M).group(1))
        with open(full, "rb") as f:
            data = f.read()
        cut = self.path("cut.ptg")
        seen = set()
        for frac in (0.3, 0.55, 0.8, 0.999):
            size = int(len(data) * frac)
            with open(cut, "wb") as f:
                f.write(data[:size])
            records, calls = self.check_reports(cut, size)
            self.assertEqual(records, all_records[:len(records)], f"cut at {size}")
            self.assertLessEqual(calls, all_calls)
            open_frames = self.assert_nesting(records)
            # the last cut falls in the end marker, after every record
            if frac < 0.9:
                self.assertLess(len(records), len(all_records))
                self.assertGreater(open_frames, 0, "frames open at the cut")
            seen.add(len(records))
        self.assertGreater(len(seen), 2, "cuts fell in different chunks")


ptg.per_interpreter(Killed)
ptg.per_interpreter(ptg.once(Cuts))

if __name__ == "__main__":
    ptg.main()
