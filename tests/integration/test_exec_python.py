"""`record -p` of a Python process that execs an interpreter
(tests/workloads/exec_python.py: g 50 times, then the exec, then f 300
times in the new image).

One-process recording follows the interpreter it attached to: the same
non-PIE file exec'd again (Debian's /usr/bin/python3.11) maps at the same
addresses and is recorded on exactly; another interpreter, or a
position-independent one mapped anew, is not followed, and that is said
at once on stderr and counted in the trace (`py_exec_unfollowed`), never
silent. `--children` follows it: both images' calls, exactly. A target that
execs and ends before the recorder reads its exec (here: the recorder
stopped meanwhile) is judged by the file it exec'd, which the exec event
carries: the same fixed-address interpreter is followed, anything else is
said and counted as above. All of that is the uprobes' (--uprobes); by
default a one-process recording takes the calls in-process, and the agent
goes with the program an exec replaces: said, with --hold, which follows
the exec by the uprobes (tests/integration/test_attach_exec.py), and
counted.
"""
import os
import signal
import subprocess
import tempfile
import unittest

import ptg

WORKLOAD = os.path.join(ptg.WORKLOADS, "exec_python.py")


@ptg.once
class ExecPython(unittest.TestCase):
    def record(self, first, second, *args, paused=False, path=("--uprobes",)):
        """(trace, record's stderr) of first running the workload and exec'ing second;
        paused: the recorder stopped from before the workload's calls to after its end;
        path: the options that choose how the calls are taken (() the default's)."""
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "run.ptg")
            w = subprocess.Popen([first.exe, WORKLOAD, second.exe], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            try:
                self.assertTrue(w.stdout.readline().startswith("ready"))
                rec = ptg.Recorder([*path, "-p", str(w.pid), *args], out)
                if paused:
                    os.kill(rec.proc.pid, signal.SIGSTOP)
                w.stdin.write("go\n")
                w.stdin.flush()
                self.assertEqual(w.stdout.read(), "done\n")
                self.assertEqual(w.wait(timeout=60), 0)
                if paused:
                    os.kill(rec.proc.pid, signal.SIGCONT)
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                w.kill()
                w.wait()
                w.stdin.close()
                w.stdout.close()
                rec.proc.stderr.close()
            return ptg.Trace(out), rec.stderr

    def interpreters(self, *names):
        pys = [ptg.Python(n) for n in names]
        missing = [f"{p}: {p.missing}" for p in pys if p.missing or p.root]
        if missing:
            self.skipTest("; ".join(missing))
        return pys

    def test_same_static_interpreter(self):
        (py,) = self.interpreters("debian-3.11")
        trace, err = self.record(py, py)
        self.assertNotIn("exec'd", err)
        self.assertEqual(trace.losses, [])
        counts = trace.count("exec_python.py")
        self.assertEqual((counts["g:9"], counts["f:13"]), (50, 300))

    def test_same_static_interpreter_read_late(self):
        (py,) = self.interpreters("debian-3.11")
        trace, err = self.record(py, py, paused=True)
        self.assertNotIn("exec'd", err)
        self.assertEqual(trace.losses, [])
        counts = trace.count("exec_python.py")
        self.assertEqual((counts["g:9"], counts["f:13"]), (50, 300))

    def test_another_interpreter_read_late(self):
        trace, err = self.record(*self.interpreters("debian-3.11", "pyenv-3.12"), paused=True)
        self.assertIn("exec'd and ended before its new image was looked at", err)
        self.assertIn("from here on the new program's Python calls are not recorded", err)
        self.assertIn("py_exec_unfollowed cpu=-1: 1", trace.losses)
        self.assertEqual(trace.count("exec_python.py")["g:9"], 50)

    def test_same_pie_interpreter_read_late(self):
        py = self.interpreters("pyenv-3.12")[0]
        trace, err = self.record(py, py, paused=True)
        self.assertIn("exec'd and ended before its new image was looked at", err)
        self.assertIn("py_exec_unfollowed cpu=-1: 1", trace.losses)
        self.assertEqual(trace.count("exec_python.py")["g:9"], 50)

    def check_unfollowed(self, first, second):
        trace, err = self.record(first, second)
        self.assertIn("exec'd", err)
        self.assertIn("from here on the new program's Python calls are not recorded", err)
        self.assertIn("py_exec_unfollowed cpu=-1: 1", trace.losses)
        self.assertEqual(trace.count("exec_python.py")["g:9"], 50)

    def test_another_interpreter(self):
        self.check_unfollowed(*self.interpreters("debian-3.11", "pyenv-3.12"))

    def test_same_pie_interpreter(self):
        py = self.interpreters("pyenv-3.12")[0]
        self.check_unfollowed(py, py)

    def test_in_process_says_hold(self):
        """The default, in-process: even the same fixed-address interpreter is
        not followed (the agent went with the old program); said with --hold."""
        (py,) = self.interpreters("debian-3.11")
        trace, err = self.record(py, py, path=())
        self.assertIn("python calls: in-process", err)
        self.assertIn("the in-process agent went with the program it replaced", err)
        self.assertIn("--hold holds it at its exec", err)
        self.assertIn("py_exec_unfollowed cpu=-1: 1", trace.losses)
        self.assertEqual(trace.count("exec_python.py")["g:9"], 50)

    def test_children_follows(self):
        first, second = self.interpreters("debian-3.11", "pyenv-3.12")
        trace, err = self.record(first, second, "--children")
        self.assertFalse([l for l in trace.losses if "py_exec_unfollowed" in l])
        counts = trace.count("exec_python.py")
        self.assertEqual((counts["g:9"], counts["f:13"]), (50, 300))


if __name__ == "__main__":
    ptg.main()
