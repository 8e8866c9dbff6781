"""record on real Python processes of every interpreter (ptg.INTERPRETERS): exact call counts,
by record -p's default (in-process) and by --uprobes alike."""
import collections
import os
import shutil
import tempfile
import unittest

import ptg


def shape(trace, suffix):
    """The frames of files ending in suffix, as two Counters: (caller, callee,
    resumed) pairs, and how each frame but <module> ended (its exit flags).
    How <module> ended when an uncaught exception ends the program differs:
    3.15's uprobes do not see its unwind (closed at the stop), the agent does."""
    edges, ends = collections.Counter(), collections.Counter()
    stacks = collections.defaultdict(list)
    for r in trace.records:
        if r.kind == "py_enter":
            st = stacks[r.tid]
            if r.file.endswith(suffix):
                caller = st[-1] if st else None
                edges[(caller, f"{r.name}:{r.line}", r.flags & ptg.ENTER_RESUME)] += 1
            st.append(f"{r.name}:{r.line}" if r.file.endswith(suffix) else None)
        elif r.kind == "py_exit" and stacks[r.tid]:
            name = stacks[r.tid].pop()
            if name and not name.startswith("<module>:"):
                ends[(name, r.flags)] += 1
    return edges, ends


class RecordCounts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def record_attached(self, python, script, *args, rec_args=()):
        """Attaches while the workload waits, lets it run to its exit.
        What the workload printed and record's stderr stay in self.said and
        self.rec_stderr."""
        out = os.path.join(self.tmp.name, f"{script}{len(rec_args)}.ptg")
        w = ptg.Workload(python, script, *args)
        try:
            rec = ptg.Recorder([*rec_args, "-p", str(w.pid)], out)
            w.go()
            self.said = w.finish()
            self.assertIn("done", self.said)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            self.rec_stderr = rec.stderr
        finally:
            w.kill()
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [], "events were lost")
        self.assertEqual(trace.meta["stop.reason"], "target exited")
        return trace

    def check_fib_attached(self, python):
        trace = self.record_attached(python, "fib.py")
        calls = [c for c in trace.calls() if c[1] == "f" and c[2].endswith("fib.py")]
        self.assertEqual(len(calls), 5919)
        for c in calls:
            self.assertGreaterEqual(c[5], c[4], "exit before entry")
            self.assertEqual(c[7], 0, "f returns normally")
        # primitive calls: f not already on the stack
        outermost = [c for c in calls if c[8] == min(x[8] for x in calls)]
        self.assertEqual(len(outermost), 3)

    def check_exception_chain(self, python):
        trace = self.record_attached(python, "exceptions.py")
        segs = {}
        for c in trace.calls():
            if c[2].endswith("exceptions.py") and c[1] in ("outer", "middle", "innermost"):
                segs.setdefault(c[1], []).append(c)
        self.assertEqual({k: len(v) for k, v in segs.items()},
                         {"outer": 100, "middle": 100, "innermost": 100})
        self.assertTrue(all(c[7] == ptg.EXIT_UNWIND for c in segs["innermost"]))
        self.assertTrue(all(c[7] == ptg.EXIT_UNWIND for c in segs["middle"]))
        self.assertTrue(all(c[7] == 0 for c in segs["outer"]))

    def check_generator_is_one_call(self, python):
        trace = self.record_attached(python, "generator.py")
        segs = [c for c in trace.calls() if c[1] == "produce"]
        new = [c for c in segs if not c[6] & ptg.ENTER_RESUME]
        self.assertEqual(len(new), 1)
        # started once, resumed after each of the 100 yields
        self.assertEqual(len(segs), 101)
        self.assertEqual(sum(1 for c in segs if c[7] == ptg.EXIT_YIELD), 100)

    def check_threads_exact_per_thread(self, python):
        trace = self.record_attached(python, "threads.py")
        counts = trace.count("threads.py", by_tid=True)
        per_leaf = {}
        for (tid, key), n in counts.items():
            if key.startswith("leaf"):
                per_leaf.setdefault(key.split(":")[0], []).append((tid, n))
        self.assertEqual(sorted(per_leaf), ["leaf0", "leaf1", "leaf2", "leaf3"])
        tids = set()
        for leaf, rows in per_leaf.items():
            self.assertEqual(len(rows), 1, f"{leaf} ran on one thread")
            self.assertEqual(rows[0][1], 1000, leaf)
            tids.add(rows[0][0])
        self.assertEqual(len(tids), 4, "four distinct threads")

    def check_preexisting_frames_in_order(self, python):
        trace = self.record_attached(python, "deep.py")
        pre = [r for r in trace.records
               if r.kind == "py_enter" and r.flags & ptg.ENTER_PREEXISTING]
        names = [r.name for r in pre if r.file.endswith(("deep.py", "gate.py"))]
        self.assertEqual(names, ["<module>", "main"] + ["deep"] * 20 + ["wait_for_go"])
        start = int(trace.meta["start.monotonic_ns"])
        self.assertTrue(all(r.ts == start for r in pre))
        self.assertTrue(all(c[7] == 0 for c in trace.calls() if c[1] == "deep"))

    def check_mixed_matches_oracle(self, python):
        oracle = ptg.oracle(python, "mixed.py")
        trace = self.record_attached(python, "mixed.py")
        counts = trace.count("mixed.py")
        # the workload's own run(); module-level code ran before the attach
        got = ptg.as_oracle(counts, oracle)
        self.assertEqual(got, oracle)

    def check_late_threads_and_uncaught(self, python):
        """Threads started after the attach, exceptions that end a thread and the
        program: counts equal sys.setprofile's, the raising frames exit unwound."""
        oracle = ptg.oracle(python, "late_threads.py")
        trace = self.record_attached(python, "late_threads.py")
        counts = trace.count("late_threads.py")
        got = ptg.as_oracle(counts, oracle)
        self.assertEqual(got, oracle)
        booms = [c for c in trace.calls() if c[1].startswith("boom_")]
        self.assertEqual(len(booms), 6)
        self.assertTrue(all(c[7] == ptg.EXIT_UNWIND for c in booms), booms)
        # four threads of their own besides the main one
        tids = {tid for (tid, key) in trace.count("late_threads.py", by_tid=True)}
        self.assertGreaterEqual(len(tids), 5)

    def check_threading_imported_late(self, python):
        """threading imported only after the attach, then threads started: each
        thread's calls, as sys.setprofile and threading.setprofile count them.
        On 3.11 the agent's profile function reaches them through threading's
        hook, put in as soon as the module's body has run."""
        oracle = ptg.oracle(python, "late_import.py")
        trace = self.record_attached(python, "late_import.py")
        self.assertEqual(ptg.as_oracle(trace.count("late_import.py"), oracle), oracle)
        tids = {tid for (tid, key) in trace.count("late_import.py", by_tid=True)
                if key == "worker:18"}
        self.assertEqual(len(tids), 3)

    @ptg.only_on(ptg.PER_VERSION, "one interpreter of each version and build")
    def check_paths_agree(self, python):
        """The same workloads by the default path (the agent in the target) and
        by --uprobes: each equal to sys.setprofile's counts, and the two
        traces alike in names, files, caller -> callee pairs, nesting and how
        each frame ended."""
        for script in ("mixed.py", "late_threads.py", "generator.py", "exceptions.py"):
            oracle = (ptg.oracle(python, script) if script in ("mixed.py", "late_threads.py")
                      else None)
            got = {}
            for how, line in (((), "python calls: in-process ("),
                              (("--uprobes",), "python calls: uprobes (--uprobes)")):
                trace = self.record_attached(python, script, rec_args=how)
                self.assertIn(line, self.rec_stderr)
                if oracle is not None:
                    self.assertEqual(ptg.as_oracle(trace.count(script), oracle), oracle,
                                     f"{script} {how}")
                got[how] = (trace.count(script), *shape(trace, script))
            self.assertEqual(got[()], got[("--uprobes",)], script)

    @ptg.only_on(ptg.PER_VERSION, "one interpreter of each version and build")
    def check_command_paths_agree(self, python):
        """record -- CMD: by default the uprobes until the script starts and the
        agent after; by --uprobes all along. The two traces have the same
        calls in the script, and on 3.12+ in all of the trace, the
        interpreter's start-up included; the same caller -> callee pairs and
        ends in the script; the status lines say which path. (Outside the
        script, 3.11-3.12's generators closed early differ: the agent sees
        the resumption that close() makes, as sys.setprofile does, the
        uprobes do not; and on 3.11 the calls of threading's bootstrap in a
        new thread before its run() are the uprobes' alone.)"""
        def record(script, how):
            out = os.path.join(self.tmp.name, f"c{len(how)}.ptg")
            res = ptg.run(["record", *how, "-o", out, "--",
                           *python.argv(python.path(os.path.join(ptg.WORKLOADS, script)))])
            # late_threads.py ends by an uncaught exception: the command's status
            self.assertEqual(res.returncode, int(script == "late_threads.py"), res.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.losses, [], f"{script} {how}")
            return res.stderr, trace

        for script in ("mixed.py", "late_threads.py", "generator.py", "exceptions.py",
                       "late_import.py"):
            said, default = record(script, ())
            self.assertIn("python calls in-process from its script's start", said)
            _, probes = record(script, ("--uprobes",))
            # the start-up (site, encodings) is in both, and all of it alike
            self.assertGreater(len(default.count()), len(default.count(script)), script)
            self.assertEqual(default.count(script), probes.count(script), script)
            if python.version >= (3, 12):
                self.assertEqual(default.count(), probes.count(), script)
            self.assertEqual(shape(default, script), shape(probes, script), script)

    def check_jit_warning(self, python):
        """PYTHON_JIT=1 (3.13+): record says what JIT-compiled code hides from it."""
        out = os.path.join(self.tmp.name, "jit.ptg")
        res = ptg.run(["record", "-o", out, "--", "env", "PYTHON_JIT=1",
                       *python.argv(python.path(os.path.join(ptg.WORKLOADS, "fib.py")))])
        self.assertEqual(res.returncode, 0, res.stderr)
        warned = "PYTHON_JIT=1" in res.stderr and "not recorded" in res.stderr
        self.assertEqual(warned, python.version >= (3, 13), res.stderr)

    def check_record_command(self, python):
        out = os.path.join(self.tmp.name, "cmd.ptg")
        res = ptg.run(["record", "-o", out, "--",
                       *python.argv(python.path(os.path.join(ptg.WORKLOADS, "fib.py")))])
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.count("fib.py")["f:7"], 5919)
        self.assertEqual(trace.count("fib.py")["main:11"], 1)
        self.assertEqual(trace.count("fib.py")["<module>:1"], 1)

    def check_command_thread_before_script(self, python):
        """-- CMD whose start-up left a thread running Python (a sitecustomize
        that starts one): its frames began on the uprobes, so the agent does
        not take over; the uprobes keep every call, and the line says why."""
        # where the interpreter sees it (a chroot's own /tmp)
        site = f"/tmp/ptg-site-{os.getpid()}"
        os.makedirs(python.on_host(site))
        self.addCleanup(shutil.rmtree, python.on_host(site))
        with open(os.path.join(python.on_host(site), "sitecustomize.py"), "w") as f:
            f.write("import threading, time\n"
                    "def tick():\n    time.sleep(0.001)\n"
                    "def spin():\n    while True:\n        tick()\n"
                    "threading.Thread(target=spin, daemon=True).start()\n")
        os.chmod(python.on_host(site), 0o755)
        out = os.path.join(self.tmp.name, "spin.ptg")
        env = dict(os.environ, PYTHONPATH=site)
        res = ptg.run(["record", "-o", out, "--",
                       *python.argv(python.path(os.path.join(ptg.WORKLOADS, "fib.py")))],
                      env=env)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("python calls stay on the uprobes: pid", res.stderr)
        self.assertIn("another thread runs Python", res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.count("fib.py")["f:7"], 5919)
        self.assertGreater(trace.count("sitecustomize.py")["tick:2"], 0)

    def check_record_command_as_set(self, python):
        """-- CMD with --hold or --per-process is recorded as a set, by the uprobes
        (no hand-over to the agent there), exact all the same."""
        for opt in ("--hold", "--per-process"):
            out = os.path.join(self.tmp.name, f"set{opt}.ptg")
            res = ptg.run(["record", opt, "-o", out, "--",
                           *python.argv(python.path(os.path.join(ptg.WORKLOADS, "fib.py")))])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertIn("python calls: uprobes (-- CMD with --hold or --per-process)",
                          res.stderr)
            if opt == "--per-process":
                out = [os.path.join(self.tmp.name, f) for f in os.listdir(self.tmp.name)
                       if f.startswith("set--per-process.pid")][0]
            self.assertEqual(ptg.Trace(out).count("fib.py")["f:7"], 5919, opt)

    def check_record_through_shell_script(self, python):
        """The command may exec Python later (a wrapper script, a pyenv shim)."""
        script = os.path.join(self.tmp.name, "run.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\necho starting >&2\nexec {python.shell()} \"$@\"\n")
        os.chmod(script, 0o755)
        out = os.path.join(self.tmp.name, "sh.ptg")
        res = ptg.run(["record", "-o", out, "--", script,
                       python.path(os.path.join(ptg.WORKLOADS, "fib.py"))])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(ptg.Trace(out).count("fib.py")["f:7"], 5919)

    def check_exec_code_objects_named(self, python):
        """dataclasses exec()s short-lived functions that share addresses: all named."""
        out = os.path.join(self.tmp.name, "dc.ptg")
        script = ("import dataclasses\n"
                  "for i in range(60):\n"
                  "    dataclasses.make_dataclass(f'C{i}', ['x', ('y', int, 0)])\n")
        res = ptg.run(["record", "-o", out, "--", *python.argv("-c", script)])
        self.assertEqual(res.returncode, 0, res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertFalse([r for r in trace.records if r.name.startswith("<unknown code")])
        # __init__, __repr__ and __eq__ of each class: one exec() each up to
        # 3.12, one for all three since 3.13 (dataclasses' _FuncBuilder)
        per_class = 3 if python.version < (3, 13) else 1
        self.assertEqual(trace.count()["__create_fn__:1"], 60 * per_class)

    def check_reused_code_addresses(self, python):
        """Code objects freed and others made at their addresses: each call and
        each resumption under its own name. The new function's name string
        often takes the freed name's address too, so the fingerprint alone
        cannot tell them apart: the probe on code_dealloc has the next object
        send its names again."""
        trace = self.record_attached(python, "codereuse.py", rec_args=("--uprobes",))
        # the probe that catches a freed code object is on every interpreter
        self.assertNotIn("code_dealloc not found", self.rec_stderr)
        reused = int(self.said.split("reused ")[1].split()[0])
        self.assertGreater(reused, 0, "no code object took a freed one's address")
        segs = collections.Counter(c[1] for c in trace.calls() if c[2] == "<string>")
        want = {"<module>": 200}  # each exec()
        for i in range(200):
            want[f"g{i}"] = 3  # three calls
            want[f"h{i}"] = 4  # its start and three resumptions
        self.assertEqual(dict(segs), want)
        starts = trace.count()
        self.assertEqual([i for i in range(200) if starts[f"h{i}:3"] != 1], [])


ptg.per_interpreter(RecordCounts)

if __name__ == "__main__":
    ptg.main()
