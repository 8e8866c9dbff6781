"""Why record does not hold a thread that loads a library (docs/late-libs.md).

A thread in a ptrace-stop is let go when its tracer is killed: that part
would be kill-safe. But the one way a BPF program can stop the thread at
the loader's notice is a signal to it (bpf_send_signal_thread), and what
becomes of a signal when the tracer dies depends on when it dies.
tests/helpers/ptrace_stop_probe holds a target in each kind of stop, kills
its tracer with SIGKILL after a random delay, and reports whether the target
ran on and how many SIGURGs its handler got. Checked 13 times per kind (65):

- PTRACE_INTERRUPT's stop: resumed, no signal;
- a signal's stop not yet waited for: resumed, and the signal is delivered
  (a signal of ours would reach the target's handler);
- waited for with waitpid: resumed, and the signal is gone (a signal of the
  target's own, forwarded through the tracer, would be lost);
- seen with waitid(WNOWAIT): resumed, and the signal is delivered;
- not waited for, to a target that leaves SIGURG at SIG_DFL: resumed, and
  the delivered signal is ignored (the handler count stays 0, and the
  target runs on).
"""
import os
import random
import subprocess
import unittest

import ptg

PROBE = os.path.join(ptg.BUILD, "tests", "ptrace_stop_probe")
RUNS = 13
EXPECTED = {"interrupt": 0, "signal-unwaited": 1, "signal-waited": 0, "signal-nowait": 1,
            "default-unwaited": 0}


class PtraceStop(unittest.TestCase):
    def test_tracer_killed_at_the_stop(self):
        rng = random.Random(1)
        for mode, handled in EXPECTED.items():
            for _ in range(RUNS):
                delay = rng.randrange(0, 2000)
                res = subprocess.run([PROBE, mode, str(delay)], capture_output=True, text=True,
                                     timeout=60)
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertEqual(res.stdout,
                                 f"{mode} stopped=1 resumed=1 handled={handled}\n",
                                 f"delay {delay} us")


if __name__ == "__main__":
    ptg.main()
