"""kill -9 of ptrace-gpu at any instant of what it does to another process
through ptrace leaves that process as it was: an injection (`inject`, what
`record -p` does with the CUPTI agent) and the start of `record -- CMD`.
Each is killed at random points over and over; the target must go on and
compute exactly what it computes alone.
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import ctypes
import os
import random
import resource
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

TARGET = os.path.join(ptg.BUILD, "tests", "kill_safe_target")
# its constructor sleeps 2 s
SLOW_LIB = ptg.trusted_lib(os.path.join(ptg.BUILD, "tests", "libinject_slow.so"))
# leaves the FP state and signal mask of the thread that runs it changed
CLOBBER_LIB = ptg.trusted_lib(os.path.join(ptg.BUILD, "tests", "libinject_clobber.so"))
KILLS = 150
# record -- CMD starts killed with a command running, per interpreter (five:
# 300 in all)
STARTS = 60
PR_SET_CHILD_SUBREAPER = 36

# A deterministic computation with floating point, long enough that the
# recorder, killed during its start, dies while the child still runs.
CHILD = """
import math, os
s = 0.0
for i in range(300000):
    s += math.sin(i) * 1e-3 + (i % 7) / 3.0
print(os.getpid(), repr(s), flush=True)
"""


def tracer_pid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return None


def kill_delay(rng, early, late, early_share=0.75):
    """Mostly within the first `early` seconds, where the steps are; some up to `late`."""
    return rng.uniform(0, early) if rng.random() < early_share else rng.uniform(early, late)


def wait_line(proc, text, timeout):
    """Reads proc's stderr until a line has text or timeout passes: True if it came."""
    end = time.time() + timeout
    os.set_blocking(proc.stderr.fileno(), False)
    buf = b""
    while time.time() < end and proc.poll() is None:
        chunk = proc.stderr.read()
        if chunk:
            buf += chunk
            if text in buf:
                return True
        time.sleep(0.002)
    return False


def children():
    mine = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rpartition(")")[2].split()[1]) == os.getpid():
                    mine.append(int(d))
        except (OSError, ValueError):
            pass
    return mine


