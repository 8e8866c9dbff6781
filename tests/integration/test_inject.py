"""`ptrace-gpu inject`: a library loaded into running Python processes through
ptrace (what `record -p` does with the CUPTI agent) runs there, and the
process goes on exactly as before: same output, same exit status, system
calls it was blocked in still complete. Failures leave it unharmed too.
"""
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(ptg.SRC, "build"))
MARKER_LIB = os.path.join(BUILD, "tests", "libinject_marker.so")
SLOW_LIB = os.path.join(BUILD, "tests", "libinject_slow.so")

# Prints 0..N-1, one line every 10 ms, and exits 0.
COUNTER = """
import sys, time
print("ready", flush=True)
for i in range(int(sys.argv[1])):
    print(i, flush=True)
    time.sleep(0.01)
"""

# Four threads spin on arithmetic while the main thread counts.
THREADS = """
import sys, threading, time
results = [0] * 4
def work(k):
    s = 0
    for i in range(300000):
        s += i * k
    results[k] = s
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
print("ready", flush=True)
for i in range(100):
    print(i, flush=True)
    time.sleep(0.01)
for t in ts:
    t.join()
print(results == [sum(i * k for i in range(300000)) for k in range(4)], flush=True)
"""

BLOCKED_READ = """
import sys
print("ready", flush=True)
line = sys.stdin.readline()
print("got " + line.strip(), flush=True)
"""

BLOCKED_SLEEP = """
import time
print("ready", flush=True)
t = time.monotonic()
time.sleep(1.5)
print("slept %.1f" % (time.monotonic() - t), flush=True)
"""

# The main thread sleeps without the GIL (so the other thread never waits
# for a borrowed main thread); another thread ends the process.
EXITS = """
import os, threading, time
def bye():
    time.sleep(0.7)
    os._exit(3)
threading.Thread(target=bye).start()
print("ready", flush=True)
time.sleep(100)
"""


def files(pid):
    return {k: f"/tmp/ptg-inject-{k}.{pid}" for k in ("marker", "call", "slow")}


