"""A set's exec held before its first instruction (issue 15): every process of
a set is under the recorder's ptrace (seized, never stopped), so that its exec
stops it while what it execs is probed, and a child it forks is held from its
birth. The recorder is stopped (SIGSTOP) while a member execs: the member must
be found waiting at its exec, run nothing of its new image, and then have every
call in the trace. A kill -9 of the recorder while members wait at such stops
lets each run on, untraced."""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import collections
import ctypes
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import ptg
from test_cuda_host import LIBDIR, Trace

NOPY_CUDA = os.path.join(ptg.BUILD, "tests", "nopy_cuda")
GATE = os.path.join(ptg.BUILD, "tests", "exec_gate")
LIB = "libcuda.so.1"
# what record says of a process that ran a library unprobed for a while
WINDOW_NOTE = re.compile(r"libwatch: pid (\d+) (exec'd|had|has) .*not in the trace")
# a thread other than the main one execs CHILD
THREAD_EXEC = """import os, sys, threading
print("ready", flush=True)
sys.stdin.readline()
t = threading.Thread(target=os.execv, args=(sys.executable, [sys.executable, "-c", sys.argv[1]]))
t.start()
t.join()
"""
# a thread other than the main one starts CHILD (subprocess: vfork + exec)
THREAD_SPAWN = """import subprocess, sys, threading
print("ready", flush=True)
sys.stdin.readline()
t = threading.Thread(target=subprocess.run, args=([sys.executable, "-c", sys.argv[1]],),
                     kwargs={"check": True})
t.start()
t.join()
"""
CHILD = "import os\ndef g(i):\n    return i\nfor i in range(500):\n    g(i)\nprint('child', os.getpid(), flush=True)\n"
# a member that, told to, execs its interpreter on CHILD from inside wait_exec()
MEMBER_EXEC = """import os, sys
def wait_exec():
    sys.stdin.readline()
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
print("ready", flush=True)
wait_exec()
"""


def new_g(trace, pid):
    """CHILD's calls of g in process pid."""
    return sum(1 for r in trace.records if r.kind == "py_enter" and r.name == "g"
               and r.pid == pid and not r.flags & ptg.ENTER_RESUME)


