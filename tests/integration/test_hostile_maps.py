#!/usr/bin/env python3
"""A target that chooses the paths root opens (tests/workloads/hostile_maps.py,
run as nobody): it maps a file named libpython3.11.so.1.0, deletes it and
plants a FIFO, or a link to a file only root may read, at "<name> (deleted)",
at <name> and at libcuda.so.1 on its LD_LIBRARY_PATH.

sample -a, sample -p and record -p must each end by -d (record -p by SIGINT
too) and say why they ended, and must open none of the planted things: the
objects are opened as mapped (/proc/PID/map_files, or openat2 in the
target's root with no link followed) and checked by fstat
(user/proc/procopen.c). A file the links name is watched with inotify:
opening it is seen, an O_PATH look at it is not.
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import ptg

ATTACKER = os.path.join(ptg.WORKLOADS, "hostile_maps.py")
PYTHON = "/usr/bin/python3"
# root without map_files (CAP_SYS_ADMIN, CAP_CHECKPOINT_RESTORE): the openat2 route
NO_MAP_FILES = ["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore", "--inh-caps",
                "-sys_admin,-checkpoint_restore"]
# what a command may take beyond its -d: attaching, a busy 2-core machine
SLACK = 25
IN_ACCESS, IN_OPEN = 0x1, 0x20


class Watch:
    """inotify on paths: whether anything opened or read them since."""

    def __init__(self, *paths):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for p in paths:
            if self.libc.inotify_add_watch(self.fd, p.encode(), IN_ACCESS | IN_OPEN) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + p)

    def events(self):
        try:
            return len(os.read(self.fd, 65536)) // 16
        except BlockingIOError:
            return 0

    def close(self):
        os.close(self.fd)


class TestHostileMaps(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ptg-hostile-")
        os.chmod(self.tmp, 0o755)
        self.folder = os.path.join(self.tmp, "user")
        os.mkdir(self.folder)
        os.chown(self.folder, 65534, 65534)
        # root's: a folder nobody may enter, a secret and a FIFO in it
        self.private = os.path.join(self.tmp, "root")
        os.mkdir(self.private, 0o700)
        self.secret = os.path.join(self.private, "secret")
        with open(self.secret, "w") as f:
            f.write("root's only\n")
        os.chmod(self.secret, 0o600)
        self.fifo = os.path.join(self.private, "fifo")
        os.mkfifo(self.fifo, 0o600)
        self.attacker = None
        self.times = {}

    def tearDown(self):
        if self.attacker:
            ptg.end(self.attacker)
        shutil.rmtree(self.tmp, ignore_errors=True)
        for k, v in sorted(self.times.items()):
            print(f"  {self.id().split('.')[-1]}: {k}: ended after {v:.2f} s", file=sys.stderr)

    def start(self, mode, target=None):
        env = dict(os.environ, LD_LIBRARY_PATH=self.folder)
        args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PYTHON,
                ATTACKER, self.folder, mode] + ([target] if target else [])
        self.attacker = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        line = self.attacker.stdout.readline()
        self.assertEqual(line.strip(), "ready", "the hostile target did not start")
        self.pid = self.attacker.pid
        with open(f"/proc/{self.pid}/maps") as f:
            self.assertIn("libpython3.11.so.1.0 (deleted)", f.read())

    def bounded(self, name, args, duration, prefix=()):
        """Runs ptrace-gpu ARGS: it must end in time and say why."""
        out = os.path.join(self.tmp, name.replace(" ", "_"))
        t0 = time.monotonic()
        try:
            r = subprocess.run([*prefix, ptg.PTG, *args, "-o", out], capture_output=True,
                               text=True, timeout=duration + SLACK)
        except subprocess.TimeoutExpired as e:
            self.fail(f"{name}: still running after {duration + SLACK} s:\n{e.stderr}")
        self.times[name] = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, f"{name}:\n{r.stderr}")
        self.assertIn("duration elapsed", r.stderr, f"{name}: no reason to end said")
        return r.stderr

    def record_sigint(self):
        """record -p with no -d, ended by SIGINT once recording."""
        out = os.path.join(self.tmp, "sigint.ptg")
        t0 = time.monotonic()
        rec = ptg.Recorder(["--uprobes", "-p", str(self.pid)], out)
        rec.proc.send_signal(signal.SIGINT)
        t1 = time.monotonic()
        try:
            rc = rec.wait(timeout=SLACK)
        except subprocess.TimeoutExpired:
            rec.proc.kill()
            self.fail("record -p: still running after SIGINT:\n" + rec.stderr)
        self.times["record -p, SIGINT"] = time.monotonic() - t0
        self.times["record -p, after the SIGINT"] = time.monotonic() - t1
        self.assertEqual(rc, 0, rec.stderr)

    def all_commands(self):
        p = str(self.pid)
        self.bounded("sample -p -d 2", ["sample", "-p", p, "-d", "2"], 2)
        self.bounded("sample -a -d 2", ["sample", "-a", "-d", "2"], 2)
        self.bounded("record -p -d 2", ["record", "--uprobes", "-p", p, "-d", "2"], 2)
        self.record_sigint()
        # no map_files: the deleted file is named, never opened by its name
        err = self.bounded("sample -p -d 2, no map_files", ["sample", "-p", p, "-d", "2"], 2,
                           NO_MAP_FILES)
        self.assertIn("libpython3.11.so.1.0 (deleted): deleted", err)
        self.assertIn("files of the targets were not read", err)
        self.bounded("sample -a -d 2, no map_files", ["sample", "-a", "-d", "2"], 2,
                     NO_MAP_FILES)

    def test_fifo(self):
        """FIFOs where the deleted file was, and on the search path: nothing hangs."""
        self.start("fifo")
        self.all_commands()

    def test_link_to_root_file(self):
        """Links to a file only root may read: never opened on the target's behalf."""
        self.start("link", self.secret)
        w = Watch(self.secret)
        try:
            self.all_commands()
            self.assertEqual(w.events(), 0, "root's file was opened for the target")
        finally:
            w.close()

    def test_link_to_root_fifo(self):
        """Links to a FIFO of root's: not opened (a reader would block on it)."""
        self.start("link", self.fifo)
        w = Watch(self.fifo)
        try:
            self.all_commands()
            self.assertEqual(w.events(), 0, "root's FIFO was opened for the target")
        finally:
            w.close()


if __name__ == "__main__":
    ptg.main()
