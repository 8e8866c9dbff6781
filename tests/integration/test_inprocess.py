"""record --in-process (the sys.monitoring agent) on every interpreter: the same
exact counts as the uprobes, frames open at attach, threads; a recorder killed
with SIGKILL leaves the target running with its tool id free; a second
recording finds the agent loaded and works. On 3.11 (no sys.monitoring) the
agent's C profile function gives the same records; killed, it leaves no
profile function on any thread and threading's hook as it was."""
import collections
import json
import os
import subprocess
import tempfile
import unittest

import ptg

# what this file checks is the Python calls: the other probes only cost time here
QUIET_PROBES = ["--no-cuda", "--no-ops", "--no-sched", "--no-cupti"]
NOBODY = 65534
# As another user: every abstract socket of /proc/net/unix whose name says
# ptrace-gpu and the pid argv[2] (as ours did), tried argv[1] times over;
# prints the names and how many connected.
FLOOD = """
import socket, sys
names = sorted({l.split()[-1][1:] for l in open("/proc/net/unix")
                if l.split()[-1].startswith("@ptrace-gpu-")
                and f"-{sys.argv[2]}-" in l.split()[-1]})
got = 0
for _ in range(int(sys.argv[1])):
    for n in names:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\\0" + n)
            got += 1
        except OSError:
            pass
        s.close()
print(names, got, flush=True)
"""