def exe(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def maps(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            return f.read()
    except OSError:
        return ""


class HeldRecorder:
    """record --children -- sh -c 'read go; SCRIPT', stopped (SIGSTOP) before go."""

    def __init__(self, test, script, out, env=None):
        self.rec = ptg.Recorder(["--children", "--", "sh", "-c", "read go; " + script], out,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pid = int(re.search(r"(?:recording|started) pid (\d+)", self.rec.stderr).group(1))
        # let go to run (it waits for go), under the recorder's ptrace all the same
        test.assertTrue(ptg.wait_until(lambda: ptg.proc_status(self.pid) == ("S", self.rec.proc.pid)),
                        ptg.proc_status(self.pid))
        os.kill(self.rec.proc.pid, signal.SIGSTOP)

    def go(self):
        self.rec.proc.stdin.write("go\n")
        self.rec.proc.stdin.flush()

    def cont(self):
        os.kill(self.rec.proc.pid, signal.SIGCONT)

    def finish(self):
        out = self.rec.proc.stdout.read()
        code = self.rec.wait()
        for f in (self.rec.proc.stdin, self.rec.proc.stdout, self.rec.proc.stderr):
            f.close()
        return code, out

    def kill(self):
        if self.rec.proc.poll() is None:
            os.kill(self.rec.proc.pid, signal.SIGCONT)
            self.rec.proc.kill()
            self.rec.proc.wait()


@ptg.per_interpreter
class TreeExec(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check_python_held_at_exec(self, python):
        """A shell of the set execs an interpreter no process of the set ran (a
        file not probed yet) while the recorder is stopped: it waits at its exec
        (the first exec of a chroot's wrapper too), and once the recorder goes
        on, every call of it is in the trace from the start-up's first frame."""
        out = os.path.join(self.tmp.name, "py.ptg")
        h = HeldRecorder(self, f"exec {python.shell()} -c {shlex.quote(CHILD)}", out)
        shell = exe(h.pid)
        try:
            h.go()
            # the exec stops it: a new image, stopped, under the recorder, not run
            self.assertTrue(ptg.wait_until(lambda: exe(h.pid) != shell and
                                           ptg.proc_status(h.pid) == ("t", h.rec.proc.pid)),
                            (exe(h.pid), ptg.proc_status(h.pid)))
            h.cont()
            code, stdout = h.finish()
        finally:
            h.kill()
        self.assertEqual(code, 0, h.rec.stderr)
        child = int(re.search(r"^child (\d+)$", stdout, re.M).group(1))
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [], h.rec.stderr)
        mine = [r for r in trace.records if r.pid == child]
        first = next(r for r in mine if r.kind == "py_enter")
        self.assertEqual(first.file, "<frozen importlib._bootstrap>",
                         "the interpreter's start-up is in the trace from its first frame")
        g = sum(1 for r in mine if r.kind == "py_enter" and r.name == "g"
                and not r.flags & ptg.ENTER_RESUME)
        self.assertEqual(g, 500, h.rec.stderr)
        self.assertNotIn("could be held", h.rec.stderr)

    def member_exec(self, python, args):
        """record ARGS -p A,B where A (MEMBER_EXEC) execs its interpreter on
        CHILD and B runs fib.py: the trace and record's stderr."""
        a = subprocess.Popen(python.argv("-c", MEMBER_EXEC, CHILD), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        b = ptg.Workload(python, "fib.py")
        out = os.path.join(self.tmp.name, "member.ptg")
        rec = None
        try:
            self.assertEqual(a.stdout.readline(), "ready\n")
            rec = ptg.Recorder([*args, "-p", f"{a.pid},{b.pid}"], out)
            ptg.go(a)
            self.assertEqual(a.stdout.readline(), f"child {a.pid}\n")
            self.assertEqual(a.wait(timeout=60), 0)
            b.go()
            self.assertIn("done", b.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            ptg.close(a)
            b.close(rec)
        return a.pid, b.pid, ptg.Trace(out), rec.stderr

    def check_member_exec_both_paths(self, python):
        """-p A,B where A execs a Python: by default (A's calls in-process until
        its exec) and with --uprobes, the new image is held at its exec and
        probed, so its calls are in from its start-up's first frame, with the
        same exact counts both ways; the old image's frames still open at the
        exec (<module>, wait_exec) end there alike, as STOP."""
        got = {}
        for args in ([], ["--uprobes"]):
            a, b, trace, err = self.member_exec(python, args)
            self.assertEqual(trace.losses, [], err)
            if args:
                self.assertIn("python calls: uprobes (--uprobes)", err)
            else:
                self.assertIn("python calls: in-process", err)
                self.assertRegex(err, rf"pid {a} exec'd Python \S+ \(.*\): its calls are "
                                 "taken by uprobes from here")
            self.assertNotIn("not recorded", err)
            # the frames the exec ended, at its time: the new image's come after
            ended = sorted((name, eflags, t1) for tid, name, _, _, _, t1, _, eflags, _
                           in trace.calls() if tid == a and eflags & ptg.EXIT_STOP)
            exec_ts = ended[0][2] if ended else 0
            ended = [(name, eflags) for name, eflags, t1 in ended if t1 == exec_ts]
            first = next(r for r in trace.records if r.pid == a and r.kind == "py_enter"
                         and r.ts > exec_ts)
            self.assertEqual(first.file, "<frozen importlib._bootstrap>",
                             f"{args}: the new image from its first frame")
            f = collections.Counter(r.pid for r in trace.records if r.kind == "py_enter" and
                                    r.name == "f" and not r.flags & ptg.ENTER_RESUME)
            got[tuple(args)] = (new_g(trace, a), f[b], ended)
        self.assertEqual(got[()], (500, 5919, [("<module>", ptg.EXIT_STOP),
                                               ("wait_exec", ptg.EXIT_STOP)]), got)
        self.assertEqual(got[()], got[("--uprobes",)])


@ptg.once
class TreeExecOnce(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def copy_driver(self):
        """A copy of the fake driver that no process of the set has on its search path."""
        lib = os.path.join(self.tmp.name, "lib")
        os.mkdir(lib)
        shutil.copy(os.path.join(LIBDIR, LIB), lib)
        return lib, {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}

    def test_c_program_held_at_exec(self):
        """A shell execs a C program that links a driver no process of the set had
        on its search path, while the recorder is stopped: the program waits at
        its exec with nothing mapped but itself and its loader, and then has all
        its 40 launches and 15 synchronizations, nothing lost and nothing said."""
        lib, env = self.copy_driver()
        out = os.path.join(self.tmp.name, "c.ptg")
        h = HeldRecorder(self, f"LD_LIBRARY_PATH={lib} exec {NOPY_CUDA} 40 15 0 0", out, env)
        try:
            h.go()
            self.assertTrue(ptg.wait_until(lambda: exe(h.pid) == NOPY_CUDA and
                                           ptg.proc_status(h.pid) == ("t", h.rec.proc.pid)),
                            (exe(h.pid), ptg.proc_status(h.pid)))
            self.assertNotIn(LIB, maps(h.pid), "its loader ran before it was held")
            h.cont()
            code, stdout = h.finish()
        finally:
            h.kill()
        self.assertEqual((code, stdout), (0, "done\n"), h.rec.stderr)
        trace = Trace(out)
        self.assertEqual(ptg.cuda_counts(trace),
                         {h.pid: {"cuLaunchKernel": 40, "cuStreamSynchronize": 15}},
                         h.rec.stderr)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], h.rec.stderr)
        self.assertIsNone(WINDOW_NOTE.search(h.rec.stderr), h.rec.stderr)

    def assert_let_go(self, pids):
        """Each of pids runs on, untraced, never left stopped by the recorder."""
        for pid in pids:
            self.assertTrue(ptg.wait_until(lambda: ptg.proc_status(pid)[0] not in ("t", "T") and
                                           ptg.proc_status(pid)[1] == 0, timeout=10),
                            (pid, ptg.proc_status(pid)))

    def test_killed_in_exec_stop(self):
        """kill -9 of the recorder while a member waits at its exec stop: it runs
        on untraced and its program ends as it would have."""
        lib, env = self.copy_driver()
        out = os.path.join(self.tmp.name, "k.ptg")
        h = HeldRecorder(self, f"LD_LIBRARY_PATH={lib} exec {NOPY_CUDA} 40 15 0 0", out, env)
        try:
            h.go()
            self.assertTrue(ptg.wait_until(lambda: ptg.proc_status(h.pid) == ("t", h.rec.proc.pid) and
                                           exe(h.pid) == NOPY_CUDA))
            h.rec.proc.kill()
            h.rec.proc.wait()
            self.assert_let_go([h.pid])
            self.assertEqual(h.rec.proc.stdout.read(), "done\n")
        finally:
            h.kill()
            for f in (h.rec.proc.stdin, h.rec.proc.stdout, h.rec.proc.stderr):
                f.close()

    def test_killed_in_fork_stops(self):
        """kill -9 of the recorder of -p SH --children while the shell waits at a
        fork stop and its child at its first stop, before it runs: both run on,
        untraced, and the shell ends as it would have."""
        sh = subprocess.Popen(
            ["sh", "-c", "echo ready; read go; for i in 1 2 3; do /bin/true; done; echo end"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        rec = None
        try:
            self.assertEqual(sh.stdout.readline(), "ready\n")
            rec = ptg.Recorder(["-p", str(sh.pid), "--children"],
                               os.path.join(self.tmp.name, "f.ptg"))
            self.assertEqual(ptg.proc_status(sh.pid)[1], rec.proc.pid, "the shell is held")
            os.kill(rec.proc.pid, signal.SIGSTOP)
            sh.stdin.write("go\n")
            sh.stdin.flush()
            # the child is ours from its birth, and soon in its first stop
            self.assertTrue(ptg.wait_until(lambda: ptg.proc_status(sh.pid)[0] == "t" and
                                           ptg.descendants(sh.pid) and
                                           all(ptg.proc_status(k)[0] == "t"
                                               for k in ptg.descendants(sh.pid))),
                            (ptg.proc_status(sh.pid),
                             [ptg.proc_status(k) for k in ptg.descendants(sh.pid)]))
            kids = ptg.descendants(sh.pid)
            self.assertEqual([ptg.proc_status(k) for k in kids], [("t", rec.proc.pid)],
                             "the child is held from its birth")
            rec.proc.kill()
            rec.proc.wait()
            self.assert_let_go([sh.pid] + kids)
            self.assertEqual(sh.stdout.read(), "end\n")
            self.assertEqual(sh.wait(timeout=30), 0)
        finally:
            ptg.end(sh, rec and rec.proc)

    def test_killed_at_random(self):
        """kill -9 of the recorder of -p SH --children at random moments while the
        shell forks and execs programs (python3 -c pass, /bin/true) one after the
        other: each time, the shell and every process it has then run on,
        untraced and not stopped, and the shell ends with all its programs run."""
        rng = random.Random(15)
        python = ptg.Python(ptg.ONCE)
        loop = (f"echo ready; read go; for i in $(seq 10); do {python.shell()} -c pass; "
                "/bin/true; done; echo end")
        for _ in range(5):
            sh = subprocess.Popen(["sh", "-c", loop], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
            rec = None
            try:
                self.assertEqual(sh.stdout.readline(), "ready\n")
                rec = ptg.Recorder(["-p", str(sh.pid), "--children"],
                                   os.path.join(self.tmp.name, "r.ptg"))
                sh.stdin.write("go\n")
                sh.stdin.flush()
                time.sleep(rng.uniform(0, 0.3))
                procs = [sh.pid] + ptg.descendants(sh.pid)
                rec.proc.kill()
                rec.proc.wait()
                self.assert_let_go(procs + ptg.descendants(sh.pid))
                self.assertEqual(sh.stdout.read(), "end\n")
                self.assertEqual(sh.wait(timeout=60), 0)
            finally:
                ptg.end(sh, rec and rec.proc)

    def test_signals_while_held(self):
        """-p GATE --children, GATE a C program held at its execs: each of 20
        SIGUSR1 reaches it (exec_gate answers each), a SIGSTOP stops it as it
        would untraced until SIGCONT, and it stays held: its exec into Python
        is recorded from the first call."""
        python = ptg.Python(ptg.ONCE)
        out = os.path.join(self.tmp.name, "sig.ptg")
        proc = subprocess.Popen([GATE, *python.argv(os.path.join(ptg.WORKLOADS, "fib.py"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            pid = int(proc.stdout.readline().split()[1])
            rec = ptg.Recorder(["-p", str(pid), "--children"], out)
            self.assertEqual(ptg.proc_status(pid)[1], rec.proc.pid)
            for i in range(1, 21):
                os.kill(pid, signal.SIGUSR1)
                self.assertEqual(proc.stdout.readline(), f"usr1 {i}\n")
            os.kill(pid, signal.SIGSTOP)
            self.assertTrue(ptg.wait_until(lambda: ptg.proc_status(pid)[0] in "tT"), ptg.proc_status(pid))
            os.kill(pid, signal.SIGUSR1)
            self.assertFalse(ptg.wait_until(lambda: False, timeout=0.3))
            self.assertIn(ptg.proc_status(pid)[0], "tT", "a stopped process stays stopped")
            os.kill(pid, signal.SIGCONT)
            self.assertEqual(proc.stdout.readline(), "usr1 21\n")
            self.assertEqual(ptg.proc_status(pid)[1], rec.proc.pid)
            proc.stdin.write("go\n")
            proc.stdin.close()
            self.assertEqual(proc.stdout.read(), "done\n")
            self.assertEqual(proc.wait(timeout=300), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
        finally:
            ptg.end(proc)
        self.assertNotIn("could be held", rec.stderr)
        counts = ptg.Trace(out).count("fib.py")
        self.assertEqual((counts["f:7"], counts["<module>:1"]), (5919, 1))

    def threaded(self, script, arg, between):
        """python -c script arg, recorded with -p PID --children from its ready
        line and let go; between(w, rec) once it is, whose value comes back
        with record (its end waited for) and the trace."""
        python = ptg.Python(ptg.ONCE)
        w = subprocess.Popen([python.exe, "-c", script, arg], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        out = os.path.join(self.tmp.name, "thread.ptg")
        try:
            self.assertEqual(w.stdout.readline(), "ready\n")
            rec = ptg.Recorder(["-p", str(w.pid), "--children"], out)
            ptg.go(w)
            got = between(w, rec)
            self.assertEqual(w.wait(timeout=60), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
        finally:
            ptg.close(w)
        self.assertNotIn("could be held", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        return got, rec, trace

    def test_exec_by_another_thread(self):
        """-p PID --children where a thread other than the main one execs: each
        thread of a member is held, so that exec stops as the main thread's
        would (the kernel gives the pid to the thread that execs), and the
        new image is held from its first instruction: nothing said, every
        call of it in."""
        def between(w, rec):
            self.assertEqual(w.stdout.readline(), f"child {w.pid}\n")
            self.assertTrue(ptg.wait_until(lambda: ptg.proc_status(w.pid)[1] == rec.proc.pid),
                            "held again after its exec")
            ptg.go(w)
            return w.pid

        wait = CHILD + "import sys\nsys.stdin.readline()\n"
        pid, rec, trace = self.threaded(THREAD_EXEC, wait, between)
        self.assertEqual(new_g(trace, pid), 500, rec.stderr)

    def test_spawn_by_another_thread(self):
        """-p PID --children where a thread other than the main one starts a
        Python child: the child is born under ptrace (each thread of a member
        is held, its forks followed), so its exec is held: every call of it,
        nothing said."""
        child, rec, trace = self.threaded(
            THREAD_SPAWN, CHILD, lambda w, rec: int(w.stdout.readline().split()[1]))
        self.assertIn(f"recording pid {child} too (Python", rec.stderr)
        self.assertEqual(new_g(trace, child), 500, rec.stderr)

    def test_member_under_another_tracer(self):
        """-p A,B where another tracer holds B: one warning that names it and its
        tracer; A is held and recorded as ever, exactly. By default (the agent
        cannot go into B: the uprobes, and record says why) and with --uprobes."""
        for args in ([], ["--uprobes"]):
            with self.subTest(args=args):
                self.member_under_another_tracer(args)

    def member_under_another_tracer(self, args):
        python = ptg.Python(ptg.ONCE)
        a, b = ptg.Workload(python, "fib.py"), ptg.Workload(python, "fib.py")
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
        self.assertEqual(libc.ptrace(PTRACE_SEIZE, b.pid, None, None), 0,
                         os.strerror(ctypes.get_errno()))
        out = os.path.join(self.tmp.name, "t.ptg")
        try:
            rec = ptg.Recorder([*args, "-p", f"{a.pid},{b.pid}"], out)
            self.assertEqual(ptg.proc_status(a.pid)[1], rec.proc.pid)
            a.go()
            self.assertIn("done", a.finish())
            libc.ptrace(PTRACE_DETACH, b.pid, None, None)
            b.go()
            self.assertIn("done", b.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
        finally:
            libc.ptrace(PTRACE_DETACH, b.pid, None, None)
            for w in (a, b):
                w.kill()
                w.proc.stdin.close()
                w.proc.stdout.close()
        warned = [x for x in rec.stderr.splitlines() if "another tracer" in x]
        self.assertEqual(len(warned), 1, rec.stderr)
        if not args:
            self.assertIn("python calls: uprobes (an agent did not go in: cannot trace pid "
                          f"{b.pid}", rec.stderr)
        self.assertIn(f"pid {b.pid} is under another tracer (pid {os.getpid()}, ", warned[0])
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        f = collections.Counter(r.pid for r in trace.records if r.kind == "py_enter" and
                                r.name == "f" and not r.flags & ptg.ENTER_RESUME)
        self.assertEqual((f[a.pid], f[b.pid]), (5919, 5919), rec.stderr)


if __name__ == "__main__":
    ptg.main()
