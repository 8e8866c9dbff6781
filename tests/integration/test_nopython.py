"""Recording a process with no Python in it, and one that starts Python later.

- tests/helpers/nopy_cuda.c, a C program linked to the fake CUDA driver
  (tests/fakecuda), makes LAUNCHES cuLaunchKernel and SYNCS
  cuStreamSynchronize calls and SLEEPS sleeps: recorded with `-- CMD` and
  with `-p`, the trace holds exactly those calls, an off-CPU interval of at
  least each sleep, and says python: none; report, idle, flamegraph and
  export --chrome/--pprof read it and show the calls.
- tests/helpers/nopy_plain.c has neither Python nor CUDA: off-CPU only, and
  record says so in one line.
- `record -- sh -c 'exec python3 fib.py'`: the shell is recorded, its exec
  into Python held until the probes are in: fib's exact call counts (as
  test_record_counts), for every interpreter.
- `record -p` of a shell that execs Python, and of nopy_embed.c, a C program
  that dlopen()s libpython after the recording started and runs f CALLS
  times through PyRun_SimpleString: exact counts from the first call made
  after record says it found the interpreter.
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import collections
import json
import os
import pstats
import shlex
import subprocess
import tempfile
import unittest

import ptg

HELPERS = os.path.join(ptg.BUILD, "tests")
CUDA_PROG = os.path.join(HELPERS, "nopy_cuda")
PLAIN_PROG = os.path.join(HELPERS, "nopy_plain")
EMBED_PROG = os.path.join(HELPERS, "nopy_embed")
FIB = os.path.join(ptg.WORKLOADS, "fib.py")
LAUNCHES, SYNCS, SLEEPS, SLEEP_MS = 40, 15, 3, 30
MS = 1000000


def cuda_counts(trace):
    return collections.Counter(r.name for r in trace.records if r.kind == "cuda_call")


def long_sleeps(trace, pid):
    """Off-CPU intervals of pid's thread at least one sleep long."""
    return [r for r in trace.records
            if r.kind == "sched" and r.tid == pid and r.fields.get("dur", 0) >= SLEEP_MS * MS]


def read_line(proc, word):
    line = proc.stdout.readline()
    if not line.startswith(word):
        raise AssertionError(f"expected '{word} ...' from the program, got {line!r}")
    return int(line.split()[1])


def status_field(pid, name):
    """A field of /proc/PID/status, or None when the process is gone (or a zombie's is)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == name:
                    return value.strip()
    except FileNotFoundError:
        pass
    return None


def wait_stderr(rec, text):
    """Reads record's stderr until a line holds text (record says it before it goes on)."""
    while not any(text in line for line in rec.lines):
        line = rec.proc.stderr.readline()
        if not line:
            raise AssertionError(f"record ended before saying '{text}': {rec.stderr}")
        rec.lines.append(line)


def start_command(args, out, **popen):
    """`record -o out -- args` of a command with no Python, as a ptg.Recorder,
    returned once record says it started it (it says "recording pid" only
    once the command runs Python, which these never do)."""
    rec = ptg.Recorder.__new__(ptg.Recorder)
    rec.proc = subprocess.Popen([ptg.PTG, "record", "-o", out, "--", *args],
                                stderr=subprocess.PIPE, text=True, **popen)
    rec.lines = []
    wait_stderr(rec, "no Python yet")
    return rec