def reap_all(timeout):
    """Waits for every child to end: (pid, wait status), or (pid, "stuck: ps line") for
    one still there after timeout (stopped?), which is then killed."""
    end, stuck = time.time() + timeout, {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            yield pid, stuck.get(pid, status)
        elif time.time() > end and not stuck:
            for pid in children():
                with open(f"/proc/{pid}/stat") as f:
                    stuck[pid] = "stuck: " + f.read().strip()
                os.kill(pid, signal.SIGKILL)
        else:
            time.sleep(0.005)


@ptg.once
class TestInjectKilled(unittest.TestCase):
    @staticmethod
    def stop(proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()

    def start_target(self):
        target = subprocess.Popen([TARGET, "run"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, target)
        self.assertEqual(target.stdout.readline(), "ready\n")
        return target

    def check_rounds(self, target):
        """Stops the target: every round it printed is right, its mask and altstack kept."""
        target.stdin.write("stop\n")
        target.stdin.flush()
        lines = target.stdout.read().splitlines()
        self.assertEqual(target.wait(timeout=30), 0)
        self.assertEqual(lines[-1], "end mask=ok altstack=ok eintr=0")
        rounds = lines[:-1]
        ref = subprocess.run([TARGET, "ref", str(len(rounds))], capture_output=True, text=True)
        self.assertEqual(rounds, ref.stdout.splitlines())
        return len(rounds)

    def test_call_past_timeout(self):
        """A call still running at the timeout is left to end: the thread then comes back."""
        target = self.start_target()
        slow = f"/tmp/ptg-inject-slow.{target.pid}"
        self.addCleanup(lambda: os.path.exists(slow) and os.unlink(slow))
        start = time.monotonic()
        res = ptg.run(["inject", "-p", str(target.pid), SLOW_LIB, "--timeout", "0.5"])
        self.assertLess(time.monotonic() - start, 1.5)
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"did not return within 500 ms; thread {target.pid} goes back to its own "
                      "code when it does", res.stderr)
        self.assertEqual(tracer_pid(target.pid), 0)
        # the constructor's 2 s, then rounds again
        time.sleep(2.5)
        self.assertGreater(self.check_rounds(target), 0)

    def test_stopped_during_call(self):
        """SIGSTOP while our call runs: the borrowed thread stops too, until SIGCONT."""
        target = self.start_target()
        slow = f"/tmp/ptg-inject-slow.{target.pid}"
        self.addCleanup(lambda: os.path.exists(slow) and os.unlink(slow))
        inj = subprocess.Popen([ptg.PTG, "inject", "-p", str(target.pid), SLOW_LIB],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        self.assertTrue(ptg.wait_until(lambda: os.path.exists(slow), 10))
        os.kill(target.pid, signal.SIGSTOP)
        # the constructor's 2 s sleep ends meanwhile: the thread must not go on
        time.sleep(2.5)
        self.assertIsNone(inj.poll(), "the call went on in a stopped process")
        os.kill(target.pid, signal.SIGCONT)
        out, err = inj.communicate(timeout=10)
        self.assertEqual(inj.returncode, 0, err)
        self.assertGreater(time.monotonic() - start, 2.5)
        self.assertEqual(tracer_pid(target.pid), 0)
        self.assertGreater(self.check_rounds(target), 0)

    def test_refused_mmap(self):
        """The target may not map our stub page: a clear error, the thread as it was."""
        target = self.start_target()
        with open(f"/proc/{target.pid}/status") as f:
            vm = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmSize:"))
        resource.prlimit(target.pid, resource.RLIMIT_AS, (vm, vm))
        res = ptg.run(["inject", "-p", str(target.pid), CLOBBER_LIB])
        self.assertEqual(res.returncode, 1)
        self.assertEqual(res.stderr, f"ptrace-gpu: inject: mmap in pid {target.pid} failed: "
                         "Cannot allocate memory\n")
        self.assertEqual(tracer_pid(target.pid), 0)
        time.sleep(0.2)
        self.assertGreater(self.check_rounds(target), 0)

    def test_target_survives(self):
        """150 injections of a library that clobbers FP state and signal mask, killed at
        random instants: same checksums, mask and altstack, no EINTR."""
        for path in (TARGET, CLOBBER_LIB):
            if not os.path.exists(path):
                self.fail(f"{path} is not built")
        target = self.start_target()
        # what one whole injection takes here (the first loads the library): kills fall within it
        times = []
        for _ in range(5):
            start = time.monotonic()
            res = ptg.run(["inject", "-p", str(target.pid), CLOBBER_LIB, "--call",
                           "inject_clobber_call", "--arg", "spin"])
            times.append(time.monotonic() - start)
            self.assertEqual(res.returncode, 0, res.stderr)
        full = sorted(times)[2]
        rng = random.Random(os.environ.get("PTG_SEED", str(time.time())))
        finished = 0
        for _ in range(KILLS):
            inj = subprocess.Popen([ptg.PTG, "inject", "-p", str(target.pid), CLOBBER_LIB,
                                    "--call", "inject_clobber_call", "--arg", "spin"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(kill_delay(rng, full, full * 3, early_share=0.9))
            inj.kill()
            _, err = inj.communicate()
            finished += inj.returncode == 0
            if inj.returncode not in (0, -signal.SIGKILL):
                self.fail(f"inject: {inj.returncode}: {err.decode()}")
            self.assertIsNone(target.poll(), "the target died")
            self.assertEqual(tracer_pid(target.pid), 0)
        rounds = self.check_rounds(target)
        print(f"\n{KILLS} injections killed after 0..{full * 3 * 1000:.0f} ms "
              f"(one takes {full * 1000:.0f} ms), {finished} finished first; "
              f"{rounds} rounds checked", file=sys.stderr)


@ptg.per_interpreter
class TestRecordStartKilled(unittest.TestCase):
    def check_child_survives(self, python):
        """record -- CMD killed at STARTS random instants of its start: the command ends well."""
        # the orphaned command comes back to us, with its exit status
        libc = ctypes.CDLL(None, use_errno=True)
        self.assertEqual(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0)
        self.addCleanup(libc.prctl, PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        out = f"/tmp/ptg-killsafe-{os.getpid()}.ptg"
        self.addCleanup(lambda: [os.unlink(p) for p in (out, out + ".recording")
                                 if os.path.exists(p)])
        ref = subprocess.run(python.argv("-c", CHILD), capture_output=True, text=True)
        self.assertEqual(ref.returncode, 0, ref.stderr)
        want = ref.stdout.split()[1]
        rng = random.Random(os.environ.get("PTG_SEED", str(time.time())))
        statuses, outputs, runs = {}, [], 0
        rfd, wfd = os.pipe()
        reader = os.fdopen(rfd)
        # killed before it forks, a run leaves no command to check: STARTS that did
        while len(statuses) < STARTS and runs < 2 * STARTS:
            runs += 1
            rec = subprocess.Popen([ptg.PTG, "record", "-o", out, "--no-cupti", "--",
                                    *python.argv("-c", CHILD)],
                                   stdout=wfd, stderr=subprocess.PIPE)
            # kill at a random instant, or as soon as it records if that comes
            # first: once its calls were handed to the agent where its script
            # started, so that kills land inside that hand-over too
            wait_line(rec, b"from its script's start", kill_delay(rng, 0.15, 1.5))
            rec.kill()
            rec.wait()
            rec.stderr.close()
            # the command goes on alone, reparented to us
            for pid, status in reap_all(timeout=20):
                statuses[pid] = status
                if isinstance(status, int) and os.WIFEXITED(status):
                    outputs.append(reader.readline().split())
        os.close(wfd)
        reader.close()
        self.assertGreaterEqual(len(statuses), STARTS)
        for pid, status in statuses.items():
            self.assertTrue(isinstance(status, int) and os.WIFEXITED(status)
                            and os.WEXITSTATUS(status) == 0, f"child {pid}: {status}")
        self.assertEqual(sorted(int(o[0]) for o in outputs), sorted(statuses))
        self.assertEqual({o[1] for o in outputs}, {want})
        print(f"\n{runs} starts killed, {len(statuses)} with a command running",
              file=sys.stderr)

if __name__ == "__main__":
    ptg.main()