class InProcess(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, python, script, *extra):
        return ptg.Trace(self.record_path(python, script, *extra))

    def record_path(self, python, script, *extra, args=(), hold=False):
        """The trace of script recorded --in-process from go to its exit, checked whole.
        With hold (mlp.py), the workload waits once trained until the recorder
        has stopped by itself (--steps): the module objects still live while
        their names are read, however far behind the recorder runs."""
        out = os.path.join(self.tmp.name, f"{script}.ptg")
        w, rec = ptg.Workload(python, script, *args, *(["--hold"] if hold else [])), None
        try:
            rec = ptg.Recorder(["--in-process", "-p", str(w.pid), *extra], out)
            self.assertIn(", in-process: ", rec.stderr)
            w.go()
            if hold:
                self.assertEqual(w.proc.stdout.readline().strip(), "trained")
                self.assertEqual(rec.wait(), 0, rec.stderr)
                w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.close(rec)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [], "events were lost")
        # a training workload's trace says its steps instead
        self.assertIn(trace.meta["stop.reason"], ("target exited", "2 steps recorded"))
        return out

    def check_fib(self, python):
        """Every probe as by default: only the Python calls change source."""
        calls = [c for c in self.record(python, "fib.py").calls()
                 if c[1] == "f" and c[2].endswith("fib.py")]
        self.assertEqual(len(calls), 5919)
        self.assertTrue(all(c[7] == 0 for c in calls))
        self.assertEqual(sum(1 for c in calls if c[8] == min(x[8] for x in calls)), 3)

    def check_mixed_matches_oracle(self, python):
        """Generators, exceptions, recursion, methods: sys.setprofile's counts."""
        oracle = ptg.oracle(python, "mixed.py")
        trace = self.record(python, "mixed.py", *QUIET_PROBES)
        counts = trace.count("mixed.py")
        got = ptg.as_oracle(counts, oracle)
        self.assertEqual(got, oracle)
        # how each frame was entered and left: (name, resumed, yield/unwind) per call
        how = collections.Counter(
            (c[1], bool(c[6] & ptg.ENTER_RESUME), c[7] & (ptg.EXIT_YIELD | ptg.EXIT_UNWIND))
            for c in trace.calls() if c[2].endswith("mixed.py"))
        for gen in ("squares", "delegate"):
            # 15 values: started, suspended, resumed 15 times, returned once
            self.assertEqual([how[(gen, r, x)] for r, x in (
                (False, ptg.EXIT_YIELD), (True, ptg.EXIT_YIELD), (True, 0), (False, 0))],
                [1, 14, 1, 0], gen)
        self.assertEqual((how[("may_fail", False, ptg.EXIT_UNWIND)], how[("may_fail", False, 0)]),
                         (10, 20))

    def check_generator_events(self, python):
        """Throw, close, a throw before the start, await: how each frame was
        entered and left, as 3.12's sys.monitoring events say."""
        trace = self.record(python, "inproc_gen.py", *QUIET_PROBES)
        how = collections.Counter(
            (c[1], bool(c[6] & ptg.ENTER_RESUME), c[7] & (ptg.EXIT_YIELD | ptg.EXIT_UNWIND))
            for c in trace.calls() if c[2].endswith("inproc_gen.py") and c[1] != "<module>")
        Y, U = ptg.EXIT_YIELD, ptg.EXIT_UNWIND
        self.assertEqual(dict(how), {
            ("run", False, 0): 1,
            ("gen", False, Y): 1, ("gen", True, Y): 1, ("gen", True, U): 2,
            ("coro", False, Y): 1, ("coro", True, 0): 1,
            ("Later.__await__", False, Y): 1, ("Later.__await__", True, 0): 1})

    def check_late_threads(self, python):
        """Threads started while recording (3.11: through threading's profile
        hook), threads and the program ended by exceptions: sys.setprofile's counts."""
        oracle = ptg.oracle(python, "late_threads.py")
        trace = self.record(python, "late_threads.py", *QUIET_PROBES)
        counts = trace.count("late_threads.py")
        got = ptg.as_oracle(counts, oracle)
        self.assertEqual(got, oracle)
        booms = [c for c in trace.calls() if c[1].startswith("boom_")]
        self.assertEqual(len(booms), 6)
        self.assertTrue(all(c[7] == ptg.EXIT_UNWIND for c in booms), booms)
        self.assertGreaterEqual(len({t for (t, k) in trace.count("late_threads.py",
                                                                   by_tid=True)}), 5)

    def check_profiler_already_in(self, python):
        """3.11: a thread under sys.setprofile: refused in one line, its profiler
        untouched, nothing of ours on the other threads."""
        if python.version >= (3, 12):
            self.skipTest(f"{python}: sys.setprofile and the agent's sys.monitoring tool "
                          "coexist from 3.12")
        w = ptg.Workload(python, "inproc_profiled.py")
        try:
            res = ptg.run(["record", "--in-process", "-p", str(w.pid), *QUIET_PROBES, "-o",
                           os.path.join(self.tmp.name, "no.ptg")])
            w.go()
            after = json.loads(w.proc.stdout.readline())
            self.assertIn("done", w.finish())
        finally:
            w.kill()
        self.assertEqual(res.returncode, 1, res.stderr)
        # the agent's line, then record's "record failed: Device or resource busy"
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 2, res.stderr)
        self.assertIn("a thread already has a profile function", lines[0])
        self.assertEqual(after, {"seen": 10, "main": "None", "threading": "None"})

    def check_threads_and_open_frames(self, python):
        counts = self.record(python, "threads.py", *QUIET_PROBES).count(
            "threads.py", by_tid=True)
        leaves = sorted((k.split(":")[0], n) for (tid, k), n in counts.items()
                        if k.startswith("leaf"))
        self.assertEqual(leaves, [(f"leaf{i}", 1000) for i in range(4)])
        self.assertEqual(len({tid for (tid, k) in counts if k.startswith("leaf")}), 4)
        # frames open at the attach: as the uprobes record them, opened at the start
        trace = self.record(python, "deep.py", *QUIET_PROBES)
        pre = [r for r in trace.records
               if r.kind == "py_enter" and r.flags & ptg.ENTER_PREEXISTING]
        names = [r.name for r in pre if r.file.endswith(("deep.py", "gate.py"))]
        self.assertEqual(names, ["<module>", "main"] + ["deep"] * 20 + ["wait_for_go"])
        start = int(trace.meta["start.monotonic_ns"])
        self.assertTrue(all(r.ts == start for r in pre))

    def check_torch_ops_nest_in_frames(self, python):
        """Ops (uprobes) and Python frames (the agent) merged in time: each op
        runs under the frame that called it, as with record -p."""
        if not python.has_torch:
            self.skipTest(f"no PyTorch in {python}")
        out = self.record_path(python, "mlp.py", "--steps", "2", args=("--steps", "3"), hold=True)
        trace = ptg.Trace(out)
        stacks, linear, addmm = collections.defaultdict(list), [], 0
        for r in trace.records:
            if r.kind in ("py_enter", "op_enter"):
                stacks[r.tid].append(r)
            elif r.kind in ("py_exit", "op_exit"):
                e = stacks[r.tid].pop()
                self.assertEqual(e.kind == "op_enter", r.kind == "op_exit", (e.ts, r.ts))
                py = [x.name for x in stacks[r.tid] if x.kind == "py_enter"]
                if e.name == "aten::linear":
                    linear.append(py[-1] if py else None)
                addmm += e.name == "aten::addmm"
        self.assertEqual(linear, ["Linear.forward"] * 4)
        self.assertEqual(addmm, 4)
        # nn.Module paths, from the first locals the agent sends
        res = ptg.run(["report", "--group-by-module", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        for fc in ("fc1", "fc2"):
            self.assertRegex(res.stdout, rf"aten::addmm\s.*\s2\s+TOP\(Net\)::forward\.{fc}"
                                         rf"\(Linear\)::forward")

    def check_no_socket_to_flood(self, python):
        """The agent's connection is a socketpair the target made: /proc/net/unix
        names nothing of ours for another user to connect to while the agent is in,
        and 100 tries of another user's change nothing in the exact counts."""
        out = os.path.join(self.tmp.name, "flood.ptg")
        w, rec = ptg.Workload(python, "fib.py"), None
        try:
            rec = ptg.Recorder(["--in-process", "-p", str(w.pid), *QUIET_PROBES], out)
            self.assertIn(", in-process: ", rec.stderr)
            flood = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                    "--clear-groups", "/usr/bin/python3", "-c", FLOOD, "100",
                                    str(rec.proc.pid)],
                                   capture_output=True, text=True, timeout=120)
            self.assertEqual(flood.stdout, "[] 0\n", flood.stderr)
            w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.close(rec)
        self.assertNotIn("not the target", rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        calls = [c for c in trace.calls() if c[1] == "f" and c[2].endswith("fib.py")]
        self.assertEqual(len(calls), 5919)

    def check_killed_then_again(self, python):
        """SIGKILL of the recorder: the target goes on, its tool id is freed; a
        second recording (the agent already loaded) counts exactly."""
        out = os.path.join(self.tmp.name, "again.ptg")
        ptg.killed_then_again(self, python, out, rec_args=("--in-process", *QUIET_PROBES))
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        src = open(os.path.join(ptg.WORKLOADS, "inproc_again.py")).read().splitlines()
        line = src.index("def f(n):") + 1
        self.assertEqual(trace.count("inproc_again.py")[f"f:{line}"], 5919)


ptg.per_interpreter(InProcess)


@ptg.once
class Refusals(unittest.TestCase):
    """What --in-process does not take: one line, a non-zero status, nothing started."""

    def refused(self, args, text, status):
        res = ptg.run(["record", "--in-process", "-o", "/nonexistent/x.ptg", *args])
        self.assertEqual(res.returncode, status, res.stderr)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertIn(text, lines[0])

    def test_command_and_sets(self):
        for args in (["--", "true"], ["-p", str(os.getpid()), "--children"], ["--uid", "0"],
                     ["--cgroup", "/sys/fs/cgroup"]):
            # a usage error
            self.refused(args, "--in-process takes running processes (-p PID or -p A,B)", 2)

    def test_pid_list_with_one_not_python(self):
        """-p A,B with B no Python: refused as a lone B is, before A is touched."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        sleeper = subprocess.Popen(["sleep", "30"])
        w = ptg.Workload(python, "fib.py")
        try:
            self.refused(["-p", f"{w.pid},{sleeper.pid}", *QUIET_PROBES],
                         f"pid {sleeper.pid} runs no Python", 1)
            with open(f"/proc/{w.pid}/maps") as f:
                maps = f.read()
        finally:
            sleeper.kill()
            sleeper.wait()
            w.kill()
            w.proc.stdin.close()
            w.proc.stdout.close()
        self.assertNotIn("libptg_pymon", maps)

    def test_exec_ends_python_calls(self):
        """A process that execs Python while recorded in-process: its calls up to
        the exec, named (the agent sent the names; the exec took the memory they
        were in). Alone (-p, not held) none after, and the loss said and
        counted; in a set (-p A,B: held at its exec) the uprobes take the new
        image, every call of it (tests/integration/test_tree_exec.py compares
        the two paths)."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        script = python.path(os.path.join(ptg.WORKLOADS, "exec_python.py"))
        with tempfile.TemporaryDirectory() as d:
            for pair in (False, True):
                out = os.path.join(d, "exec.ptg")
                p = subprocess.Popen(python.argv(script, python.exe),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                other = ptg.Workload(python, "fib.py") if pair else None
                rec = None
                try:
                    self.assertTrue(p.stdout.readline().startswith("ready"))
                    pids = [p.pid] + ([other.pid] if other else [])
                    rec = ptg.Recorder(["--in-process", "-p", ",".join(map(str, pids)),
                                        *QUIET_PROBES], out)
                    p.stdin.write("go\n")
                    p.stdin.flush()
                    if other:
                        other.go()
                        self.assertIn("done", other.finish())
                    self.assertIn("done", p.stdout.read())
                    p.wait()
                    self.assertEqual(rec.wait(), 0, rec.stderr)
                finally:
                    p.kill()
                    p.wait()
                    p.stdin.close()
                    p.stdout.close()
                    if other:
                        other.kill()
                        other.proc.stdin.close()
                        other.proc.stdout.close()
                    if rec:
                        rec.proc.stderr.close()
                self.assertIn(f"pid {p.pid} exec'd ", rec.stderr)
                trace = ptg.Trace(out)
                counts = trace.count("exec_python.py")
                self.assertEqual(counts["g:9"], 50)
                if other:
                    self.assertIn("its calls are taken by uprobes from here", rec.stderr)
                    self.assertEqual(trace.losses, [])
                    self.assertEqual(counts["f:13"], 300)
                    self.assertEqual(trace.count("fib.py")["f:7"], 5919)
                else:
                    self.assertIn("the in-process agent went with the program it replaced",
                                  rec.stderr)
                    self.assertIn(f"record -p {p.pid} --hold holds it at its exec", rec.stderr)
                    self.assertEqual(trace.losses, ["py_exec_unfollowed cpu=-1: 1"])
                    self.assertNotIn("f:13", counts)

    def test_pid_list(self):
        """-p A,B,C --in-process of 3.11 (the profile function) and 3.12 (sys.monitoring)
        processes: an agent in each, every process's calls exact in one trace,
        and with --per-process, one trace each, named by rank."""
        pythons = [ptg.Python(n) for n in ("debian-3.11", "pyenv-3.12", "pyenv-3.12")]
        missing = [f"{p}: {p.missing}" for p in pythons if p.missing]
        if missing:
            self.skipTest("; ".join(missing))
        oracles = {p.name: ptg.oracle(p, "mixed.py") for p in pythons}
        with tempfile.TemporaryDirectory() as d:
            for split in (False, True):
                out = os.path.join(d, "job.ptg")
                ws = []
                try:
                    for rank, p in enumerate(pythons):
                        os.environ["RANK"] = str(rank)
                        ws.append(ptg.Workload(p, "mixed.py"))
                finally:
                    del os.environ["RANK"]
                err, _ = ptg.record_workloads(
                    self, ws, ["--in-process", *(["--per-process"] if split else []),
                               *QUIET_PROBES], out)
                self.assertIn(f"python calls: in-process (pid {ws[0].pid}: a C profile function; "
                              f"pid {ws[1].pid}: sys.monitoring tool id ", err)
                self.assertIn("from 3 processes (2 interpreters", err)
                files = sorted(os.listdir(d))
                if split:
                    self.assertEqual(files, ["job.rank0.ptg", "job.rank1.ptg", "job.rank2.ptg"])
                    traces = [ptg.Trace(os.path.join(d, f)) for f in files]
                else:
                    self.assertEqual(files, ["job.ptg"])
                    traces = [ptg.Trace(out)] * 3
                for f in files:
                    os.unlink(os.path.join(d, f))
                for w, p, trace in zip(ws, pythons, traces):
                    self.assertEqual(trace.losses, [])
                    tid_pid = {r.tid: r.pid for r in trace.records}
                    counts = collections.Counter()
                    for (tid, key), n in trace.count("mixed.py", by_tid=True).items():
                        if tid_pid[tid] == w.pid:
                            counts[key] += n
                    self.assertEqual(ptg.as_oracle(counts, oracles[p.name]), oracles[p.name],
                                     f"pid {w.pid} ({p})")
                if split:
                    self.assertEqual([t.meta["pid"] for t in traces], [str(w.pid) for w in ws])

    def test_agent_not_root_only(self):
        """$PTG_PYMON_AGENT in a folder others may write: refused, the target untouched."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        with tempfile.TemporaryDirectory(dir="/tmp") as d:
            os.chmod(d, 0o777)
            lib = os.path.join(d, "libptg_pymon.so")
            with open(os.path.join(ptg.BUILD, "libptg_pymon.so"), "rb") as src, \
                    open(lib, "wb") as dst:
                dst.write(src.read())
            w = ptg.Workload(python, "fib.py")
            try:
                res = subprocess.run([ptg.PTG, "record", "--in-process", "-p", str(w.pid),
                                      "-o", os.path.join(d, "x.ptg"), *QUIET_PROBES],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, PTG_PYMON_AGENT=lib))
                maps = open(f"/proc/{w.pid}/maps").read()
            finally:
                w.kill()
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertIn("refusing the agent", res.stderr)
        self.assertNotIn("ptg_pymon", maps)
        self.assertNotIn("libptg_pymon", maps)

    def test_hostile_agent(self):
        """An agent that lies (tests/helpers/inject_pymon_hostile.c): every bad
        record counted and ignored, the recording ends as asked."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        liar = ptg.trusted_lib(os.path.join(ptg.BUILD, "tests", "libinject_pymon_hostile.so"))
        with tempfile.TemporaryDirectory() as d:
            w = ptg.Workload(python, "fib.py")
            try:
                out = os.path.join(d, "liar.ptg")
                res = subprocess.run([ptg.PTG, "record", "--in-process", "-p", str(w.pid),
                                      "-d", "1", "-o", out, *QUIET_PROBES],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, PTG_PYMON_AGENT=liar), timeout=120)
            finally:
                w.kill()
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertLess(len(res.stderr.splitlines()), 10, res.stderr)
            trace = ptg.Trace(out)
        # 6 malformed records, 4 of two CODE groups that lie, and 465 threads
        # beyond 65,536; 65,536 returns of frames never seen; one code object
        # at an address that holds none, and one named by its CODE group alone
        self.assertEqual(sorted(trace.losses), [
            "py_code_unresolved cpu=-1: 1", "py_inproc_bad cpu=-1: 475",
            "py_inproc_dropped cpu=-1: 7", "py_unmatched_exit cpu=-1: 65536"])
        named = [c for c in trace.calls() if c[1] == "liar.named"]
        self.assertEqual([(c[2], c[3]) for c in named], [("/liar.py", 7)])

    def test_hostile_agent_ops_only(self):
        """The same liar as record -p's agent of ops alone (the target maps a
        libtorch_cpu.so): it answers with no op callback, so it is hung up on
        and the probes take the ops; every record it wrote is counted as bad
        (none is an op), the frames come from the probes."""
        python = ptg.Python("pyenv-3.12")
        if python.missing:
            self.skipTest(python.missing)
        liar = ptg.trusted_lib(os.path.join(ptg.BUILD, "tests", "libinject_pymon_hostile.so"))
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "libtorch_cpu.so")
            src = os.path.join(d, "empty.c")
            with open(src, "w") as f:
                f.write("int ptg_fake_torch;\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", fake, src], check=True)
            old = os.environ.get("LD_PRELOAD")
            os.environ["LD_PRELOAD"] = fake
            try:
                w = ptg.Workload(python, "fib.py")
            finally:
                os.environ.pop("LD_PRELOAD")
                if old is not None:
                    os.environ["LD_PRELOAD"] = old
            out, rec = os.path.join(d, "liar.ptg"), None
            try:
                rec = ptg.Recorder(["--uprobes", "-p", str(w.pid), "--no-cuda", "--no-sched",
                                    "--no-cupti"],
                                   out, env=dict(os.environ, PTG_PYMON_AGENT=liar))
                w.go()
                self.assertIn("done", w.finish())
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                w.close(rec)
            self.assertIn("registered no op callback", rec.stderr)
            self.assertLess(len(rec.stderr.splitlines()), 10, rec.stderr)
            trace = ptg.Trace(out)
        self.assertEqual(trace.meta["ops.source"], "uprobes")
        # all 66,021 records the liar wrote: none is an op
        self.assertEqual(sorted(trace.losses), ["py_inproc_bad cpu=-1: 66021",
                                                "py_inproc_dropped cpu=-1: 7"])
        # fib.py's calls, from the probes, all of them
        self.assertEqual(collections.Counter(c[1] for c in trace.calls())["f"], 5919)

    def test_no_python(self):
        sleeper = subprocess.Popen(["sleep", "30"])
        try:
            self.refused(["-p", str(sleeper.pid), *QUIET_PROBES], "runs no Python", 1)
        finally:
            sleeper.kill()
            sleeper.wait()

if __name__ == "__main__":
    ptg.main()
