"""record -p (the in-process agent, by default) of a program that makes
functions without end: exec() in a loop, each function called once and
dropped (tests/workloads/execloop.py). The agent keeps the code objects it
has named alive only for a generation of MAX_KEPT (agent/ptg_pymon_shared.h)
and until the loader has read past them, so the target's heap grows by a
bounded amount however many functions it makes; and the counts stay
exact: each name (f0..f6 at first lines 1..5, taking the addresses of freed
code objects of other names) as sys.setprofile counts it.

PTG_EXECLOOP_N sets how many functions (the suite's default keeps the run
short; docs/design.md has the figures for 1,000,000)."""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import json
import os
import subprocess
import tempfile
import unittest

import ptg

N = int(os.environ.get("PTG_EXECLOOP_N", "200000"))
GEN = "<execloop>"
QUIET_PROBES = ["--no-cuda", "--no-ops", "--no-sched", "--no-cupti"]
# The most the agent can hold: the current generation and MAX_RETIRED = 3
# retired ones waiting for the loader, MAX_KEPT = 32,768 code objects each,
# of about 0.5 KiB for these small functions (and their <module>s): 64 MiB.
# Kept for the whole recording, as before the generations, 200,000 rounds
# held some 180 MiB and 1,000,000 about 900 MiB.
BOUND_KIB = 64 * 1024


class Memory(unittest.TestCase):
    def check_exec_loop(self, python):
        untraced = ptg.Workload(python, "execloop.py", str(N))
        try:
            untraced.go()
            out = untraced.finish()
        finally:
            untraced.close()
        self.assertIn("done", out)
        base_kib = int(out.split()[1])
        oracle = json.loads(subprocess.run(
            python.argv(python.path(os.path.join(ptg.WORKLOADS, "execloop.py")), str(N),
                        "--oracle"), check=True, capture_output=True, text=True).stdout)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "execloop.ptg")
            w, rec = ptg.Workload(python, "execloop.py", str(N)), None
            try:
                rec = ptg.Recorder(["-p", str(w.pid), *QUIET_PROBES], path)
                self.assertIn(", in-process: ", rec.stderr)
                w.go()
                out = w.finish()
                self.assertEqual(rec.wait(), 0, rec.stderr)
            finally:
                w.close(rec)
            self.assertIn("done", out)
            grew_kib = int(out.split()[1])
            trace = ptg.Trace(path)
        self.assertEqual(trace.losses, [], "events were lost")
        self.assertLess(grew_kib - base_kib, BOUND_KIB,
                        f"{N} functions: the heap grew {grew_kib} KiB recorded, "
                        f"{base_kib} KiB not")
        counts = trace.count(GEN)
        self.assertEqual(ptg.as_oracle(counts, oracle), oracle)
        self.assertEqual(sum(v for k, v in counts.items() if k.startswith("f")), N)


ptg.per_interpreter(Memory)

if __name__ == "__main__":
    ptg.main()
