"""`record -p` of a process with no Python that then execs an interpreter.

The target (a shell) is taken under ptrace when record attaches, without
being stopped (PTRACE_SEIZE); its exec stops it before its first
instruction while the interpreter is found and probed, as `record -- CMD`
does, so the exec'd Python is recorded from its very first call:

- a shell says `ready PID`, waits for a line, then execs the interpreter on
  fib.py with no gate (its first call at once): fib's exact counts (5919
  calls of f), its <module> started and no frame PREEXISTING, nothing lost.
  A chroot's interpreter is exec'd through unshare and chroot: two execs
  that are no Python before the one that is. By default (a shell runs no
  Python: the uprobes, and record says why) and with --uprobes alike.
- `-p PID --hold` of a Python that execs its interpreter on fib.py: by
  default its calls are in-process until the exec and the uprobes take the
  new image, held at the exec; with --uprobes they take both. The same exact
  counts from the new image's first frame, and the old image's open frames
  end at the exec as STOP, both ways.
- record is killed with SIGKILL at random instants from the held exec on
  (while it is held, run past ld.so, probed, or the interpreter runs): the
  target is left untraced, never stopped, exits 0 with its output unchanged.
- tests/helpers/exec_gate.c, a C launcher, gets SIGUSR1 20 times while held:
  it answers each one; SIGSTOP stops it, SIGCONT resumes it; its exec is
  then recorded from the first call.
- a pyenv shim exec'd by exec_gate (bash, pyenv, then Python 3.12): the
  same exact counts.
- under strace (another tracer holds it) record says in one line that the
  exec cannot be held, and records on (the interpreter from when it is
  found: how much of fib that is depends on timing, so it is not counted).
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
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
GATE = os.path.join(ptg.BUILD, "tests", "exec_gate")
KILLS = 10
SIGNALS = 20
# a Python that, told to, execs its interpreter on the script it was given
PY_EXEC = """import os, sys
def wait_exec():
    sys.stdin.readline()
    os.execv(sys.executable, [sys.executable, sys.argv[1]])
