"""record says what a uprobe hit costs here: measured at start where Python
calls are taken by uprobes (said under -v), a warning where a recorded call's
two hits come to more than 2 us, naming what avoids it; nothing measured where
they are taken in-process (record -p's default, or --in-process)."""
import os
import re
import subprocess
import tempfile
import unittest

import ptg

HIT = re.compile(r"uprobe hit: (\d+) ns here")
WARN = "a uprobe hit costs"


@ptg.once
class TrapCost(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.python = ptg.Python(ptg.ONCE)
        self.fib = os.path.join(ptg.WORKLOADS, "fib.py")

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, *args):
        r = subprocess.run([ptg.PTG, "-v", "record", "-o", os.path.join(self.tmp.name, "t.ptg"),
                            *args], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stderr

    def check_said(self, err, option):
        m = HIT.search(err)
        self.assertIsNotNone(m, err)
        warned = [line for line in err.splitlines() if WARN in line]
        if 2 * int(m.group(1)) > 2000:
            self.assertEqual(len(warned), 1, err)
            self.assertIn(option, warned[0])
        else:
            self.assertEqual(warned, [], err)

    def test_children(self):
        """--children -- CMD, all on the uprobes: measured, and -p PID named for
        a running process."""
        err = self.record("--children", "--", *self.python.argv(self.fib))
        self.check_said(err, "recorded with -p PID")
        self.assertIn("python calls: uprobes (--children)", err)

    def test_command(self):
        """-- CMD: its start-up on the uprobes, its script in-process: nothing
        measured, nothing warned."""
        err = self.record("--", *self.python.argv(self.fib))
        self.assertIsNone(HIT.search(err), err)
        self.assertNotIn(WARN, err)
        self.assertIn("python calls in-process from its script's start", err)

    def attached(self, *args):
        """record -v ARGS -p PID of a busy process, from its start to its end: stderr."""
        w = ptg.Workload(self.python, "busy.py", "1")
        try:
            rec = subprocess.Popen([ptg.PTG, "-v", "record", "-o",
                                    os.path.join(self.tmp.name, "p.ptg"), *args, "-p", str(w.pid)],
                                   stderr=subprocess.PIPE, text=True)
            lines = []
            while not any("recording pid" in line for line in lines):
                line = rec.stderr.readline()
                self.assertTrue(line, "".join(lines))
                lines.append(line)
            w.go()
            w.finish()
            lines.append(rec.stderr.read())
            self.assertEqual(rec.wait(timeout=300), 0, "".join(lines))
            rec.stderr.close()
            return "".join(lines)
        finally:
            w.close()

    def test_uprobes(self):
        """--uprobes -p PID: measured, and the default named."""
        err = self.attached("--uprobes")
        self.check_said(err, "without --uprobes the same calls are taken in-process")
        self.assertIn("python calls: uprobes (--uprobes)", err)

    def test_default(self):
        """-p PID: in-process by default, no uprobe on Python calls, nothing measured."""
        err = self.attached()
        self.assertIsNone(HIT.search(err), err)
        self.assertNotIn(WARN, err)
        self.assertIn("python calls: in-process (", err)

    def test_in_process(self):
        """--in-process -p PID: no uprobe on Python calls, nothing measured."""
        err = self.attached("--in-process")
        self.assertIsNone(HIT.search(err), err)
        self.assertNotIn(WARN, err)

if __name__ == "__main__":
    ptg.main()
