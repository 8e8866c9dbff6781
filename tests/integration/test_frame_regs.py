"""record with every register-read frame checked (PTG_PYFRAME_VERIFY=1), on
every interpreter (ptg.INTERPRETERS): the frame the probe takes from the
opcode handler's register (user/proc/probesite.c) equals the thread state's
current frame on every hit, and the counts stay exact against the in-process
oracle. Workloads: fib (calls), mixed (methods, closures, comprehensions,
generators, exceptions, C calls back into Python), generator, threads, and
code objects at reused addresses."""
import collections
import os
import re
import tempfile
import unittest

import ptg

VERIFIED = re.compile(r"frame registers: (\d+) hits checked, 0 mismatched")


class FrameRegs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def record_verified(self, python, script):
        """Records script attached with every register-read frame checked.
        Returns the trace and how many hits were checked."""
        out = os.path.join(self.tmp.name, f"{script}.ptg")
        w = ptg.Workload(python, script)
        try:
            rec = ptg.Recorder(["--uprobes", "-p", str(w.pid)], out,
                               env=dict(os.environ, PTG_PYFRAME_VERIFY="1"))
            w.go()
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        self.assertNotIn("disagreed", rec.stderr)
        m = VERIFIED.search(rec.stderr)
        self.assertIsNotNone(m, rec.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [], "events were lost")
        return trace, int(m.group(1))

    def check_fib(self, python):
        trace, checked = self.record_verified(python, "fib.py")
        self.assertEqual(trace.count("fib.py")["f:7"], 5919)
        # every call's RESUME site has a register on every build (test_frame_regs.c)
        self.assertGreaterEqual(checked, 5919)

    def check_mixed(self, python):
        oracle = ptg.oracle(python, "mixed.py")
        trace, checked = self.record_verified(python, "mixed.py")
        counts = trace.count("mixed.py")
        got = ptg.as_oracle(counts, oracle)
        self.assertEqual(got, oracle)
        self.assertGreaterEqual(checked, sum(oracle.values()))

    def check_generator(self, python):
        trace, _ = self.record_verified(python, "generator.py")
        segs = [c for c in trace.calls() if c[1] == "produce"]
        self.assertEqual(len(segs), 101)
        self.assertEqual(sum(1 for c in segs if c[7] == ptg.EXIT_YIELD), 100)

    def check_threads(self, python):
        trace, _ = self.record_verified(python, "threads.py")
        counts = trace.count("threads.py")
        for leaf in ("leaf0", "leaf1", "leaf2", "leaf3"):
            self.assertEqual(sum(n for k, n in counts.items() if k.startswith(leaf + ":")),
                             1000, leaf)

    def check_code_reuse(self, python):
        """Code objects freed and others made at their addresses: each call
        and each resumption under its own name."""
        trace, _ = self.record_verified(python, "codereuse.py")
        segs = collections.Counter(c[1] for c in trace.calls() if c[2] == "<string>")
        want = {f"{f}{i}": n for i in range(200) for f, n in (("g", 3), ("h", 4))}
        self.assertEqual(segs, collections.Counter(want, **{"<module>": 200}))


ptg.per_interpreter(FrameRegs)

if __name__ == "__main__":
    ptg.main()