class Target:
    def __init__(self, python, script, *args, stdin=subprocess.DEVNULL):
        self.proc = subprocess.Popen([python, "-c", script, *map(str, args)], stdin=stdin,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline()
        if line != "ready\n":
            self.proc.kill()
            raise RuntimeError(f"target did not start: {line!r}")
        self.files = files(self.pid)

    def lines(self, timeout=60):
        # not communicate(): it would skip what readline() has buffered already
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        return out.splitlines()

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in self.files.values():
            if os.path.exists(f):
                os.unlink(f)


def inject(pid, lib, *args, timeout=60):
    return ptg.run(["inject", "-p", str(pid), lib, *args], timeout=timeout)


def syscall_nr(pid):
    with open(f"/proc/{pid}/syscall") as f:
        word = f.read().split()[0]
    return int(word) if word.lstrip("-").isdigit() else None


@ptg.per_interpreter
class TestInject(unittest.TestCase):
    def setUp(self):
        for lib in (MARKER_LIB, SLOW_LIB):
            if not os.path.exists(lib):
                self.fail(f"{lib} is not built")
        self.targets = []

    def tearDown(self):
        for t in self.targets:
            t.cleanup()

    def target(self, *args, **kw):
        t = Target(*args, **kw)
        self.targets.append(t)
        return t

    def assert_marker(self, t):
        with open(t.files["marker"]) as f:
            self.assertEqual(f.read(), f"{t.pid}\n")

    def check_counter(self, python):
        t = self.target(python, COUNTER, 200)
        first = [t.proc.stdout.readline() for _ in range(5)]
        res = inject(t.pid, MARKER_LIB, "--call", "inject_marker_call", "--arg", "hello")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("inject_marker_call returned 42", res.stdout)
        lines = [x.strip() for x in first] + t.lines()
        self.assertEqual(lines, [str(i) for i in range(200)])
        self.assertEqual(t.proc.returncode, 0)
        self.assert_marker(t)
        with open(t.files["call"]) as f:
            self.assertEqual(f.read(), "hello")

    def check_twice(self, python):
        """A second load finds the library loaded: no second constructor run, process fine."""
        t = self.target(python, COUNTER, 100)
        t.proc.stdout.readline()
        self.assertEqual(inject(t.pid, MARKER_LIB).returncode, 0)
        self.assert_marker(t)
        os.unlink(t.files["marker"])
        res = inject(t.pid, MARKER_LIB, "--call", "inject_marker_call", "--arg", "again")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertFalse(os.path.exists(t.files["marker"]))
        self.assertEqual(t.lines()[-1], "99")
        self.assertEqual(t.proc.returncode, 0)
        with open(t.files["call"]) as f:
            self.assertEqual(f.read(), "again")

    def check_threads(self, python):
        t = self.target(python, THREADS)
        t.proc.stdout.readline()
        res = inject(t.pid, MARKER_LIB)
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = t.lines()
        self.assertEqual(lines[-1], "True")
        self.assertEqual(len(lines), 100)
        self.assertEqual(t.proc.returncode, 0)
        self.assert_marker(t)

    def check_blocked_read(self, python):
        """Injected while blocked in read() on a pipe: the read restarts and gets its line."""
        t = self.target(python, BLOCKED_READ, stdin=subprocess.PIPE)
        self.assertTrue(ptg.wait_until(lambda: syscall_nr(t.pid) == 0, 10),
                        "target never blocked in read()")
        res = inject(t.pid, MARKER_LIB)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertTrue(ptg.wait_until(lambda: syscall_nr(t.pid) == 0, 10), "not back in read()")
        t.proc.stdin.write("ping\n")
        t.proc.stdin.flush()
        self.assertEqual(t.lines(), ["got ping"])
        self.assertEqual(t.proc.returncode, 0)
        self.assert_marker(t)

    def check_blocked_sleep(self, python):
        """Injected in the middle of a 1.5 s sleep: the sleep still lasts 1.5 s."""
        t = self.target(python, BLOCKED_SLEEP)
        self.assertTrue(ptg.wait_until(lambda: syscall_nr(t.pid) == 230, 10),
                        "target never blocked in clock_nanosleep()")
        time.sleep(0.3)
        res = inject(t.pid, MARKER_LIB)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(t.lines(), ["slept 1.5"])
        self.assertEqual(t.proc.returncode, 0)
        self.assert_marker(t)

    def check_bad_library(self, python):
        t = self.target(python, COUNTER, 100)
        t.proc.stdout.readline()
        res = inject(t.pid, "/nonexistent/libnothere.so")
        self.assertEqual(res.returncode, 1)
        self.assertIn("No such file", res.stderr)
        junk = f"/tmp/ptg-inject-junk.{os.getpid()}.so"
        with open(junk, "w") as f:
            f.write("not an ELF file\n")
        try:
            res = inject(t.pid, junk)
        finally:
            os.unlink(junk)
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"dlopen in pid {t.pid} failed: {junk}", res.stderr)
        res = inject(t.pid, MARKER_LIB, "--call", "no_such_function")
        self.assertEqual(res.returncode, 1)
        self.assertIn("has no function no_such_function", res.stderr)
        self.assertEqual(t.lines()[-1], "99")
        self.assertEqual(t.proc.returncode, 0)

    def check_killed_during_injection(self, python):
        """SIGKILL while dlopen() runs in the target: a clean error, no hang."""
        t = self.target(python, COUNTER, 1000)
        t.proc.stdout.readline()

        def killer():
            ptg.wait_until(lambda: os.path.exists(t.files["slow"]), 20)
            os.kill(t.pid, signal.SIGKILL)

        th = threading.Thread(target=killer)
        th.start()
        start = time.time()
        res = inject(t.pid, SLOW_LIB)
        th.join()
        self.assertLess(time.time() - start, 10)
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"pid {t.pid} exited during injection", res.stderr)
        t.proc.wait(timeout=10)
        self.assertEqual(t.proc.returncode, -signal.SIGKILL)

    def check_exits_during_injection(self, python):
        """Another thread calls os._exit() while the main thread runs our dlopen()."""
        t = self.target(python, EXITS)
        self.assertTrue(ptg.wait_until(lambda: syscall_nr(t.pid) == 230, 10),
                        "target never blocked in clock_nanosleep()")
        res = inject(t.pid, SLOW_LIB)
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"pid {t.pid} exited during injection", res.stderr)
        t.proc.wait(timeout=10)
        self.assertEqual(t.proc.returncode, 3)


class TestInjectErrors(unittest.TestCase):
    def test_no_process(self):
        pid = 4194303  # above any pid_max default in use here
        while os.path.exists(f"/proc/{pid}"):
            pid -= 1
        res = inject(pid, MARKER_LIB)
        self.assertEqual(res.returncode, 1)
        self.assertIn(f"no process {pid}", res.stderr)

    def test_help(self):
        res = ptg.run(["--help"])
        self.assertIn("inject", res.stdout)
        res = ptg.run(["inject", "--help"])
        self.assertEqual(res.returncode, 0)
        self.assertIn("Diagnostic", res.stdout)


if __name__ == "__main__":
    ptg.main()
