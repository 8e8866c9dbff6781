"""`cmake --install` of the build: ptrace-gpu in PREFIX/bin, its agents in
PREFIX/lib/ptrace-gpu, a man page per command, bash completion, and the
sampler's service where the tree has it; nothing else and nothing outside
the prefix (DESTDIR too). The installed binary runs, its pages open with
man, and, as root, it finds its agents where they were installed, under
the same trust checks as beside the executable: a real `record -- CMD`
hands the target the CUPTI agent, and a real `record --in-process -p`
loads the in-process agent.
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helpopts  # noqa: E402

SOURCE = helpopts.SOURCE
BUILD = os.environ.get("PTG_BUILD_DIR", os.path.join(SOURCE, "build"))
CMAKE = os.environ.get("CMAKE", "cmake")
PYTHON = "/usr/bin/python3"
ROOT = os.geteuid() == 0

# Calls tick() until stdin closes: a target for record -p.
TARGET = """
import sys, threading, time
def tick():
    return sum(range(50))
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("ready", flush=True)
while not done.is_set():
    tick()
    time.sleep(0.0005)
"""


def expected_files():
    """What an install holds, relative to its prefix."""
    files = {"bin/ptrace-gpu", "lib/ptrace-gpu/libptg_pymon.so",
             "share/bash-completion/completions/ptrace-gpu"}
    if os.path.exists(os.path.join(BUILD, "libptg_cupti.so")):
        files.add("lib/ptrace-gpu/libptg_cupti.so")
    files |= {f"share/man/man1/{p}" for p in os.listdir(os.path.join(SOURCE, "man"))
              if p.endswith(".1")}
    unit = os.path.join(SOURCE, "dist/systemd/ptrace-gpu-sample.service")
    if os.path.exists(unit) or os.path.exists(unit + ".in"):
        files.add("lib/systemd/system/ptrace-gpu-sample.service")
    if os.path.exists(os.path.join(SOURCE, "dist/ptrace-gpu.default")):
        files.add("etc/default/ptrace-gpu")
    return files


def tree(top):
    return {os.path.relpath(os.path.join(d, f), top)
            for d, _, fs in os.walk(top) for f in fs}


def install(prefix, destdir=None):
    env = dict(os.environ)
    env.pop("DESTDIR", None)
    if destdir:
        env["DESTDIR"] = destdir
    out = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, f"cmake --install: {out.stdout}{out.stderr}"


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # as root, a directory that only root can write all the way up (a
        # mkdtemp is 0700, /var/tmp root's and sticky): the agents there pass
        cls.tmp = tempfile.mkdtemp(prefix="ptg-install-", dir="/var/tmp" if ROOT else None)
        cls.prefix = os.path.join(cls.tmp, "prefix")
        install(cls.prefix)
        cls.exe = os.path.join(cls.prefix, "bin/ptrace-gpu")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_files(self, top):
        got, want = tree(top), expected_files()
        self.assertFalse(want - got, f"not installed: {sorted(want - got)}")
        extra = {f for f in got - want if not f.startswith("share/doc/ptrace-gpu/")}
        self.assertFalse(extra, f"installed, not expected: {sorted(extra)}")

    def test_files(self):
        self.check_files(self.prefix)
        mode = os.stat(self.exe).st_mode
        self.assertTrue(mode & stat.S_IXOTH and not mode & (stat.S_IWGRP | stat.S_IWOTH),
                        f"bin/ptrace-gpu has mode {mode:o}")
        with open(os.path.join(SOURCE, "dist/bash-completion/ptrace-gpu"), "rb") as a, \
                open(os.path.join(self.prefix, "share/bash-completion/completions/ptrace-gpu"),
                     "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_destdir(self):
        """DESTDIR=D --prefix /opt/x: everything under D/opt/x, nothing beside it."""
        dest = os.path.join(self.tmp, "dest")
        install("/opt/ptrace-gpu-test", destdir=dest)
        self.assertEqual(os.listdir(dest), ["opt"])
        self.assertEqual(os.listdir(os.path.join(dest, "opt")), ["ptrace-gpu-test"])
        self.check_files(os.path.join(dest, "opt/ptrace-gpu-test"))

    def test_runs(self):
        out = subprocess.run([self.exe, "--version"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith("ptrace-gpu "), out.stdout)
        out = subprocess.run([self.exe, "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("record", helpopts.commands(out.stdout))

    def test_man(self):
        """man finds the installed pages through MANPATH, and renders them."""
        if not shutil.which("man"):
            self.skipTest("no man (Debian: man-db)")
        env = dict(os.environ, MANPATH=os.path.join(self.prefix, "share/man"),
                   LC_ALL="C.UTF-8", MANWIDTH="80")
        for page in ("ptrace-gpu-sample", "ptrace-gpu", "ptrace-gpu-record"):
            out = subprocess.run(["man", "-P", "cat", page], capture_output=True, text=True,
                                 env=env, timeout=60)
            self.assertEqual(out.returncode, 0, f"man {page}: {out.stderr}")
            self.assertIn("SYNOPSIS", out.stdout)
            self.assertIn(page.upper(), out.stdout)
        # an option as typed: troff's \- comes out as an ASCII hyphen-minus
        self.assertIn("--in-process", out.stdout)

    def record(self, *args):
        return subprocess.run([self.exe, "record", *args], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    @unittest.skipUnless(ROOT, "recording needs root")
    def test_cupti_agent_found(self):
        """record -- CMD gives the command a copy of PREFIX/lib/ptrace-gpu's agent."""
        if not os.path.exists(os.path.join(self.prefix, "lib/ptrace-gpu/libptg_cupti.so")):
            self.skipTest("this build has no CUPTI agent")
        trace = os.path.join(self.tmp, "cmd.ptg")
        out = self.record("--no-cuda", "--no-sched", "--no-ops", "-o", trace, "--", PYTHON, "-c",
                          "import os; print(os.environ.get('CUDA_INJECTION64_PATH', 'none'))")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertNotIn("no usable CUPTI agent", out.stderr)
        self.assertEqual(os.path.basename(out.stdout.strip()), "libptg_cupti.so",
                         f"stdout: {out.stdout!r}, stderr: {out.stderr}")
        rep = subprocess.run([self.exe, "report", trace], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(rep.returncode, 0, rep.stderr)

    def start_target(self):
        target = subprocess.Popen([PYTHON, "-c", TARGET], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(target.stdout.close)
        self.addCleanup(target.wait, 30)
        self.addCleanup(target.stdin.close)
        self.assertEqual(target.stdout.readline().strip(), "ready")
        return target

    @unittest.skipUnless(ROOT, "recording needs root")
    def test_pymon_agent_found(self):
        """record --in-process -p loads PREFIX/lib/ptrace-gpu's agent into the target."""
        target = self.start_target()
        trace = os.path.join(self.tmp, "inproc.ptg")
        out = self.record("--in-process", "--no-cuda", "--no-sched", "--no-cupti", "-d", "2",
                          "-p", str(target.pid), "-o", trace)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(", in-process: ", out.stderr)
        rep = subprocess.run([self.exe, "report", trace], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        self.assertIn("(tick)", rep.stdout)

    @unittest.skipUnless(ROOT, "recording needs root")
    def test_prefix_under_tmp(self):
        """Under /tmp (root's, sticky: others may write it, not rename root's
        entries), a 0700 prefix of root's holds agents that pass as well."""
        tmp = tempfile.mkdtemp(prefix="ptg-install-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        install(tmp)
        target = self.start_target()
        out = subprocess.run([os.path.join(tmp, "bin/ptrace-gpu"), "record", "--in-process",
                              "--no-cuda", "--no-sched", "--no-cupti", "-d", "1",
                              "-p", str(target.pid), "-o", os.path.join(tmp, "t.ptg")],
                             capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        self.assertEqual(out.returncode, 0, out.stderr)

    @unittest.skipUnless(ROOT, "recording needs root")
    def test_agent_dir_trusted(self):
        """An agents' directory that others may write is refused, by its path."""
        agents = os.path.join(self.prefix, "lib/ptrace-gpu")
        target = self.start_target()
        os.chmod(agents, 0o777)
        try:
            out = self.record("--in-process", "--no-cuda", "--no-sched", "--no-cupti", "-d", "1",
                              "-p", str(target.pid), "-o", os.path.join(self.tmp, "no.ptg"))
        finally:
            os.chmod(agents, 0o755)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertIn(f"{agents} is writable by others", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
