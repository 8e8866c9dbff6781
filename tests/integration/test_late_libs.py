"""A CUDA library mapped after recording started is traced from its first call.

The workload loads the fake driver (tests/fakecuda) by name only once
released, through the LD_LIBRARY_PATH it was started with, and calls it at
once, in a burst: no pause for the tracer to notice the new mapping. record
finds the file on the target's search path when it attaches and probes it
before it is mapped, so the trace must hold every call: exactly LAUNCHES
cuLaunchKernel and SYNCS cuStreamSynchronize. Checked with `-p` and with
`-- CMD`.
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import collections
import os
import subprocess
import sys
import tempfile
import unittest

import ptg
from test_cuda_host import LIBDIR, Trace

sys.path.insert(0, ptg.WORKLOADS)
import cuda_late as plan  # noqa: E402

SCRIPT = os.path.join(ptg.WORKLOADS, "cuda_late.py")
LIB = "libcuda.so.1"


class LateLibs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "late.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def argv(self, python):
        """The workload, with the fake driver's folder on its search path."""
        return ["env", f"LD_LIBRARY_PATH={python.path(LIBDIR)}",
                *python.argv(python.path(SCRIPT), "--wait", LIB)]

    def probed_ahead(self, rec):
        """record says it probed the driver once attached, before go."""
        self.assertIn("cuda: probing", rec.stderr)
        self.assertIn(LIB, rec.stderr)

    def read_ready(self, proc):
        line = proc.stdout.readline()
        self.assertTrue(line.startswith("ready"), line)
        return int(line.split()[1])

    def verify(self, pid, rec):
        trace = Trace(self.out)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, [], "nothing lost")
        self.assertIn(LIB, trace.meta["cuda.libraries"])
        got = collections.Counter(r.name for r in trace.records if r.kind == "cuda_call")
        self.assertEqual(got, {"cuLaunchKernel": plan.LAUNCHES,
                               "cuStreamSynchronize": plan.SYNCS})
        self.assertTrue(all(r.pid == pid for r in trace.records if r.kind == "cuda_call"))

    def check_attached(self, python):
        proc = subprocess.Popen(self.argv(python), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            pid = self.read_ready(proc)
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            with open(f"/proc/{pid}/maps") as f:
                self.assertNotIn(LIB, f.read(), "not mapped before go")
            self.probed_ahead(rec)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            self.assertIn("done", proc.stdout.read())
            self.assertEqual(proc.wait(timeout=300), 0)
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdin.close()
            proc.stdout.close()
        self.verify(pid, rec)

    def check_command(self, python):
        rec = ptg.Recorder(["--", *self.argv(python)], self.out, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
        try:
            self.read_ready(rec.proc)
            self.probed_ahead(rec)
            rec.proc.stdin.write("go\n")
            rec.proc.stdin.flush()
            self.assertIn("done", rec.proc.stdout.read())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            if rec.proc.poll() is None:
                rec.proc.kill()
                rec.proc.wait()
            for f in (rec.proc.stdin, rec.proc.stdout, rec.proc.stderr):
                f.close()
        self.verify(int(Trace(self.out).meta["pid"]), rec)


ptg.per_interpreter(LateLibs)

if __name__ == "__main__":
    ptg.main()
