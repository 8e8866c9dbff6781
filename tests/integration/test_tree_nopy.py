"""Sets of processes where some run no Python (issue 15): `-p A,B` with B a C
program, a member that execs Python later, one that loads libpython itself
(tests/helpers/nopy_embed.c), `-p SHELL --children` whose Python child
starts after the attach, and kill -9 of record meanwhile.

Each Python process's calls are counted exactly against its known plan (as
test_tree.py does), each C program's CUDA calls against what it was told to
make (tests/helpers/nopy_cuda.c on the fake driver, tests/fakecuda).
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import os
import shlex
import subprocess
import tempfile
import threading
import unittest

import ptg
from test_tree import new_calls

HELPERS = os.path.join(ptg.BUILD, "tests")
NOPY_CUDA = os.path.join(HELPERS, "nopy_cuda")
NOPY_PLAIN = os.path.join(HELPERS, "nopy_plain")
NOPY_EMBED = os.path.join(HELPERS, "nopy_embed")
LAUNCHES, SYNCS, SLEEPS, SLEEP_MS = 40, 15, 3, 30
# the Python a shell member starts, or execs: 500 calls of g
CODE = "import os\ndef g(i): return i\nfor i in range(500): g(i)\nprint('child', os.getpid())\n"
NOPY_LINE = "no Python: CUDA calls, ops and off-CPU time; Python it execs or loads is followed"


def state(pid):
    """The one-letter state of pid, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return None


def tracer_pid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int([l for l in f if l.startswith("TracerPid:")][0].split()[1])
    except OSError:
        return 0


def read(path):
    """The text of path, "" while it is not there yet."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class Gated:
    """A program that says "ready PID" and waits for a line on stdin."""

    def __init__(self, argv, **popen):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, **popen)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.kill()
            raise RuntimeError(f"{argv[0]} did not start: {line!r}")
        self.pid = int(line.split()[1])

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=300):
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


def wait_line(rec, text):
    """Reads record's stderr until a line holds text (ptg.Recorder stops at the first
    "recording pid" line; the other members' lines follow it)."""
    while not any(text in line for line in rec.lines):
        line = rec.proc.stderr.readline()
        if not line:
            raise AssertionError(f"record ended before saying '{text}': {rec.stderr}")
        rec.lines.append(line)


def shell(python, exec_it):
    """sh that says ready, waits, then runs (or execs) python -c CODE and says end."""
    run = f"{'exec ' if exec_it else ''}{python.shell()} -c {shlex.quote(CODE)}"
    return Gated(["sh", "-c", f"echo ready $$; read x; {run}; echo end"])


