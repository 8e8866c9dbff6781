"""A pid names a process only until it exits: `record -p` follows the process
it attached to, not whatever gets its pid next, and pids that do not fit a
pid_t are refused instead of being cut down to another process's.
"""
import os
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

SLEEPER = "import time; print('ready', flush=True); time.sleep(60)"


def spawn_with_pid(pid, argv):
    """Starts argv as process `pid` (free, just reaped) through ns_last_pid, or returns None."""
    for _ in range(20):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


class PidReuse(unittest.TestCase):
    def setUp(self):
        self.python = ptg.Python(ptg.ONCE)
        if self.python.missing:
            self.skipTest(self.python.missing)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.procs = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()

    def test_record_stops_when_its_process_exits(self):
        """The target exits and another process gets its pid: record still stops."""
        target = subprocess.Popen(self.python.argv("-c", SLEEPER), stdout=subprocess.PIPE,
                                  text=True)
        self.procs.append(target)
        self.assertEqual(target.stdout.readline(), "ready\n")
        out = os.path.join(self.tmp.name, "t.ptg")
        rec = ptg.Recorder(["-p", str(target.pid), "--no-cupti"], out)
        self.procs.append(rec.proc)
        # frozen, the recorder cannot see the exit before the pid is taken again
        rec.proc.send_signal(signal.SIGSTOP)
        target.kill()
        target.wait()
        other = spawn_with_pid(target.pid, ["sleep", "30"])
        rec.proc.send_signal(signal.SIGCONT)
        if other is None:
            self.skipTest(f"pid {target.pid} was taken by another process first")
        self.procs.append(other)
        try:
            rec.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.fail(f"record went on after pid {target.pid} exited and was taken again")
        self.assertEqual(rec.wait(), 0, rec.stderr)
        self.assertIn("target exited", rec.stderr)
        self.assertIsNone(other.poll(), "the process that got the pid was harmed")

    def test_pid_beyond_pid_t(self):
        """2^32 + 1 is refused, not taken for pid 1."""
        for cmd in (["record", "-p"], ["inject", "-p"], ["sample", "-p"]):
            for pid in ("4294967297", "2147483648", "-1", "0", "12x"):
                args = cmd + [pid] + (["/nonexistent.so"] if cmd[0] == "inject" else [])
                res = ptg.run(args)
                self.assertEqual(res.returncode, 2, f"{args}: {res.stderr}")
                self.assertEqual(res.stderr.strip(), f"ptrace-gpu: {cmd[0]}: bad PID '{pid}'")


if __name__ == "__main__":
    ptg.main()
