"""Pids that do not fit a pid_t are refused instead of being cut down to
another process's.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402


class PidReuse(unittest.TestCase):
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
