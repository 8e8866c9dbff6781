"""CUDA calls of every process of a multi-process recording (-p A,B,
--children, --per-process), on the fake driver (tests/fakecuda): exact
cuLaunchKernel and cuStreamSynchronize counts per process, whether the
library was mapped before the attach, loaded after it (dlopen at the first
call), inherited through fork or loaded again after an exec.
"""
import collections
import os
import re
import shutil
import signal
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


def counts(trace):
    """{pid: {api: calls}} of the trace's CUDA call records."""
    got = collections.defaultdict(collections.Counter)
    for r in trace.records:
        if r.kind == "cuda_call":
            got[r.pid][r.name] += 1
    return {pid: dict(c) for pid, c in got.items()}


def tracer_of(pid):
    """TracerPid of /proc/PID/status: the process that holds it under ptrace, or 0."""
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^TracerPid:\s+(\d+)", f.read(), re.M).group(1))


def proc_state(pid):
    """The state letter of /proc/PID/stat ("" once reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""


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
        self.assertEqual(counts(trace), {a.pid: expect(300, 3), b.pid: expect(500, 5)})
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
            self.assertEqual(counts(trace), {p.pid: expect(*n)})

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
        self.assertEqual(counts(trace), {pid: want[role] for pid, role in pids.items()},
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
        self.assertEqual(counts(Trace(out)), {pid: want[role] for pid, role in pids.items()})

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
            c = counts(Trace(os.path.join(self.tmp.name, f)))
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
        got = counts(trace)
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
        LD_LIBRARY_PATH is set for that exec only). It runs from its exec until
        the recorder reads the event and holds it, unprobed: its calls there may
        be missing, but never without a word: all of them, or the window counted
        (lib_unprobed_window) and said on stderr. It is said whenever the driver
        was mapped when its loader went on and its probes were not in yet,
        whether the recorder found it mapped, probed it ahead while the program
        ran on, or read the exec once the program had ended; it is not when the
        probes were in before that: then every call is in."""
        lib, env = self.copy_driver()
        trace, got, stderr = self.record_exec(
            env, f"LD_LIBRARY_PATH={lib} exec {NOPY_CUDA} 40 15 0 0", "exec.ptg")
        notes = [line for line in stderr.splitlines() if WINDOW_NOTE.search(line)]
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        if not notes:
            self.assertEqual((got, lost), (expect(40, 15), []), stderr)
            return
        self.assertEqual(len(notes), 1, stderr)
        # its path, or its name only when it ended before any scan saw it
        self.assertIn(plan.LIB, notes[0])
        self.assertEqual(lost, ["lib_unprobed_window cpu=-1: 1"], stderr)
        self.assertLessEqual(got.get("cuLaunchKernel", 0), 40, got)
        self.assertLessEqual(got.get("cuStreamSynchronize", 0), 15, got)
        print(f"exec into an unprobed driver: {got} of {expect(40, 15)}, said: {notes[0]}",
              file=sys.stderr)

    def check_exec_gone(self, python):
        """--children: the recorder is stopped (SIGSTOP) while a shell execs the
        same program, and let go only once that program has run and ended, so
        it reads the exec when nothing of the process is left to look at. Its
        calls ran on a driver no probe was on: none is in the trace, and that
        is said and counted (lib_unprobed_window), since the BPF side found the
        driver mapped and unprobed at the loader's notice."""
        lib, env = self.copy_driver()
        out = os.path.join(self.tmp.name, "gone.ptg")
        script = f"read go; LD_LIBRARY_PATH={lib} exec {NOPY_CUDA} 40 15 0 0"
        rec = ptg.Recorder(["--children", "--", "sh", "-c", script], out, env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        pid = int(re.search(r"recording pid (\d+)", rec.stderr).group(1))
        # let go by the recorder (it holds the command until the probes are in)
        self.assertTrue(ptg.wait_until(lambda: tracer_of(pid) == 0), tracer_of(pid))
        os.kill(rec.proc.pid, signal.SIGSTOP)
        try:
            rec.proc.stdin.write("go\n")
            rec.proc.stdin.flush()
            self.assertEqual(rec.proc.stdout.readline(), "done\n")
            # ended: a zombie while its parent, the recorder, is stopped
            self.assertTrue(ptg.wait_until(lambda: proc_state(pid) in ("Z", "")),
                            proc_state(pid))
        finally:
            os.kill(rec.proc.pid, signal.SIGCONT)
        status = rec.wait()
        for f in (rec.proc.stdin, rec.proc.stdout, rec.proc.stderr):
            f.close()
        self.assertEqual(status, 0, rec.stderr)
        trace = Trace(out)
        self.assertEqual(counts(trace), {}, rec.stderr)
        notes = [line for line in rec.stderr.splitlines() if WINDOW_NOTE.search(line)]
        self.assertEqual(len(notes), 1, rec.stderr)
        self.assertIn(f"pid {pid} had {plan.LIB} (inode {os.stat(lib + '/' + plan.LIB).st_ino}) "
                      "mapped and ended before it could be probed", notes[0])
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, ["lib_unprobed_window cpu=-1: 1"], rec.stderr)

    def check_exec_unprobed_two(self, python):
        """--children: two programs exec'd at once that link the same new copy of
        the driver. Its probes go in at the first scan that finds it, for both;
        either may have mapped it and gone on before then (or ended before it
        was looked at): each process has all its calls or is named in a note,
        once, and the trace counts one lib_unprobed_window per note."""
        lib, env = self.copy_driver()
        run = f"LD_LIBRARY_PATH={lib} {NOPY_CUDA} 40 15 0 0"
        out = os.path.join(self.tmp.name, "two.ptg")
        res = ptg.run(["record", "--children", "-o", out, "--", "sh", "-c",
                       f"{run} & {run} & wait"], env=env)
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = Trace(out)
        noted = set()
        for line in res.stderr.splitlines():
            m = WINDOW_NOTE.search(line)
            if m:
                self.assertNotIn(int(m.group(1)), noted, res.stderr)
                noted.add(int(m.group(1)))
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [f"lib_unprobed_window cpu=-1: {len(noted)}"] if noted else [],
                         res.stderr)
        got = counts(trace)
        full = {pid for pid, c in got.items() if c == expect(40, 15)}
        self.assertLessEqual(set(got) - full, noted, (got, res.stderr))
        self.assertGreaterEqual(len(full | noted), 2, (got, res.stderr))

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
