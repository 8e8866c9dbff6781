"""record --uprobes at its default settings on a target making calls as fast as it can:
the recorder's peak memory stays small (the ring buffer is mapped twice, and
a 64 MiB one held 148 MiB), and every call is in the trace, none lost."""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import os
import tempfile
import unittest

import ptg

# the default 8 MiB ring mapped twice and the rest measured 26 MiB; the
# issue's bound is 32 MiB, with room for another machine's libraries
PEAK_RSS_MIB = 40


class Memory(unittest.TestCase):
    def check_default_ring(self, python):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "busy.ptg")
            w = ptg.Workload(python, "busy.py", "1")
            self.addCleanup(w.kill)
            rec = ptg.Recorder(["--uprobes", "-p", str(w.pid)], out)
            w.go()
            leaf_calls = int(w.finish().split()[0])
            rec.lines.append(rec.proc.stderr.read())
            # wait4 rather than Popen.wait: the recorder's own peak RSS
            _, status, ru = os.wait4(rec.proc.pid, 0)
            rec.proc.returncode = os.waitstatus_to_exitcode(status)
            self.assertEqual(rec.proc.returncode, 0, rec.stderr)
            peak_mib = ru.ru_maxrss / 1024
            self.assertLess(peak_mib, PEAK_RSS_MIB, f"recorder peak RSS {peak_mib:.1f} MiB")
            trace = ptg.Trace(out)
            self.assertEqual(trace.losses, [], "events were lost")
            leaves = [c for c in trace.calls() if c[1] == "leaf"]
            # enough to have gone round the 8 MiB ring many times over
            self.assertGreater(leaf_calls, 100000)
            self.assertEqual(len(leaves), leaf_calls)


ptg.per_interpreter(Memory)

if __name__ == "__main__":
    ptg.main()
