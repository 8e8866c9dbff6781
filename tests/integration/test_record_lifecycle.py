"""How recording ends: Ctrl-C, SIGTERM, -d, SIGKILL of the recorder, exit of the target.

In every case the target runs on unchanged and no probe stays behind.
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

import ptg

def programs_of(pid):
    """IDs of the BPF programs a process holds, from its fds' fdinfo."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def loaded_programs():
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"] for p in json.loads(out)}


def expected_ticks(n):
    return [str(i * i % 97) for i in range(n)]


class Lifecycle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "t.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def start_ticker(self, python, n):
        w = ptg.Workload(python, "ticker.py", str(n))
        self.addCleanup(w.kill)
        return w

    def assert_complete(self, reason):
        trace = ptg.Trace(self.out)
        self.assertEqual(trace.meta["stop.reason"], reason)
        trace.calls()  # every frame closed, properly nested
        return trace

    def stop_with_signal(self, python, sig, reason):
        w = self.start_ticker(python, 400)
        rec = ptg.Recorder(["-p", str(w.pid)], self.out)
        progs = programs_of(rec.proc.pid)
        self.assertGreaterEqual(len(progs), 5)
        w.go()
        time.sleep(1.0)
        rec.proc.send_signal(sig)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        trace = self.assert_complete(reason)
        self.assertGreater(trace.count("ticker.py")["tick:11"], 10)
        # the target keeps running, unchanged, to its end
        self.assertIsNone(w.proc.poll())
        out = w.finish().split()
        self.assertEqual(out, expected_ticks(400) + ["done"])
        self.assertEqual(w.proc.returncode, 0)
        # before 6.6 (PTG_NO_UPROBE_MULTI=1 here) a child of the recorder closes the
        # per-site probes after it, one grace period each: gone once it is done
        self.assertTrue(ptg.wait_until(lambda: not progs & loaded_programs(), 60),
                        "programs left behind")

    def check_ctrl_c(self, python):
        self.stop_with_signal(python, signal.SIGINT, "interrupted")

    def check_sigterm(self, python):
        self.stop_with_signal(python, signal.SIGTERM, "terminated")

    def check_duration(self, python):
        w = self.start_ticker(python, 300)
        rec = ptg.Recorder(["-p", str(w.pid), "-d", "0.5"], self.out)
        w.go()
        self.assertEqual(rec.wait(), 0, rec.stderr)
        trace = self.assert_complete("duration elapsed")
        self.assertGreater(trace.count("ticker.py")["tick:11"], 5)
        self.assertEqual(w.finish().split(), expected_ticks(300) + ["done"])

    def check_command_exit_status(self, python):
        """record -- CMD exits as the command did: its status, 128 + N for signal N."""
        out = os.path.join(self.tmp.name, "status.ptg")
        for code, want in (("pass", 0), ("import sys; sys.exit(3)", 3),
                           ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 139)):
            res = ptg.run(["record", "-q", "-o", out, "--", *python.argv("-c", code)])
            self.assertEqual(res.returncode, want, res.stderr)
            self.assertTrue(os.path.getsize(out) > 0)

    def check_recorder_killed(self, python):
        w = self.start_ticker(python, 300)
        rec = ptg.Recorder(["-p", str(w.pid)], self.out)
        progs = programs_of(rec.proc.pid)
        self.assertGreaterEqual(len(progs), 5)
        w.go()
        time.sleep(0.5)
        rec.proc.kill()
        rec.proc.wait()
        self.assertTrue(ptg.wait_until(lambda: not progs & loaded_programs(), 10),
                        "probes left behind after SIGKILL")
        self.assertEqual(w.finish().split(), expected_ticks(300) + ["done"])
        self.assertEqual(w.proc.returncode, 0)
        # a killed recorder never renamed its trace into place: nothing half-written
        # at its name, and the reader says so
        self.assertFalse(os.path.lexists(self.out))
        res = ptg.run(["report", self.out])
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)

    def check_target_exits(self, python):
        w = self.start_ticker(python, 20)
        rec = ptg.Recorder(["-p", str(w.pid)], self.out)
        w.go()
        self.assertEqual(w.finish().split(), expected_ticks(20) + ["done"])
        self.assertEqual(rec.wait(), 0, rec.stderr)
        trace = self.assert_complete("target exited")
        self.assertEqual(trace.count("ticker.py")["tick:11"], 20)


ptg.per_interpreter(Lifecycle)

if __name__ == "__main__":
    ptg.main()
