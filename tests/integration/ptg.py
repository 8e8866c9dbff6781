"""Shared helpers of the integration tests: run workloads, record them, read traces.

Traces are read through `ptrace-gpu dump`, the same reader every report uses.
"""
import collections
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("PTG_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
PTG = os.environ.get("PTRACE_GPU", os.path.join(SRC, "build", "ptrace-gpu"))
WORKLOADS = os.path.join(SRC, "tests", "workloads")

# The two interpreters of this kind of machine: Debian's static, non-PIE,
# stripped executable, and pyenv's PIE libpython with a full symbol table.
INTERPRETERS = {
    "debian": "/usr/bin/python3.11",
    "pyenv": "/root/.pyenv/versions/3.11.7/bin/python3.11",
}

ENTER_RESUME = 0x1
ENTER_PREEXISTING = 0x2
EXIT_YIELD = 0x1
EXIT_UNWIND = 0x2
EXIT_STOP = 0x4


def interpreters():
    found = {k: v for k, v in INTERPRETERS.items() if os.path.exists(v)}
    if not found:
        raise RuntimeError("no CPython 3.11 interpreter found")
    return found


class Workload:
    """A workload started with --wait: it says ready and blocks until go()."""

    def __init__(self, python, script, *args):
        self.proc = subprocess.Popen(
            [python, os.path.join(WORKLOADS, script), "--wait", *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.proc.kill()
            raise RuntimeError(f"{script} did not start: {line!r}")
        self.pid = self.proc.pid

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=300):
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        return out

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Recorder:
    """`ptrace-gpu record ARGS -o OUT`, returned once the probes are attached."""

    def __init__(self, args, out, **popen):
        self.proc = subprocess.Popen([PTG, "record", "-o", out, *args],
                                     stderr=subprocess.PIPE, text=True, **popen)
        self.lines = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                self.proc.wait()
                raise RuntimeError("record failed: " + "".join(self.lines))
            self.lines.append(line)
            if "recording pid" in line:
                break

    def wait(self, timeout=300):
        rest = self.proc.stderr.read()
        self.lines.append(rest)
        return self.proc.wait(timeout=timeout)

    @property
    def stderr(self):
        return "".join(self.lines)


def run(args, **kw):
    return subprocess.run([PTG, *args], capture_output=True, text=True, **kw)


_SYM = re.compile(r"^(.*) \((.*):(\d+)\)$")
_FIELD = re.compile(r"^(dur|stream|corr|ext|aux\d)=")


class Record:
    __slots__ = ("ts", "pid", "tid", "kind", "flags", "fields", "name", "file", "line")


class Trace:
    def __init__(self, path):
        res = run(["dump", path])
        if res.returncode != 0:
            raise RuntimeError(f"dump {path}: {res.stderr}")
        self.meta, self.losses, self.records = {}, [], []
        for line in res.stdout.splitlines():
            if line.startswith("# lost "):
                self.losses.append(line[7:])
            elif line.startswith("# "):
                key, _, value = line[2:].partition(": ")
                self.meta[key] = value
            else:
                self.records.append(self._parse(line))

    @staticmethod
    def _parse(line):
        tok = line.split(" ")
        r = Record()
        r.ts = int(tok[0])
        pid, tid = tok[1].split("/")
        r.pid, r.tid, r.kind = int(pid), int(tid), tok[2]
        r.flags = int(tok[3].split("=")[1], 16)
        i, r.fields = 4, {}
        while i < len(tok) and _FIELD.match(tok[i]):
            k, v = tok[i].split("=")
            r.fields[k] = int(v)
            i += 1
        sym = " ".join(tok[i:])
        m = _SYM.match(sym)
        r.name, r.file, r.line = (m.group(1), m.group(2), int(m.group(3))) if m else (sym, "", 0)
        return r

    def calls(self):
        """Replays enter/exit per thread. Returns the list of closed segments:
        (tid, name, file, line, enter_ts, exit_ts, enter_flags, exit_flags, depth)
        and raises if the nesting is broken."""
        stacks = collections.defaultdict(list)
        out = []
        for r in self.records:
            if r.kind == "py_enter":
                stacks[r.tid].append(r)
            elif r.kind == "py_exit":
                st = stacks[r.tid]
                if not st:
                    raise AssertionError(f"exit without enter on tid {r.tid} at {r.ts}")
                e = st.pop()
                out.append((r.tid, e.name, e.file, e.line, e.ts, r.ts, e.flags, r.flags,
                            len(st)))
        for tid, st in stacks.items():
            if st:
                raise AssertionError(f"tid {tid}: {len(st)} frames never closed")
        return out

    def count(self, file_suffix=None, by_tid=False):
        """New calls per function name (qualname:firstline), resumptions excluded."""
        c = collections.Counter()
        for seg in self.calls():
            tid, name, file, line, _, _, eflags, _, _ = seg
            if eflags & ENTER_RESUME:
                continue
            if file_suffix and not file.endswith(file_suffix):
                continue
            key = f"{name}:{line}"
            c[(tid, key) if by_tid else key] += 1
        return c


def per_interpreter(cls):
    """Turns each check_NAME(self, python) of cls into test_NAME_<interpreter>."""
    for attr in [a for a in vars(cls) if a.startswith("check_")]:
        for name, python in interpreters().items():
            def test(self, check=getattr(cls, attr), python=python):
                check(self, python)
            setattr(cls, f"test_{attr[6:]}_{name}", test)
    return cls


def wait_until(pred, timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def main(testcase_module="__main__"):
    import unittest
    if os.geteuid() != 0:
        print("integration tests need root", file=sys.stderr)
        sys.exit(1)
    unittest.main(module=testcase_module, verbosity=2)
