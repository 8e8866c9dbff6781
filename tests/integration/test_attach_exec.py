"""`record -p` of a process with no Python that then execs an interpreter.

The target (a shell) is taken under ptrace when record attaches, without
being stopped (PTRACE_SEIZE); its exec stops it before its first
instruction while the interpreter is found and probed, as `record -- CMD`
does, so the exec'd Python is recorded from its very first call:

- a shell says `ready PID`, waits for a line, then execs the interpreter on
  fib.py with no gate (its first call at once): fib's exact counts (5919
  calls of f), its <module> started and no frame PREEXISTING, nothing lost.
  A chroot's interpreter is exec'd through unshare and chroot: two execs
  that are no Python before the one that is.
- record is killed with SIGKILL at random instants after the exec was let
  go (while the exec is held, probed, or the interpreter runs): the
  target is left untraced, never stopped, exits 0 with its output unchanged.
- under strace (another tracer holds it) record says in one line that the
  exec cannot be held, and records on (the interpreter from when it is
  found: how much of fib that is depends on timing, so it is not counted).
"""
import os
import random
import shlex
import signal
import subprocess
import tempfile
import time
import unittest

import ptg

FIB = os.path.join(ptg.WORKLOADS, "fib.py")
KILLS = 10


def status_field(pid, name):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == name:
                    return value.strip()
    except FileNotFoundError:
        pass
    return None


def start_shell(python):
    """sh that says 'ready PID', reads a line, then execs python on fib.py."""
    script = "echo ready $$; read x; exec " + shlex.join(python.argv(python.path(FIB)))
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("ready"):
        proc.kill()
        raise AssertionError(f"the shell did not start: {line!r}")
    return proc, int(line.split()[1])


def go(proc):
    proc.stdin.write("go\n")
    proc.stdin.flush()
    proc.stdin.close()


class AttachExec(unittest.TestCase):
    def check_exec(self, python):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "exec.ptg")
            proc, pid = start_shell(python)
            try:
                rec = ptg.Recorder(["-p", str(pid)], out)
                self.assertIn("held at the exec until probed", rec.stderr)
                # under ptrace while it runs, not stopped
                self.assertEqual(status_field(pid, "TracerPid"), str(rec.proc.pid))
                self.assertNotIn(status_field(pid, "State")[0], "tT")
                go(proc)
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            self.assertIn(f"pid {pid} runs Python", rec.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.meta["python"], "exec")
            self.assertEqual(trace.losses, [], "events were lost")
            counts = trace.count("fib.py")
            self.assertEqual(counts["f:7"], 5919)
            self.assertEqual(counts["main:11"], 1)
            self.assertEqual(counts["<module>:1"], 1)
            # held from its exec: no frame was running before the probes went in
            self.assertFalse([c for c in trace.calls() if c[6] & ptg.ENTER_PREEXISTING])


ptg.per_interpreter(AttachExec)


@ptg.once
class KillWhileHeld(unittest.TestCase):
    def test_kill_at_random_instants(self):
        python = ptg.Python(ptg.ONCE)
        if python.missing:
            self.skipTest(python.missing)
        rng = random.Random(15)
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(KILLS):
                proc, pid = start_shell(python)
                rec = None
                try:
                    rec = ptg.Recorder(["-p", str(pid)], os.path.join(tmp, f"k{i}.ptg"))
                    go(proc)
                    # from the exec stop (at once) through the probes' loading (~0.2-0.4 s)
                    time.sleep(rng.uniform(0, 0.6))
                    rec.proc.send_signal(signal.SIGKILL)
                    rec.proc.wait()
                    self.assertTrue(ptg.wait_until(
                        lambda: status_field(pid, "TracerPid") in ("0", None)))
                    state = status_field(pid, "State")
                    self.assertFalse(state and state[0] in "tT", f"left stopped: {state}")
                    self.assertEqual(proc.stdout.read(), "done\n")
                    self.assertEqual(proc.wait(timeout=60), 0)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    proc.stdout.close()
                    if rec:
                        rec.proc.stderr.close()

    def test_other_tracer(self):
        python = ptg.Python(ptg.ONCE)
        if python.missing:
            self.skipTest(python.missing)
        if not os.access("/usr/bin/strace", os.X_OK):
            self.skipTest("no /usr/bin/strace")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "strace.ptg")
            proc, pid = start_shell(python)
            strace = subprocess.Popen(["strace", "-qq", "-e", "trace=none", "-p", str(pid)],
                                      stderr=subprocess.DEVNULL)
            try:
                self.assertTrue(ptg.wait_until(
                    lambda: status_field(pid, "TracerPid") == str(strace.pid)))
                rec = ptg.Recorder(["-p", str(pid)], out)
                go(proc)
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
                strace.wait(timeout=60)
            self.assertIn(f"pid {pid} cannot be held at its exec (another tracer holds it)",
                          rec.stderr)


if __name__ == "__main__":
    ptg.main()
