"""CUDA calls of every process of a multi-process recording (-p A,B,
--children, --per-process), on the fake driver (tests/fakecuda): exact
cuLaunchKernel and cuStreamSynchronize counts per process, whether the
library was mapped before the attach, loaded after it (dlopen at the first
call), inherited through fork or loaded again after an exec.
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import ptg
from test_cuda_host import LIBDIR, Trace

sys.path.insert(0, ptg.WORKLOADS)
import cuda_multi as plan  # noqa: E402

SCRIPT = os.path.join(ptg.WORKLOADS, "cuda_multi.py")
NOPY_CUDA = os.path.join(ptg.BUILD, "tests", "nopy_cuda")
# what record says of a process that ran a library unprobed for a while
WINDOW_NOTE = re.compile(r"libwatch: pid (\d+) (exec'd|had|has) .*not in the trace")


def expect(launches, syncs):
    return {"cuLaunchKernel": launches, "cuStreamSynchronize": syncs}


def roles(stdout):
    """{pid: role} from the "ROLE PID" lines of the workload's processes."""
    out = {}
    for line in stdout.splitlines():
        role, _, pid = line.partition(" ")
        if role in ("main", "child", "exec") and pid.isdigit():
            out[int(pid)] = role
    return out


class Proc:
    """cuda_multi.py started with --wait, the fake driver on its search path."""

    def __init__(self, python, *args):
        env = dict(os.environ, LD_LIBRARY_PATH=python.path(LIBDIR))
        self.proc = subprocess.Popen(python.argv(python.path(SCRIPT), "--wait", *args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.kill()
            raise RuntimeError(f"cuda_multi.py did not start: {line!r}")
        self.pid = int(line.split()[1])

    def mapped(self):
        with open(f"/proc/{self.pid}/maps") as f:
            return plan.LIB in f.read()

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self):
        out = self.proc.stdout.read()
        self.proc.wait(timeout=300)
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@ptg.per_interpreter
class TreeCuda(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def record_two(self, python, out, *flags):
        """-p A,B: A has the driver mapped before the attach, B loads it after."""
        procs = []
        try:
            procs = [Proc(python, "--preload", "300", "3"), Proc(python, "500", "5")]
            self.assertEqual([p.mapped() for p in procs], [True, False])
            rec = ptg.Recorder(["-p", f"{procs[0].pid},{procs[1].pid}", *flags], out)
            self.assertNotIn("not yet ops, CUDA calls", rec.stderr)
            for p in procs:
                p.go()
            for p in procs:
                self.assertIn("done", p.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            for p in procs:
                p.kill()
        self.assertIn("cuda: probing", rec.stderr)
        return procs, rec

    def check_two_pids(self, python):
        """Each process's own calls, exactly, in one trace."""
        out = os.path.join(self.tmp.name, "two.ptg")
        (a, b), rec = self.record_two(python, out)
        trace = Trace(out)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], "nothing lost")
        self.assertIn(plan.LIB, trace.meta["cuda.libraries"])
        self.assertEqual(ptg.cuda_counts(trace), {a.pid: expect(300, 3), b.pid: expect(500, 5)})
        self.assertIn("CUDA calls", rec.stderr)
        # off-CPU time inside each synchronization names that process's own call
        syncs = {(r.pid, r.fields["aux3"]) for r in trace.records
                 if r.kind == "cuda_call" and r.name == "cuStreamSynchronize"}
        off = [r for r in trace.records if r.kind == "sched" and r.name == "cuStreamSynchronize"]
        self.assertEqual({r.pid for r in off}, {a.pid, b.pid})
        self.assertTrue(all((r.pid, r.fields["aux3"]) in syncs for r in off))

    def check_per_process(self, python):
        """--per-process: each file holds its own process's calls and no other's."""
        out = os.path.join(self.tmp.name, "run.ptg")
        (a, b), _ = self.record_two(python, out, "--per-process")
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted([f"run.pid{a.pid}.ptg", f"run.pid{b.pid}.ptg"]))
        for p, n in ((a, (300, 3)), (b, (500, 5))):
            trace = Trace(os.path.join(self.tmp.name, f"run.pid{p.pid}.ptg"))
            self.assertEqual(ptg.cuda_counts(trace), {p.pid: expect(*n)})

    def check_children(self, python):
        """--children: a fork that loads the driver after the attach, a fork that
        execs the interpreter again and loads it there, then the parent itself."""
        out = os.path.join(self.tmp.name, "tree.ptg")
        p = Proc(python, "--fork", "--exec", "400", "4")
        try:
            self.assertFalse(p.mapped())
            rec = ptg.Recorder(["-p", str(p.pid), "--children"], out)
            p.go()
            stdout = p.finish()
            self.assertIn("done", stdout)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            p.kill()
        pids = roles(stdout)
        self.assertEqual(sorted(pids.values()), ["child", "exec", "main"], stdout)
        want = {"main": expect(400, 4), "child": expect(*plan.CHILD),
                "exec": expect(*plan.EXEC)}
        trace = Trace(out)
        self.assertEqual(ptg.cuda_counts(trace), {pid: want[role] for pid, role in pids.items()},
                         (trace.losses, rec.stderr))

    def check_children_preloaded(self, python):
        """--children: the parent has the driver mapped before the attach; its
        fork inherits the mapping and calls it without loading anything."""
        out = os.path.join(self.tmp.name, "pre.ptg")
        p = Proc(python, "--preload", "--fork", "250", "5")
        try:
            self.assertTrue(p.mapped())
            rec = ptg.Recorder(["-p", str(p.pid), "--children"], out)
            p.go()
            stdout = p.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            p.kill()
        pids = roles(stdout)
        want = {"main": expect(250, 5), "child": expect(*plan.CHILD)}
        self.assertEqual(ptg.cuda_counts(Trace(out)),
                         {pid: want[role] for pid, role in pids.items()})

    def check_per_process_not_python(self, python):
        """--children --per-process -- sh -c: a C program with no Python that
        calls the driver gets its own file, as the Python process does; the
        shell, with neither, none."""
        out = os.path.join(self.tmp.name, "job.ptg")
        script = f"{python.shell()} {python.path(SCRIPT)} 100 2 &\n{NOPY_CUDA} 40 15 0 0\nwait\n"
        res = ptg.run(["record", "--children", "--per-process", "-o", out, "--", "sh", "-c",
                       script], env=dict(os.environ, LD_LIBRARY_PATH=LIBDIR))
        self.assertEqual(res.returncode, 0, res.stderr)
        py = [p for p, r in roles(res.stdout).items() if r == "main"]
        files = sorted(os.listdir(self.tmp.name))
        self.assertEqual(len(files), 2, (files, res.stderr))
        self.assertIn(f"job.pid{py[0]}.ptg", files)
        got = {}
        for f in files:
            c = ptg.cuda_counts(Trace(os.path.join(self.tmp.name, f)))
            self.assertEqual(len(c), 1, f)
            (pid, calls), = c.items()
            self.assertEqual(f, f"job.pid{pid}.ptg")
            got["python" if pid == py[0] else "c"] = calls
        self.assertEqual(got, {"python": expect(100, 2), "c": expect(40, 15)})

    def record_exec(self, env, script, name):
        """record --children -- sh -c SCRIPT: the trace, its C program's calls, stderr."""
        out = os.path.join(self.tmp.name, name)
        res = ptg.run(["record", "--children", "-o", out, "--", "sh", "-c", script], env=env)
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = Trace(out)
        got = ptg.cuda_counts(trace)
        self.assertLessEqual(len(got), 1, got)
        return trace, next(iter(got.values()), {}), res.stderr

    def copy_driver(self):
        """A copy of the fake driver in a folder of its own: a file no process
        of the set has probed or has on its search path; and an environment
        without LD_LIBRARY_PATH."""
        lib = os.path.join(self.tmp.name, "lib")
        os.mkdir(lib)
        shutil.copy(os.path.join(LIBDIR, plan.LIB), lib)
        return lib, {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}

    def check_exec_unprobed(self, python):
        """--children: a shell execs a C program that links a copy of the driver
        in a folder that was on no search path of the set before that exec (its
        LD_LIBRARY_PATH is set for that exec only). The exec stops it before its
        first instruction, and the driver is found ahead on its new search path
        and probed while it waits: every call, nothing lost, nothing to say."""
        lib, env = self.copy_driver()
        trace, got, stderr = self.record_exec(
            env, f"LD_LIBRARY_PATH={lib} exec {NOPY_CUDA} 40 15 0 0", "exec.ptg")
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual((got, lost), (expect(40, 15), []), stderr)
        self.assertIsNone(WINDOW_NOTE.search(stderr), stderr)

    def check_exec_unprobed_two(self, python):
        """--children: two programs exec'd at once that link the same new copy of
        the driver, forked by a shell that is held: each is under ptrace from its
        birth, its exec held, so each has all its calls and nothing is said."""
        lib, env = self.copy_driver()
        run = f"LD_LIBRARY_PATH={lib} {NOPY_CUDA} 40 15 0 0"
        out = os.path.join(self.tmp.name, "two.ptg")
        res = ptg.run(["record", "--children", "-o", out, "--", "sh", "-c",
                       f"{run} & {run} & wait"], env=env)
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = Trace(out)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], res.stderr)
        self.assertIsNone(WINDOW_NOTE.search(res.stderr), res.stderr)
        got = ptg.cuda_counts(trace)
        self.assertEqual(list(got.values()), [expect(40, 15)] * 2, (got, res.stderr))

    def check_exec_probed(self, python):
        """--children: the same program, its driver on the shell's search path,
        so found ahead and probed before the exec: every call, nothing lost."""
        env = dict(os.environ, LD_LIBRARY_PATH=LIBDIR)
        trace, got, stderr = self.record_exec(env, f"exec {NOPY_CUDA} 40 15 0 0", "ahead.ptg")
        self.assertEqual(got, expect(40, 15), stderr)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], stderr)
        self.assertNotIn("exec'd a program that links", stderr)


if __name__ == "__main__":
    ptg.main()
