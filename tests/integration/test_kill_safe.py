"""kill -9 of ptrace-gpu at any instant of what it does to another process
through ptrace leaves that process as it was: an injection (`inject`, what
`record -p` does with the CUPTI agent), killed at random points over and
over; the target must go on and compute exactly what it computes alone.
"""
import os
import random
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

TARGET = os.path.join(ptg.BUILD, "tests", "kill_safe_target")
MARKER_LIB = os.path.join(ptg.BUILD, "tests", "libinject_marker.so")
KILLS = 120


def tracer_pid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return None


def kill_delay(rng, early, late):
    """Mostly within the first `early` seconds, where the steps are; some up to `late`."""
    return rng.uniform(0, early) if rng.random() < 0.75 else rng.uniform(early, late)


@ptg.once
class TestInjectKilled(unittest.TestCase):
    @staticmethod
    def stop(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()

    def test_target_survives(self):
        """120 injections killed at random instants: same checksums, mask, altstack, no EINTR."""
        for path in (TARGET, MARKER_LIB):
            if not os.path.exists(path):
                self.fail(f"{path} is not built")
        target = subprocess.Popen([TARGET, "run"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, target)
        self.assertEqual(target.stdout.readline(), "ready\n")
        # what one whole injection takes here: kills fall within it
        start = time.monotonic()
        res = ptg.run(["inject", "-p", str(target.pid), MARKER_LIB, "--call",
                       "inject_marker_call", "--arg", "x"])
        full = time.monotonic() - start
        self.assertEqual(res.returncode, 0, res.stderr)
        rng = random.Random(os.environ.get("PTG_SEED", str(time.time())))
        finished = 0
        for _ in range(KILLS):
            inj = subprocess.Popen([ptg.PTG, "inject", "-p", str(target.pid), MARKER_LIB,
                                    "--call", "inject_marker_call", "--arg", "x"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(kill_delay(rng, full * 1.5, full * 4))
            inj.kill()
            _, err = inj.communicate()
            finished += inj.returncode == 0
            if inj.returncode not in (0, -signal.SIGKILL):
                self.fail(f"inject: {inj.returncode}: {err.decode()}")
            self.assertIsNone(target.poll(), "the target died")
            self.assertEqual(tracer_pid(target.pid), 0)
        target.stdin.write("stop\n")
        target.stdin.flush()
        lines = target.stdout.read().splitlines()
        self.assertEqual(target.wait(timeout=30), 0)
        self.assertEqual(lines[-1], "end mask=ok altstack=ok eintr=0")
        rounds = lines[:-1]
        ref = subprocess.run([TARGET, "ref", str(len(rounds))], capture_output=True, text=True)
        self.assertEqual(rounds, ref.stdout.splitlines())
        print(f"\n{KILLS} injections killed after 0..{full * 4 * 1000:.0f} ms "
              f"(one takes {full * 1000:.0f} ms), {finished} finished first; "
              f"{len(rounds)} rounds checked", file=sys.stderr)


if __name__ == "__main__":
    ptg.main()
