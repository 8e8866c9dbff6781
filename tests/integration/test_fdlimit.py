# SPDX-License-Identifier: MIT
"""record raises its own open-file limit (a uprobe outside a uprobe_multi
link holds an fd: kernels before 6.6 hold one per op of libtorch, ~6,000),
and the command it starts gets the limits the user gave ptrace-gpu, not
the raised ones: soft and hard as they were."""
import resource
import subprocess
import tempfile
import unittest

import ptg

PY = "/usr/bin/python3.11"
SHOW = "import resource; print(*resource.getrlimit(resource.RLIMIT_NOFILE))"


def limited(soft, hard):
    def pre():
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pre


class FdLimit(unittest.TestCase):
    def test_command_keeps_the_users_limits(self):
        for soft, hard in ((1000, 1000), (256, 4096)):
            with tempfile.TemporaryDirectory() as d:
                res = subprocess.run([ptg.PTG, "record", "-o", f"{d}/t.ptg", "--", PY, "-c", SHOW],
                                     capture_output=True, text=True, timeout=120,
                                     preexec_fn=limited(soft, hard))
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertEqual(res.stdout.split(), [str(soft), str(hard)], res.stderr)

    def test_recorder_raises_its_own(self):
        # ptrace-gpu's own limit while it records: read from /proc of the recorder
        with tempfile.TemporaryDirectory() as d:
            rec = subprocess.Popen([ptg.PTG, "record", "-o", f"{d}/t.ptg", "--", PY, "-c",
                                    "import time; time.sleep(3)"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=limited(256, 4096))
            try:
                # soft up to hard at least; hard up to fs.nr_open where
                # CAP_SYS_RESOURCE allows (not in every sandbox)
                soft = None
                for _ in range(100):
                    with open(f"/proc/{rec.pid}/limits") as f:
                        line = next(l for l in f if l.startswith("Max open files"))
                    soft = int(line.split()[3])
                    if soft >= 4096:
                        break
                    ptg.time.sleep(0.05)
                self.assertGreaterEqual(soft, 4096, "the recorder kept the caller's soft limit")
            finally:
                _, err = rec.communicate(timeout=120)
            self.assertEqual(rec.returncode, 0, err)


if __name__ == "__main__":
    ptg.main()