@ptg.once
class NoPython(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "nopy.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def check_cuda_trace(self, pid, rec):
        trace = ptg.Trace(self.out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["python"], "none")
        self.assertEqual(cuda_counts(trace),
                         {"cuLaunchKernel": LAUNCHES, "cuStreamSynchronize": SYNCS})
        self.assertTrue(all(r.pid == pid for r in trace.records if r.kind == "cuda_call"))
        self.assertFalse([r for r in trace.records if r.kind.startswith("py_")])
        self.assertGreaterEqual(len(long_sleeps(trace, pid)), SLEEPS)
        self.assertIn(f"pid {pid} ran no Python", rec.stderr)
        for args in (["report"], ["idle"], ["flamegraph"]):
            res = ptg.run([*args, self.out])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertIn("cuLaunchKernel", res.stdout, args)
            self.assertIn("cuStreamSynchronize", res.stdout, args)
        folded = dict(line.rsplit(" ", 1) for line in ptg.run(["flamegraph", self.out])
                      .stdout.splitlines())
        self.assertEqual(set(folded), {"cuLaunchKernel", "cuStreamSynchronize"})
        chrome = os.path.join(self.tmp.name, "nopy.json")
        res = ptg.run(["export", "--chrome", chrome, self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
        calls = collections.Counter(e["name"] for e in events if e.get("cat") == "cuda_driver")
        self.assertEqual(calls, {"cuLaunchKernel": LAUNCHES, "cuStreamSynchronize": SYNCS})
        res = ptg.run(["export", "--pprof", os.path.join(self.tmp.name, "nopy.pb.gz"),
                       self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        # pstats (read back by Python's own pstats): the calls as C functions
        prof = os.path.join(self.tmp.name, "nopy.prof")
        res = ptg.run(["export", "--pstats", prof, self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        stats = pstats.Stats(prof).stats
        self.assertEqual({k[2]: v[1] for k, v in stats.items()},
                         {"<cuLaunchKernel>": LAUNCHES, "<cuStreamSynchronize>": SYNCS})
        res = ptg.run(["report", "--callers", self.out])
        self.assertEqual(res.returncode, 0, res.stderr)

    def test_cuda_command(self):
        rec = start_command([CUDA_PROG, str(LAUNCHES), str(SYNCS), str(SLEEPS), str(SLEEP_MS)],
                            self.out, stdout=subprocess.PIPE)
        self.assertIn("done", rec.proc.stdout.read())
        rec.proc.stdout.close()
        self.assertEqual(rec.wait(), 0, rec.stderr)
        rec.proc.stderr.close()
        self.check_cuda_trace(int(ptg.Trace(self.out).meta["pid"]), rec)

    def test_cuda_attached(self):
        proc = subprocess.Popen([CUDA_PROG, "--wait", str(LAUNCHES), str(SYNCS), str(SLEEPS),
                                 str(SLEEP_MS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
        try:
            pid = read_line(proc, "ready")
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            ptg.go(proc)
            self.assertIn("done", proc.stdout.read())
            self.assertEqual(proc.wait(timeout=300), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            ptg.close(proc)
        self.check_cuda_trace(pid, rec)

    def test_plain_command(self):
        """Neither Python nor CUDA: off-CPU only, said in one line."""
        rec = start_command([PLAIN_PROG, str(SLEEPS), str(SLEEP_MS)], self.out,
                            stdout=subprocess.PIPE)
        rec.proc.stdout.read()
        rec.proc.stdout.close()
        self.assertEqual(rec.wait(), 0, rec.stderr)
        rec.proc.stderr.close()
        trace = ptg.Trace(self.out)
        pid = int(trace.meta["pid"])
        notes = [line for line in rec.stderr.splitlines() if "ran neither Python nor CUDA" in line]
        self.assertEqual(len(notes), 1, rec.stderr)
        self.assertEqual({r.kind for r in trace.records} - {"thread"}, {"sched"})
        self.assertGreaterEqual(len(long_sleeps(trace, pid)), SLEEPS)
        for args in (["report"], ["idle"], ["flamegraph", "--weight", "offcpu"]):
            res = ptg.run([*args, self.out])
            self.assertEqual(res.returncode, 0, res.stderr)

    def test_kill_while_held(self):
        """record -- CMD holds a command with no Python under ptrace (to see an
        exec into Python): a SIGKILL of record leaves it running, untraced,
        and it ends as it would have."""
        rec = start_command([PLAIN_PROG, "--wait", "2", "20"], self.out,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            pid = read_line(rec.proc, "ready")
            self.assertEqual(status_field(pid, "TracerPid"), str(rec.proc.pid))
            rec.proc.kill()
            rec.proc.wait()
            self.assertTrue(ptg.wait_until(lambda: status_field(pid, "TracerPid") == "0"))
            self.assertNotIn(status_field(pid, "State")[0], "tT")
            ptg.go(rec.proc)
            self.assertEqual(rec.proc.stdout.read(), "done\n")
            self.assertTrue(ptg.wait_until(lambda: not os.path.exists(f"/proc/{pid}")))
        finally:
            ptg.close(rec.proc)

    def test_steps_need_python(self):
        proc = subprocess.Popen([PLAIN_PROG, "--wait", "1", "1"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            pid = read_line(proc, "ready")
            res = subprocess.run([ptg.PTG, "record", "--steps", "2", "-p", str(pid), "-o",
                                  self.out], capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 1)
            self.assertEqual(res.stderr.strip().splitlines()[-1],
                             f"ptrace-gpu: record: --steps and --schedule need Python; pid {pid} "
                             "runs none")
            self.assertFalse(os.path.exists(self.out))
        finally:
            ptg.close(proc)

    def record_gated(self, argv, first_word):
        """Starts argv (it says 'ready PID' and waits), records it with -p, lets
        it go; once record says it found Python, lets it go again. The trace."""
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            pid = read_line(proc, "ready")
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            ptg.go(proc)
            read_line(proc, first_word)
            wait_stderr(rec, f"pid {pid} runs Python")
            ptg.go(proc)
            self.assertIn("done", proc.stdout.read())
            self.assertEqual(proc.wait(timeout=300), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            ptg.close(proc)
        return pid, ptg.Trace(self.out)

    def test_attached_exec(self):
        """-p of a shell that execs Python: found at the exec, calls from then on."""
        python = ptg.Python(ptg.ONCE)
        if python.missing:
            self.skipTest(python.missing)
        script = f"echo ready $$; read x; exec {shlex.join([python.exe, FIB, '--wait'])}"
        pid, trace = self.record_gated(["sh", "-c", script], "ready")
        self.assertEqual(trace.meta["python"], "exec")
        counts = trace.count("fib.py")
        self.assertEqual(counts["f:7"], 5919)
        self.assertEqual(counts["main:11"], 1)

    def libpython(self):
        """pyenv's shared libpython3.11 (Debian's python3.11 has none), or skip."""
        exe = ptg.pyenv_exe("3.11")
        lib = os.path.join(os.path.dirname(os.path.dirname(exe)), "lib",
                           "libpython3.11.so.1.0") if exe else ""
        if not os.path.exists(lib):
            self.skipTest(f"no shared libpython3.11 from pyenv ({lib or ptg.PYENV})")
        return lib

    def check_embedded(self, trace, lib, calls):
        self.assertEqual(trace.meta["python"], "mapped")
        self.assertEqual(trace.meta["python.path"], os.path.realpath(lib))
        counts = trace.count("<string>")
        self.assertEqual(counts["f:1"], calls)
        # held at the notice that mapped libpython: from the interpreter's first
        # frame on, so the start-up's own <string> code is there too; each f is
        # the one call of its own PyRun_SimpleString's <module>
        first = next(r for r in trace.records if r.kind == "py_enter")
        self.assertEqual((first.name, first.file), ("<module>", "<frozen importlib._bootstrap>"))
        segs = trace.calls()
        runs = [c for c in segs if (c[1], c[2]) == ("<module>", "<string>")]
        fs = [c for c in segs if (c[1], c[2]) == ("f", "<string>")]
        self.assertEqual(len([m for m in runs if [f for f in fs if f[0] == m[0] and
                              m[4] <= f[4] and f[5] <= m[5] and f[8] == m[8] + 1]]), calls)

    def test_embedded_dlopen(self):
        """A C program that loads libpython after the recording started (-p)."""
        lib, calls = self.libpython(), 37
        _, trace = self.record_gated([EMBED_PROG, lib, str(calls)], "python")
        self.check_embedded(trace, lib, calls)

    def test_embedded_dlopen_command(self):
        """The same under -- CMD, where the program is held for its execs."""
        lib, calls = self.libpython(), 23
        rec = start_command([EMBED_PROG, lib, str(calls)], self.out, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
        try:
            pid = read_line(rec.proc, "ready")
            ptg.go(rec.proc)
            read_line(rec.proc, "python")
            wait_stderr(rec, f"pid {pid} runs Python")
            ptg.go(rec.proc)
            self.assertEqual(rec.proc.stdout.read(), "done\n")
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            ptg.close(rec.proc)
        self.check_embedded(ptg.Trace(self.out), lib, calls)


class ExecPython(unittest.TestCase):
    """record -- sh -c 'exec python3 fib.py': the shell first, Python from its exec on."""

    def check_sh_exec(self, python):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "exec.ptg")
            cmd = "exec " + shlex.join(python.argv(python.path(FIB)))
            rec = subprocess.run([ptg.PTG, "record", "-o", out, "--", "sh", "-c", cmd],
                                 capture_output=True, text=True, timeout=600)
            self.assertEqual(rec.returncode, 0, rec.stderr)
            self.assertIn("no Python yet", rec.stderr)
            self.assertIn(f"ptrace-gpu: recording pid {ptg.Trace(out).meta['pid']} (Python ",
                          rec.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.meta["python"], "exec")
            counts = trace.count("fib.py")
            self.assertEqual(counts["f:7"], 5919)
            self.assertEqual(counts["main:11"], 1)
            self.assertEqual(counts["<module>:1"], 1)
            # held from its exec: no frame was running before the probes went in
            self.assertFalse([c for c in trace.calls() if c[6] & ptg.ENTER_PREEXISTING])


ptg.per_interpreter(ExecPython)

if __name__ == "__main__":
    ptg.main()