@ptg.per_interpreter
class TreeNoPython(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check_python_and_c_program(self, python):
        """-p A,B: A runs fib.py, B is a C program that drives the fake CUDA
        driver: A's calls, B's CUDA calls and sleeps, exactly; report and
        idle show B's calls."""
        out = os.path.join(self.tmp.name, "job.ptg")
        a = ptg.Workload(python, "fib.py")
        b = Gated([NOPY_CUDA, "--wait", str(LAUNCHES), str(SYNCS), str(SLEEPS), str(SLEEP_MS)])
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}"], out)
            a.go()
            b.go()
            self.assertIn("done", a.finish())
            self.assertEqual(b.finish(), "done\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            a.kill()
            b.kill()
        self.assertIn(f"recording pid {b.pid} (nopy_cuda): {NOPY_LINE}\n", rec.stderr)
        self.assertIn("from 2 processes (1 interpreters", rec.stderr)
        self.assertIn("1 of them ran no supported Python", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["pids"], f"{a.pid},{b.pid}")
        got = new_calls(trace, "fib.py")
        self.assertEqual(sorted(got), [a.pid])
        self.assertEqual((got[a.pid]["f"], got[a.pid]["main"]), (5919, 1))
        self.assertFalse([r for r in trace.records if r.pid == b.pid and r.kind.startswith("py_")])
        self.assertEqual(ptg.cuda_counts(trace),
                         {b.pid: {"cuLaunchKernel": LAUNCHES, "cuStreamSynchronize": SYNCS}})
        sleeps = [r for r in trace.records if r.kind == "sched" and r.tid == b.pid
                  and r.fields.get("dur", 0) >= SLEEP_MS * 1000000]
        self.assertGreaterEqual(len(sleeps), SLEEPS)
        res = ptg.run(["report", "--pid", str(b.pid), out])
        self.assertEqual(res.returncode, 0, res.stderr)
        rows = {l.split()[0]: l.split()[1] for l in res.stdout.splitlines()
                if l.strip().startswith("cu")}
        self.assertEqual(rows, {"cuLaunchKernel": str(LAUNCHES),
                                "cuStreamSynchronize": str(SYNCS)})
        self.assertIn(f'tid {b.pid} "nopy_cuda"', res.stdout)
        res = ptg.run(["idle", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("cuStreamSynchronize", res.stdout)

    def check_member_execs_python(self, python):
        """-p A,SH without --children: SH runs no Python, then execs it: its
        calls from the exec on, exactly; A's as well."""
        out = os.path.join(self.tmp.name, "exec.ptg")
        a = ptg.Workload(python, "fib.py")
        sh = shell(python, exec_it=True)
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{sh.pid}"], out)
            wait_line(rec, f"recording pid {sh.pid} (sh): {NOPY_LINE}\n")
            a.go()
            sh.go()
            self.assertIn("done", a.finish())
            self.assertEqual(sh.finish(), f"child {sh.pid}\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            a.kill()
            sh.kill()
        self.assertIn(f"recording pid {sh.pid} too (Python ", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        fib, code = new_calls(trace, "fib.py"), new_calls(trace, "<string>")
        self.assertEqual(sorted(fib), [a.pid])
        self.assertEqual(fib[a.pid]["f"], 5919)
        self.assertEqual(sorted(code), [sh.pid])
        self.assertEqual(code[sh.pid]["g"], 500)

    def check_shell_children(self, python):
        """-p SH --children: a shell (no Python) starts a Python child after the
        attach: the child's calls, exactly from its first."""
        out = os.path.join(self.tmp.name, "sh.ptg")
        sh = shell(python, exec_it=False)
        try:
            rec = ptg.Recorder(["-p", str(sh.pid), "--children"], out)
            sh.go()
            stdout = sh.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            sh.kill()
        self.assertIn(f"recording pid {sh.pid} (sh): {NOPY_LINE}, and the processes it starts\n",
                      rec.stderr)
        self.assertRegex(stdout, r"^child \d+\nend\n$")
        child = int(stdout.split()[1])
        trace = ptg.Trace(out)
        self.assertEqual(trace.meta["children"], "1")
        self.assertEqual(trace.losses, [])
        got = new_calls(trace, "<string>")
        self.assertEqual(sorted(got), [child])
        self.assertEqual(got[child]["g"], 500)

    def check_shell_children_running(self, python):
        """-p SH --children: the shell's Python child already running at the
        attach (waiting on a fifo) and one it starts after: both exactly."""
        out = os.path.join(self.tmp.name, "run.ptg")
        fifo, log = os.path.join(self.tmp.name, "go"), os.path.join(self.tmp.name, "fib.out")
        os.mkfifo(fifo)
        fib = python.path(os.path.join(ptg.WORKLOADS, "fib.py"))
        run = f"{python.shell()} -c {shlex.quote(CODE)}"
        sh = Gated(["sh", "-c", f"{python.shell()} {fib} --wait < {fifo} > {log} & "
                    f"echo ready $$; read x; {run}; wait; echo end"])
        try:
            with open(fifo, "w") as gate:
                self.assertTrue(ptg.wait_until(lambda: read(log).startswith("ready")))
                early = int(read(log).split()[1])
                rec = ptg.Recorder(["-p", str(sh.pid), "--children"], out)
                wait_line(rec, f"recording pid {early} (Python ")
                gate.write("go\n")
            sh.go()
            stdout = sh.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            sh.kill()
        self.assertEqual(read(log), f"ready {early}\ndone\n")
        self.assertRegex(stdout, r"^child \d+\nend\n$")
        late = int(stdout.split()[1])
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        fibs, code = new_calls(trace, "fib.py"), new_calls(trace, "<string>")
        self.assertEqual(sorted(fibs), [early])
        self.assertEqual((fibs[early]["f"], fibs[early]["main"]), (5919, 1))
        self.assertEqual(sorted(code), [late])
        self.assertEqual(code[late]["g"], 500)

    def check_killed_with_c_program(self, python):
        """kill -9 of record of -p A,B (B no Python) while both run: both run on,
        untraced, never stopped, and end as they would have."""
        a = ptg.Workload(python, "fib.py")
        b = Gated([NOPY_CUDA, "--wait", str(LAUNCHES), str(SYNCS), "10", "50"])
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}"], os.path.join(self.tmp.name, "k.ptg"))
            a.go()
            b.go()
            rec.proc.kill()
            rec.proc.wait()
            for pid in (a.pid, b.pid):
                self.assertNotIn(state(pid), ("t", "T"))
                self.assertEqual(tracer_pid(pid), 0)
            self.assertIn("done", a.finish(timeout=60))
            self.assertEqual(b.finish(timeout=60), "done\n")
            self.assertEqual((a.proc.returncode, b.proc.returncode), (0, 0))
        finally:
            a.kill()
            b.kill()
            rec.proc.stderr.close()

    def check_killed_while_child_held(self, python):
        """kill -9 of record of -p SH --children while the shell's child is held
        under ptrace at its exec: it runs on, its Python too, and the shell ends."""
        sh = shell(python, exec_it=False)

        def held():
            return [p for p in ptg.descendants(sh.pid) if state(p) == "t"]

        try:
            rec = ptg.Recorder(["-p", str(sh.pid), "--children"],
                               os.path.join(self.tmp.name, "held.ptg"))
            sh.go()
            caught = ptg.wait_until(held, timeout=60)
            rec.proc.kill()
            rec.proc.wait()
            # the kernel lets go of what the dead tracer held
            self.assertTrue(ptg.wait_until(lambda: not held(), timeout=10))
            stdout = sh.finish(timeout=60)
        finally:
            sh.kill()
            rec.proc.stderr.close()
        self.assertTrue(caught, "no child was seen held at its exec")
        self.assertEqual(sh.proc.returncode, 0)
        self.assertRegex(stdout, r"^child \d+\nend\n$")


@ptg.once
class NoPythonSetOnce(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_per_process(self):
        """--per-process: a member given with -p that runs neither Python nor
        CUDA gets its own file (its off-CPU time), as the Python one does."""
        out = os.path.join(self.tmp.name, "run.ptg")
        a = ptg.Workload(ptg.Python(ptg.ONCE), "fib.py")
        p = Gated([NOPY_PLAIN, "--wait", str(SLEEPS), str(SLEEP_MS)])
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{p.pid}", "--per-process"], out)
            a.go()
            p.go()
            a.finish()
            self.assertEqual(p.finish(), "done\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            a.kill()
            p.kill()
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted([f"run.pid{a.pid}.ptg", f"run.pid{p.pid}.ptg"]))
        mine = os.path.join(self.tmp.name, f"run.pid{p.pid}.ptg")
        trace = ptg.Trace(mine)
        self.assertEqual(trace.meta["pid"], str(p.pid))
        self.assertEqual({r.pid for r in trace.records}, {p.pid})
        self.assertEqual({r.kind for r in trace.records} - {"thread"}, {"sched"})
        self.assertGreaterEqual(len([r for r in trace.records
                                     if r.fields.get("dur", 0) >= SLEEP_MS * 1000000]), SLEEPS)
        for args in (["report"], ["idle"]):
            res = ptg.run([*args, mine])
            self.assertEqual(res.returncode, 0, (args, res.stderr))
        self.assertEqual(new_calls(ptg.Trace(os.path.join(self.tmp.name, f"run.pid{a.pid}.ptg")),
                                   "fib.py")[a.pid]["f"], 5919)

    def test_member_loads_libpython(self):
        """-p A,B where B, a C program, dlopen()s pyenv's libpython3.11 by full
        path after the attach and runs f CALLS times: B waits at the loader's
        notice while its interpreter is found and probed, so its calls are
        there from the interpreter's first frame; A's exactly."""
        exe = ptg.pyenv_exe("3.11")
        lib = os.path.join(os.path.dirname(os.path.dirname(exe)), "lib",
                           "libpython3.11.so.1.0") if exe else ""
        if not os.path.exists(lib):
            self.skipTest(f"no shared libpython3.11 from pyenv ({lib or ptg.PYENV})")
        calls = 29
        out = os.path.join(self.tmp.name, "embed.ptg")
        a = ptg.Workload(ptg.Python(ptg.ONCE), "fib.py")
        b = Gated([NOPY_EMBED, lib, str(calls)])
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}"], out)
            wait_line(rec, f"recording pid {b.pid} (nopy_embed): {NOPY_LINE}\n")
            a.go()
            b.go()
            self.assertEqual(b.proc.stdout.readline(), f"python {b.pid}\n")
            # a bound on a hang, not a timing: should record never say it, B is killed
            guard = threading.Timer(120, b.proc.kill)
            guard.start()
            try:
                wait_line(rec, f"pid {b.pid} runs Python 3.11")
            finally:
                guard.cancel()
            b.go()
            self.assertIn("done", a.finish())
            self.assertEqual(b.finish(), "done\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            a.kill()
            b.kill()
        self.assertIn(f"pid {b.pid} runs Python 3.11", rec.stderr)
        self.assertIn("since it mapped it: recording its calls from the first (held at the "
                      "loader's notice)", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(new_calls(trace, "fib.py")[a.pid]["f"], 5919)
        self.assertEqual(new_calls(trace, "<string>")[b.pid]["f"], calls)
        first = next(r for r in trace.records if r.kind == "py_enter" and r.pid == b.pid)
        self.assertEqual((first.name, first.file), ("<module>", "<frozen importlib._bootstrap>"))

    def test_errors(self):
        """One line each: a kernel thread, a member with no Python given twice,
        one that is gone, one that exited and is not reaped yet; no file."""
        p = Gated([NOPY_PLAIN, "--wait", "1", "1"])
        gone = subprocess.Popen(["true"])
        gone.wait()
        zombie = subprocess.Popen(["true"])
        self.assertTrue(ptg.wait_until(lambda: state(zombie.pid) == "Z"))
        out = os.path.join(self.tmp.name, "x.ptg")
        try:
            for pids, line in (
                    (f"{p.pid},2", "pid 2 (kthreadd) is a kernel thread: it runs no program to "
                                   "record"),
                    (f"{p.pid},{p.pid}", f"pid {p.pid} is given twice"),
                    (f"{p.pid},{gone.pid}", f"no such process: {gone.pid}"),
                    (f"{p.pid},{zombie.pid}", f"pid {zombie.pid} exited")):
                res = ptg.run(["record", "-p", pids, "-o", out])
                self.assertEqual((res.returncode, res.stderr), (1, f"ptrace-gpu: {line}\n"))
                self.assertFalse(os.path.exists(out))
            res = ptg.run(["record", "-p", "2", "--children", "-o", out])
            self.assertEqual(res.returncode, 1)
            self.assertEqual(len(res.stderr.splitlines()), 1, res.stderr)
        finally:
            p.kill()
            zombie.wait()


if __name__ == "__main__":
    ptg.main()
