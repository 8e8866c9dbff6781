"""Bad input gets one clear line on stderr and a non-zero exit, never a crash."""
import gzip
import os
import shutil
import subprocess
import tempfile
import unittest

import ptg


def patch_py_version(path, version_hex):
    """Writes another PY_VERSION_HEX into a copy of an interpreter's Py_Version."""
    syms = subprocess.run(["nm", "-D", path], capture_output=True, text=True,
                          check=True).stdout
    addr = next(int(line.split()[0], 16) for line in syms.splitlines()
                if line.endswith(" Py_Version"))
    segs = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                          check=True).stdout
    for line in segs.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if vaddr <= addr < vaddr + filesz:
                with open(path, "r+b") as fp:
                    fp.seek(addr - vaddr + off)
                    fp.write(version_hex.to_bytes(8, "little"))
                return
    raise RuntimeError("Py_Version not in a loaded segment")


class Errors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "t.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def assert_one_line_error(self, args, expect, code=1, env=None, **kw):
        e = dict(os.environ)
        e.update(env or {})
        res = subprocess.run([ptg.PTG, *args], capture_output=True, text=True, env=e, **kw)
        self.assertEqual(res.returncode, code, res.stderr)
        lines = res.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, res.stderr)
        self.assertTrue(lines[0].startswith("ptrace-gpu"), lines[0])
        self.assertIn(expect, lines[0])
        return lines[0]

    def sleeper(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        return p

    def python_sleeper(self, python):
        p = self.sleeper([python, "-c", "import time; print('ready', flush=True); time.sleep(60)"])
        return p

    def test_no_such_pid(self):
        self.assert_one_line_error(["record", "-o", self.out, "-p", "999999999"],
                                   "no such process: 999999999")

    def test_not_python(self):
        """No error: a process with no Python is recorded (test_nopython.py), but
        what needs Python is refused in one line."""
        p = self.sleeper(["sleep", "60"])
        res = subprocess.run([ptg.PTG, "record", "-q", "-d", "0.2", "-o", self.out, "-p",
                              str(p.pid)], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(ptg.Trace(self.out).meta["python"], "none")
        self.assert_one_line_error(["record", "-o", self.out, "--steps", "1", "-p", str(p.pid)],
                                   f"need Python; pid {p.pid} runs none")

    def test_unsupported_version(self):
        fake = os.path.join(self.tmp.name, "python3.11")
        shutil.copy("/usr/bin/python3.11", fake)
        patch_py_version(fake, 0x030A0DF0)  # below the supported range
        p = self.python_sleeper(fake)
        line = self.assert_one_line_error(["record", "-o", self.out, "-p", str(p.pid)],
                                          "unsupported Python version 3.10.13")
        self.assertIn("supported: 3.11", line)

    def test_kernel_without_btf(self):
        p = self.python_sleeper("/usr/bin/python3.11")
        fake = os.path.join(self.tmp.name, "sys")
        os.makedirs(fake)
        self.assert_one_line_error(["record", "-o", self.out, "-p", str(p.pid)], "no BTF",
                                   env={"PTRACE_GPU_SYSFS": fake})

    def test_kernel_without_uprobes(self):
        p = self.python_sleeper("/usr/bin/python3.11")
        fake = os.path.join(self.tmp.name, "sys")
        os.makedirs(os.path.join(fake, "kernel", "btf"))
        open(os.path.join(fake, "kernel", "btf", "vmlinux"), "w").close()
        self.assert_one_line_error(["record", "-o", self.out, "-p", str(p.pid)], "no uprobes",
                                   env={"PTRACE_GPU_SYSFS": fake})

    def test_usage(self):
        self.assert_one_line_error(["record", "-o", self.out],
                                   "give one of -p PID, --uid USER, --cgroup DIR or -- CMD",
                                   code=2)
        self.assert_one_line_error(["record", "-p", "abc"], "bad PID", code=2)
        # --hold records a set of one, cut into no steps
        self.assert_one_line_error(["record", "-p", "1", "--hold", "--steps", "2"],
                                   "--steps and --schedule take one process", code=2)
        self.assert_one_line_error(["frobnicate"], "unknown command", code=2)

    def test_numeric_flags(self):
        """Every numeric flag of every command refuses what is not a sane number
        with one line and exit status 2, before it does anything."""
        flags = [
            (["record", "-o", self.out, "--", "/bin/true"], ["-p", "-d", "--ringbuf-mb",
                                                            "--steps"]),
            (["record", "-o", self.out, "--schedule"], [None]),
            (["report", "x.ptg"], ["--limit", "--tid", "--group-by-stack"]),
            (["export", "--pstats", "x.pstats", "x.ptg"], ["--tid"]),
            (["flamegraph", "x.ptg"], ["--tid", "--max-stack"]),
            (["idle", "x.ptg"], ["-n", "--kernel-wait-us", "--max-queue"]),
            (["sample", "-a"], ["-F", "-d", "--every", "--keep", "--max-stack"]),
            (["sample"], ["-p"]),
            (["inject", "--pid", "1", "x.so"], ["--timeout"]),
            (["inject", "x.so"], ["--pid"]),
        ]
        for args, names in flags:
            for name in names:
                for value in ("nan", "inf", "-inf", "-1", "1e30", "12abc", "", " 1", "0x10",
                              "99999999999999999999999"):
                    if name is None:  # --schedule: the bad number is inside
                        argv = [*args, f"wait={value},active=1"]
                    else:
                        argv = [*args[:1], name, value, *args[1:]]
                    with self.subTest(argv=argv):
                        self.assert_one_line_error(argv, "bad", code=2)

    def test_command_not_python(self):
        """A command with no Python is recorded, and record exits with its status."""
        res = subprocess.run([ptg.PTG, "record", "-q", "-o", self.out, "--", "/bin/false"],
                             capture_output=True, text=True)
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertEqual(res.stderr, "")
        self.assertEqual(ptg.Trace(self.out).meta["python"], "none")
        self.assert_one_line_error(["record", "-o", self.out, "--", "/nonexistent/prog"],
                                   "cannot run /nonexistent/prog: No such file or directory")
        self.assert_one_line_error(["record", "-o", self.out, "--", "no-such-program-ptg"],
                                   "cannot run no-such-program-ptg: No such file or directory")

    def make_trace(self):
        res = ptg.run(["record", "-q", "-o", self.out, "--", "/usr/bin/python3.11", "-c",
                       "def f(n): return n if n < 2 else f(n-1) + f(n-2)\nf(12)"])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(self.out, "rb") as f:
            return f.read()

    def test_missing_file(self):
        for cmd in (["report"], ["dump"], ["flamegraph"], ["idle"]):
            self.assert_one_line_error([*cmd, "/nonexistent.ptg"], "")

    def test_not_a_trace(self):
        bad = os.path.join(self.tmp.name, "bad.ptg")
        with open(bad, "wb") as f:
            f.write(b"this is not a trace file at all" * 10)
        for cmd in (["report"], ["dump"], ["flamegraph"], ["idle"]):
            self.assert_one_line_error([*cmd, bad], "not a ptrace-gpu trace")

    def test_foreign_files(self):
        """A file that is not a trace is named, with the command that reads it."""
        kineto = os.path.join(ptg.SRC, "..", "shared", "traces", "kineto", "alexnet_1gpu.json.gz")
        json_path = os.path.join(self.tmp.name, "t.json")
        gz_path = os.path.join(self.tmp.name, "t.json.gz")
        with open(json_path, "w") as f:
            f.write('  {"traceEvents": []}')
        with gzip.open(gz_path, "wt") as f:
            f.write('{"traceEvents": []}')
        empty = os.path.join(self.tmp.name, "empty.ptg")
        open(empty, "w").close()
        pprof = os.path.join(self.tmp.name, "p.pb.gz")
        with gzip.open(pprof, "wb") as f:
            f.write(b"\x0a\x04\x08\x01\x10\x02")
        cases = [(json_path, "a JSON file"), (gz_path, "a gzipped JSON file"),
                 (empty, "empty file"), (pprof, "a gzipped pprof profile")]
        if os.path.exists(kineto):
            cases.append((kineto, "a gzipped JSON file"))
        for path, what in cases:
            for cmd in (["report"], ["dump"], ["flamegraph"], ["idle"], ["export", "--chrome",
                                                                        self.out + ".json"]):
                line = self.assert_one_line_error([*cmd, path], what)
                self.assertIn("not a ptrace-gpu trace", line)
                if "JSON" in what:
                    self.assertIn("ptrace-gpu import", line)

    def test_help_and_bad_options(self):
        """--help goes alone to stdout, whole lines; a bad option is one line on stderr."""
        for cmd in ("record", "report", "idle", "flamegraph", "export", "import", "dump",
                    "sample", "inject", "check"):
            res = ptg.run([cmd, "--help"])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertEqual(res.stderr, "")
            self.assertTrue(res.stdout.startswith("usage: ptrace-gpu " + cmd), res.stdout)
            self.assertTrue(res.stdout.endswith("\n"), res.stdout[-80:])
            if cmd != "dump":
                line = self.assert_one_line_error([cmd, "--no-such-option"],
                                                  f"ptrace-gpu {cmd}: unknown option "
                                                  "'--no-such-option'", code=2)
                self.assertIn(f"ptrace-gpu {cmd} --help", line)
        self.assert_one_line_error(["flamegraph", "-o"], "option '-o' needs a value", code=2)
        self.assert_one_line_error(["report", "--sort"], "option '--sort' needs a value",
                                   code=2)
        self.assert_one_line_error(["dump", "a", "b"], "expected one trace FILE", code=2)
        res = ptg.run(["export", "--help"])
        self.assertIn("ui.perfetto.dev", res.stdout)
        self.assertNotIn("chrome://tracing", res.stdout)

    def test_truncated_and_corrupted(self):
        data = self.make_trace()
        bad = os.path.join(self.tmp.name, "bad.ptg")
        # a cut file header is an error; a cut anywhere later reads what is whole,
        # with one warning line (test_truncated checks what is read)
        for cut in (8, 15):
            with open(bad, "wb") as f:
                f.write(data[:cut])
            for cmd in (["report"], ["dump"], ["idle"], ["flamegraph"]):
                self.assert_one_line_error([*cmd, bad], "trace")
        for cut in (len(data) - 1, len(data) // 2, 20, 16):
            with open(bad, "wb") as f:
                f.write(data[:cut])
            for cmd in (["report"], ["dump"], ["idle"], ["flamegraph", "-o", self.out + ".svg"]):
                res = subprocess.run([ptg.PTG, *cmd, bad], capture_output=True, text=True)
                self.assertEqual(res.returncode, 0, res.stderr)
                self.assertEqual(len(res.stderr.splitlines()), 1, res.stderr)
                self.assertRegex(res.stderr, r"^ptrace-gpu: warning: .* is truncated at byte "
                                 f"{cut} ")
        # flip one bit in each quarter of the file
        for pos in range(16, len(data), max(1, len(data) // 4)):
            flipped = bytearray(data)
            flipped[pos] ^= 0x10
            with open(bad, "wb") as f:
                f.write(flipped)
            for cmd in (["report"], ["dump"]):
                res = subprocess.run([ptg.PTG, *cmd, bad], capture_output=True, text=True)
                self.assertIn(res.returncode, (0, 1), res.stderr)
                if res.returncode:
                    self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)


class Unprivileged(unittest.TestCase):
    def test_not_root(self):
        p = subprocess.Popen(["/usr/bin/python3.11", "-c", "import time; time.sleep(60)"])
        self.addCleanup(lambda: (p.kill(), p.wait()))
        res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "--inh-caps=-all", ptg.PTG, "record", "-o", "/tmp/ptg-never.ptg",
                              "-p", str(p.pid)], capture_output=True, text=True)
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertEqual(res.stderr.strip().splitlines(),
                         ["ptrace-gpu: tracing needs root (or CAP_BPF, CAP_PERFMON and "
                          "CAP_SYS_PTRACE): run it with sudo"])


if __name__ == "__main__":
    ptg.main()
