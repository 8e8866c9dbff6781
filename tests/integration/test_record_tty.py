# SPDX-License-Identifier: MIT
"""record's live status line on a real terminal (a pty from Python's pty
module): it never lands inside the target's lines.

- `record -- CMD` in a pty: the command writes to the same terminal, so its
  lines all come out whole and there is no status line;
- `record -p PID` with the target on the same pty: the same;
- `record -p PID` with the target writing elsewhere: the status line is
  drawn, and the summary after it starts a line of its own.
"""
import os
import pty
import re
import select
import subprocess
import tempfile
import time
import unittest

import ptg

PY = "/usr/bin/python3.11"
# prints N numbered lines, slowly, in pieces, so that a status line drawn
# in between would cut one
TALKER = """import sys, time
for i in range(int(sys.argv[1])):
    sys.stdout.write(f"target line {i:03d} begins ")
    sys.stdout.flush()
    time.sleep(0.02)
    sys.stdout.write("and ends here\\n")
    sys.stdout.flush()
    time.sleep(0.03)
"""
STATUS = re.compile(r"recording pid \d+: [0-9.]+ s, \d+ events")


def read_all(fd, procs, timeout=60):
    """Everything written to the pty's master until every proc exited."""
    out, end = b"", time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        elif all(p.poll() is not None for p in procs):
            break
    return out.decode(errors="replace")


class RecordTty(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "t.ptg")
        self.master, self.slave = pty.openpty()

    def tearDown(self):
        os.close(self.master)
        if self.slave is not None:
            os.close(self.slave)
        self.tmp.cleanup()

    def assert_lines_whole(self, text, n):
        lines = [line.rstrip("\r") for line in text.split("\n")]
        for i in range(n):
            want = f"target line {i:03d} begins and ends here"
            self.assertIn(want, lines, f"line {i} cut:\n{text}")
        self.assertIsNone(STATUS.search(text), text)

    def test_command_on_the_same_tty(self):
        n = 60
        rec = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "--", PY, "-c", TALKER,
                                str(n)], stdin=self.slave, stdout=self.slave,
                               stderr=self.slave, start_new_session=True)
        text = read_all(self.master, [rec])
        self.assertEqual(rec.wait(timeout=60), 0, text)
        self.assert_lines_whole(text, n)
        self.assertRegex(text, r"(^|\n)ptrace-gpu: target exited after")

    def test_pid_on_the_same_tty(self):
        n = 80
        # the target starts talking once record has said it is attached: a
        # whole line of record's between two halves of the target's is not
        # what this test is about
        go = os.path.join(self.tmp.name, "go")
        wait = f"import os, time\nwhile not os.path.exists({go!r}): time.sleep(0.02)\n"
        target = subprocess.Popen([PY, "-c", wait + TALKER, str(n)],
                                  stdout=self.slave, stderr=self.slave)
        rec = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "-p", str(target.pid)],
                               stdout=self.slave, stderr=self.slave)
        text = ""
        while "recording pid" not in text and rec.poll() is None:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                text += os.read(self.master, 65536).decode(errors="replace")
        open(go, "w").close()
        text += read_all(self.master, [rec, target])
        self.assertEqual(target.wait(timeout=60), 0)
        self.assertEqual(rec.wait(timeout=60), 0, text)
        self.assert_lines_whole(text, n)

    def test_status_line_when_the_target_writes_elsewhere(self):
        target = subprocess.Popen([PY, "-c", TALKER, "60"], stdout=subprocess.DEVNULL)
        rec = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "-p", str(target.pid)],
                               stdout=self.slave, stderr=self.slave)
        text = read_all(self.master, [rec, target])
        self.assertEqual(rec.wait(timeout=60), 0, text)
        target.wait()
        self.assertRegex(text, STATUS)
        # the summary starts its own line after the last redraw
        self.assertRegex(text, r"\x1b\[K\r?\nptrace-gpu: target exited after")


if __name__ == "__main__":
    ptg.main()