print("ready", flush=True)
wait_exec()
"""


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


def wait_held(pid, timeout=10.0):
    """Whether pid was seen in a tracing stop (its exec held) before it ended.
    Polled often: the hold lasts as long as the probes take to load."""
    end = time.time() + timeout
    while time.time() < end:
        state = status_field(pid, "State")
        if state is None or state[0] == "Z":
            return False
        if state[0] == "t":
            return True
        time.sleep(0.001)
    return False


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
        """By default (a shell runs no Python: the uprobes, said so) and with
        --uprobes: the same exact counts."""
        for args in ([], ["--uprobes"]):
            with self.subTest(args=args):
                self.exec_recorded(python, args)

    def exec_recorded(self, python, args):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "exec.ptg")
            proc, pid = start_shell(python)
            try:
                rec = ptg.Recorder([*args, "-p", str(pid)], out)
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
            self.assertIn("since its exec: recording its calls from the first (held at its exec)",
                          rec.stderr)
            self.assertIn("python calls: uprobes (" +
                          ("--uprobes" if args else f"pid {pid} runs no Python") + ")",
                          rec.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.meta["python"], "exec")
            self.assertEqual(trace.losses, [], "events were lost")
            counts = trace.count("fib.py")
            self.assertEqual(counts["f:7"], 5919)
            self.assertEqual(counts["main:11"], 1)
            self.assertEqual(counts["<module>:1"], 1)
            # held from its exec: no frame was running before the probes went in
            self.assertFalse([c for c in trace.calls() if c[6] & ptg.ENTER_PREEXISTING])

    def check_python_execs_held(self, python):
        """-p PID --hold of a Python that execs its interpreter on fib.py: by
        default its calls are in-process until the exec, and the uprobes take
        the new image, held at its exec; with --uprobes the uprobes take both.
        The new image's exact counts, from its first frame, both ways; the old
        one's frames open at the exec end there as STOP."""
        got = {}
        for args in ([], ["--uprobes"]):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "held.ptg")
                proc = subprocess.Popen(python.argv("-c", PY_EXEC, python.path(FIB)),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                try:
                    self.assertEqual(proc.stdout.readline(), "ready\n")
                    rec = ptg.Recorder([*args, "-p", str(proc.pid), "--hold"], out)
                    go(proc)
                    self.assertEqual(proc.stdout.read(), "done\n")
                    self.assertEqual(proc.wait(timeout=300), 0)
                    self.assertEqual(rec.wait(), 0, rec.stderr)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    proc.stdout.close()
                trace = ptg.Trace(out)
            self.assertEqual(trace.losses, [], rec.stderr)
            self.assertIn("python calls: " + ("uprobes" if args else "in-process"), rec.stderr)
            if not args:
                self.assertIn(f"pid {proc.pid} exec'd Python", rec.stderr)
                self.assertIn("its calls are taken by uprobes from here", rec.stderr)
            ended = sorted((name, eflags, t1) for _, name, _, _, _, t1, _, eflags, _
                           in trace.calls() if eflags & ptg.EXIT_STOP)
            exec_ts = ended[0][2] if ended else 0
            first = next(r for r in trace.records if r.kind == "py_enter" and r.ts > exec_ts)
            self.assertEqual(first.file, "<frozen importlib._bootstrap>",
                             f"{args}: the new image from its first frame")
            counts = trace.count("fib.py")
            got[tuple(args)] = (counts["f:7"], counts["<module>:1"],
                                [(n, f) for n, f, t1 in ended if t1 == exec_ts])
        self.assertEqual(got[()], (5919, 1, [("<module>", ptg.EXIT_STOP),
                                             ("wait_exec", ptg.EXIT_STOP)]), got)
        self.assertEqual(got[()], got[("--uprobes",)])

    def check_kill_at_random_instants(self, python):
        rng = random.Random(15)
        held = 0
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(KILLS):
                proc, pid = start_shell(python)
                rec = None
                try:
                    rec = ptg.Recorder(["--uprobes", "-p", str(pid)], os.path.join(tmp, f"k{i}.ptg"))
                    go(proc)
                    # the exec stop shows as a tracing stop while the probes load (~0.2-0.4 s);
                    # the kill lands somewhere in it or after, while Python runs
                    if wait_held(pid):
                        held += 1
                    time.sleep(rng.uniform(0, 0.4))
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
        print(f"\n{KILLS} kills of record, {held} of them seen to start while the exec was held")


ptg.per_interpreter(AttachExec)


@ptg.once
class KillWhileHeld(unittest.TestCase):
    def test_signals_while_held(self):
        """Signals sent to a held launcher reach it, each one (exec_gate answers
        each SIGUSR1); a SIGSTOP stops it as it would untraced, SIGCONT goes on;
        then its exec into Python is recorded from its first call."""
        python = ptg.Python(ptg.ONCE)
        if python.missing:
            self.skipTest(python.missing)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "sig.ptg")
            proc = subprocess.Popen([GATE, *python.argv(FIB)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            try:
                pid = int(proc.stdout.readline().split()[1])
                rec = ptg.Recorder(["--uprobes", "-p", str(pid)], out)
                self.assertIn("held at the exec until probed", rec.stderr)
                for i in range(1, SIGNALS + 1):
                    os.kill(pid, signal.SIGUSR1)
                    self.assertEqual(proc.stdout.readline(), f"usr1 {i}\n")
                os.kill(pid, signal.SIGSTOP)
                self.assertTrue(ptg.wait_until(lambda: status_field(pid, "State")[0] in "tT"))
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGUSR1)
                self.assertEqual(proc.stdout.readline(), f"usr1 {SIGNALS + 1}\n")
                self.assertEqual(status_field(pid, "TracerPid"), str(rec.proc.pid))
                go(proc)
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            counts = ptg.Trace(out).count("fib.py")
            self.assertEqual(counts["f:7"], 5919)
            self.assertEqual(counts["<module>:1"], 1)

    def test_pyenv_shim(self):
        """A pyenv shim (bash, then `pyenv exec`, then the interpreter: three
        execs): held at each, Python recorded from its first call."""
        exe = ptg.pyenv_exe("3.12")
        shim = os.path.join(ptg.PYENV, "shims", "python3.12")
        if not exe or not os.access(shim, os.X_OK):
            self.skipTest(f"no pyenv 3.12 or no {shim}")
        version = os.path.basename(os.path.dirname(os.path.dirname(exe)))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "shim.ptg")
            proc = subprocess.Popen([GATE, shim, FIB], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ, PYENV_VERSION=version))
            try:
                pid = int(proc.stdout.readline().split()[1])
                rec = ptg.Recorder(["--uprobes", "-p", str(pid)], out)
                go(proc)
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            self.assertIn("from the first (held at its exec)", rec.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.losses, [], "events were lost")
            counts = trace.count("fib.py")
            self.assertEqual(counts["f:7"], 5919)
            self.assertEqual(counts["<module>:1"], 1)
            self.assertFalse([c for c in trace.calls() if c[6] & ptg.ENTER_PREEXISTING])

    def test_interrupted_while_held(self):
        """record stopped (SIGINT) before the launcher execs: let go, untraced,
        its signals still its own, and it goes on to run Python untouched."""
        python = ptg.Python(ptg.ONCE)
        if python.missing:
            self.skipTest(python.missing)
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.Popen([GATE, *python.argv(FIB)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            try:
                pid = int(proc.stdout.readline().split()[1])
                rec = ptg.Recorder(["--uprobes", "-p", str(pid)], os.path.join(tmp, "int.ptg"))
                rec.proc.send_signal(signal.SIGINT)
                self.assertEqual(rec.wait(), 0, rec.stderr)
                self.assertEqual(status_field(pid, "TracerPid"), "0")
                os.kill(pid, signal.SIGUSR1)
                self.assertEqual(proc.stdout.readline(), "usr1 1\n")
                go(proc)
                self.assertEqual(proc.stdout.read(), "done\n")
                self.assertEqual(proc.wait(timeout=300), 0)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()

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
                rec = ptg.Recorder(["--uprobes", "-p", str(pid)], out)
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
            self.assertNotIn("held at its exec)", rec.stderr)


if __name__ == "__main__":
    ptg.main()
