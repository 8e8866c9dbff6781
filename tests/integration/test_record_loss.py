"""A stalled loader: the ring buffer fills, events are dropped, counted, reported,
and every thread's stack stays consistent through the loss."""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import os
import re
import signal
import tempfile
import time
import unittest

import ptg


class Loss(unittest.TestCase):
    def check_stalled_loader(self, python):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "loss.ptg")
            w = ptg.Workload(python, "busy.py", "3")
            self.addCleanup(w.kill)
            # a 1 MiB ring buffer holds about 20,000 events
            rec = ptg.Recorder(["--uprobes", "-p", str(w.pid), "--ringbuf-mb", "1"], out)
            w.go()
            rec.proc.send_signal(signal.SIGSTOP)
            # the target makes calls as fast as it can while nobody reads
            time.sleep(1.5)
            rec.proc.send_signal(signal.SIGCONT)
            w.finish()
            self.assertEqual(rec.wait(), 0, rec.stderr)
            trace = ptg.Trace(out)
            dropped = sum(int(l.rsplit(": ", 1)[1]) for l in trace.losses
                          if l.startswith(("py_event", "py_stack")))
            self.assertGreater(dropped, 0, "the stall should have filled the ring buffer")
            lost = sum(int(l.rsplit(": ", 1)[1]) for l in trace.losses)
            self.assertIn("events were dropped", rec.stderr)
            trace.calls()  # nesting intact: every exit has its enter, all closed
            report = ptg.run(["report", out])
            self.assertEqual(report.returncode, 0, report.stderr)
            m = re.search(r"lost events: (\d+)", report.stdout)
            self.assertIsNotNone(m, report.stdout[:500])
            self.assertEqual(int(m.group(1)), lost)


ptg.per_interpreter(Loss)

if __name__ == "__main__":
    ptg.main()
