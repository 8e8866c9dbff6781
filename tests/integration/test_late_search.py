"""A library loaded late is found where the target's loader will find it.

The fake driver (tests/fakecuda) is put where only one step of the loader's
search order leads, with no LD_LIBRARY_PATH, and the workload
(workloads/cuda_late.py) loads it by name only after `record -p` attached,
then calls it at once in a burst: LAUNCHES cuLaunchKernel, SYNCS
cuStreamSynchronize. Found ahead, every call is in the trace:

- executable's RUNPATH: a Python whose executable is its own
  (workloads/pylaunch.c, built here with -rpath '$ORIGIN/lib' as
  DT_RUNPATH), the library loaded by the executable's own dlopen, since a
  RUNPATH serves only its object's lookups;
- executable's RPATH: the same built with DT_RPATH (which the loader
  would also search for objects without a RUNPATH of their own; pyenv's
  _ctypes has one, so the executable loads it here too);
- a mapped library's RUNPATH, as a PyTorch wheel's libtorch points at
  `$ORIGIN/../../nvidia/<name>/lib`: workloads/dlopener.c built as
  torch/lib/libdlopener.so with that RUNPATH, loaded before record
  attaches, loads the driver from nvidia/cuda_driver/lib;
- ld.so.cache: an `ldconfig -C` cache listing a folder no search path has,
  bind-mounted over /etc/ld.so.cache in a mount namespace of the target's.

A library dlopen()ed by full path from a folder on no search path cannot be
found ahead: it is probed when the loader's notice (_dl_debug_state)
arrives. The workload waits once it is loaded, so the count is exact, and
the trace must still say that a window went unprobed: the loss
`lib_unprobed_window` = 1 and a note on stderr that names the library.

Where record holds the loading thread under ptrace (`-p PID --hold`; a
process with no Python, helpers/nopy_dlopen.c, is held by `-p` alone), the
loader's notice stops that thread until the probes are in: every call, the
burst right after the dlopen included, nothing lost, no warning. A kill -9
of record while the thread waits there lets it run on, untraced.
"""
import collections
import os
import re
import shlex
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import ptg
from test_cuda_host import LIBDIR, Trace

sys.path.insert(0, ptg.WORKLOADS)
import cuda_late as plan  # noqa: E402

SCRIPT = os.path.join(ptg.WORKLOADS, "cuda_late.py")
NOPY_DLOPEN = os.path.join(ptg.BUILD, "tests", "nopy_dlopen")
HELD_NOTE = "waited at the loader's notice until probed"
LAUNCHER = os.path.join(ptg.WORKLOADS, "pylaunch.c")
DLOPENER = os.path.join(ptg.WORKLOADS, "dlopener.c")
LIB = "libcuda.so.1"
NOTE_WAIT = 120


def interpreters():
    """Debian's python3.11, and pyenv's 3.11 whose libpython the launcher links."""
    host, pyenv = ptg.Python("debian-3.11"), ptg.Python("pyenv-3.11")
    config = os.path.join(os.path.dirname(pyenv.exe), "python3.11-config")
    reason = host.missing or pyenv.missing or (
        not os.access(config, os.X_OK) and f"no {config}") or (
        not shutil.which("cc") and "no C compiler") or (
        not shutil.which("unshare") and "no unshare")
    if reason:
        print(f"skip: {reason}", flush=True)
        sys.exit(77)
    return host, config


HOST, CONFIG = interpreters()


class LateSearch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ptg-late-search.")
        self.out = os.path.join(self.tmp, "late.ptg")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def place(self, folder):
        """A copy of the fake driver in tmp/folder; its path."""
        d = os.path.join(self.tmp, folder)
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(LIBDIR, LIB), d)
        return os.path.join(d, LIB)

    def launcher(self, new_dtags):
        """workloads/pylaunch.c built into tmp with '$ORIGIN/lib' as RUNPATH or RPATH."""
        exe = os.path.join(self.tmp, "pylaunch")
        flags = subprocess.run([CONFIG, "--cflags", "--ldflags", "--embed"], check=True,
                               capture_output=True, text=True).stdout.split()
        dtags = "--enable-new-dtags" if new_dtags else "--disable-new-dtags"
        subprocess.run(["cc", "-o", exe, LAUNCHER, DLOPENER, *flags, "-rdynamic",
                        f"-Wl,{dtags},-rpath,$ORIGIN/lib"], check=True)
        dyn = subprocess.run(["readelf", "-d", exe], check=True, capture_output=True,
                             text=True).stdout
        tag = "(RUNPATH)" if new_dtags else "(RPATH)"
        self.assertTrue([x for x in dyn.splitlines() if tag in x and "$ORIGIN/lib" in x], dyn)
        return exe

    def record(self, argv, expect_path, loaded_gate=False, flags=(), ahead=True):
        """Runs argv (a cuda_late.py), records it with -p (and flags) from its
        ready line; returns (pid, recorder) once it is done."""
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env)
        try:
            line = proc.stdout.readline()
            self.assertTrue(line.startswith("ready"), line)
            pid = int(line.split()[1])
            rec = ptg.Recorder(["-p", str(pid), *flags], self.out)
            with open(f"/proc/{pid}/maps") as f:
                self.assertNotIn(LIB, f.read(), "not mapped before go")
            probing = f"cuda: probing 19 entry points of {expect_path}\n"
            self.assertEqual(probing in rec.stderr, ahead and not loaded_gate, rec.stderr)
            ptg.go(proc)
            if loaded_gate:
                self.assertEqual(proc.stdout.readline(), "loaded\n")
                self.wait_note(rec, expect_path, proc)
                ptg.go(proc)
            self.finish(proc, rec)
        finally:
            ptg.close(proc)
        return pid, rec

    def finish(self, proc, rec):
        """The workload and record, both to their end, with success."""
        self.assertIn("done", proc.stdout.read())
        self.assertEqual(proc.wait(timeout=300), 0)
        self.assertEqual(rec.wait(), 0, rec.stderr)

    def wait_note(self, rec, path, proc):
        """record's stderr up to its note that path went unprobed for a while.
        Should it never come, the workload is killed after NOTE_WAIT seconds
        (a bound on a hang, not a timing), record ends, and so does the read."""
        guard = threading.Timer(NOTE_WAIT, proc.kill)
        guard.start()
        try:
            self.read_note(rec, path)
        finally:
            guard.cancel()

    def read_note(self, rec, path):
        while True:
            line = rec.proc.stderr.readline()
            self.assertTrue(line, "record ended without the note: " + rec.stderr)
            rec.lines.append(line)
            if "libwatch:" in line and path in line:
                self.assertIn("loaded from outside the target's search path", line)
                self.assertIn("not in the trace (record --hold makes the loading thread "
                              "wait for its probes)", line)
                return

    def verify(self, pid, path, losses=()):
        trace = Trace(self.out)
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        self.assertEqual(lost, list(losses))
        self.assertIn(path, trace.meta["cuda.libraries"])
        got = collections.Counter(r.name for r in trace.records if r.kind == "cuda_call")
        self.assertEqual(got, {"cuLaunchKernel": plan.LAUNCHES,
                               "cuStreamSynchronize": plan.SYNCS})
        self.assertTrue(all(r.pid == pid for r in trace.records if r.kind == "cuda_call"))

    def test_exe_runpath(self):
        path = self.place("lib")
        exe = self.launcher(new_dtags=True)
        pid, _ = self.record([exe, SCRIPT, "--wait", "--via-exe", LIB], path)
        self.verify(pid, path)

    def test_exe_rpath(self):
        path = self.place("lib")
        exe = self.launcher(new_dtags=False)
        pid, _ = self.record([exe, SCRIPT, "--wait", "--via-exe", LIB], path)
        self.verify(pid, path)

    def test_mapped_runpath(self):
        path = self.place(os.path.join("nvidia", "cuda_driver", "lib"))
        lib = os.path.join(self.tmp, "torch", "lib", "libdlopener.so")
        os.makedirs(os.path.dirname(lib))
        subprocess.run(["cc", "-shared", "-fPIC", "-o", lib, DLOPENER, "-ldl",
                        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../nvidia/cuda_driver/lib"],
                       check=True)
        pid, _ = self.record([HOST.exe, SCRIPT, "--via", lib, "--wait", LIB], path)
        self.verify(pid, path)

    def test_ld_so_cache(self):
        path = self.place("cached")
        conf, cache = os.path.join(self.tmp, "ld.so.conf"), os.path.join(self.tmp, "ld.so.cache")
        with open(conf, "w") as f:
            f.write(os.path.dirname(path) + "\n")
        subprocess.run(["ldconfig", "-X", "-f", conf, "-C", cache], check=True)
        listed = subprocess.run(["ldconfig", "-p", "-C", cache], check=True,
                                capture_output=True, text=True).stdout
        self.assertIn(f"=> {path}\n", listed)
        # the cache is the target's alone: its own mount namespace, the host's untouched
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount --bind "$0" /etc/ld.so.cache && exec "$@"', cache,
                HOST.exe, SCRIPT, "--wait", LIB]
        pid, _ = self.record(argv, path)
        self.verify(pid, path)

    def test_site_packages(self):
        """A PyTorch wheel's layout in a venv: torch/lib/libtorch_cpu.so with the
        nvidia wheels on its RUNPATH, the driver there loaded by full path. The
        venv's site folder (pyvenv.cfg beside argv[0]'s bin/, though
        /proc/PID/exe names the base interpreter) is looked in ahead, and the
        RUNPATH of what it finds: every call in, no window."""
        venv = os.path.join(self.tmp, "venv")
        ver = subprocess.run([HOST.exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        site = os.path.join(venv, "lib", f"python{ver}", "site-packages")
        os.makedirs(os.path.join(venv, "bin"))
        with open(os.path.join(venv, "pyvenv.cfg"), "w") as f:
            f.write(f"home = {os.path.dirname(HOST.exe)}\n"
                    "include-system-site-packages = false\n")
        python = os.path.join(venv, "bin", "python3")
        os.symlink(HOST.exe, python)
        path = self.place(os.path.join(site, "nvidia", "cuda_driver", "lib"))
        torch = os.path.join(site, "torch", "lib", "libtorch_cpu.so")
        os.makedirs(os.path.dirname(torch))
        subprocess.run(["cc", "-shared", "-fPIC", "-o", torch, DLOPENER, "-ldl",
                        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../nvidia/cuda_driver/lib"],
                       check=True)
        pid, _ = self.record([python, SCRIPT, "--wait", path], path)
        self.verify(pid, path)

    def test_full_path(self):
        path = self.place("hidden")
        pid, rec = self.record([HOST.exe, SCRIPT, "--wait", "--gate-loaded", path], path,
                               loaded_gate=True)
        self.verify(pid, path, losses=["lib_unprobed_window cpu=-1: 1"])
        self.assertEqual(rec.stderr.count("libwatch:"), 1, rec.stderr)

    def verify_held(self, pid, path, rec):
        """Every call, the first ones right after the dlopen too; the hold said."""
        self.verify(pid, path)
        self.assertNotIn("warning: libwatch", rec.stderr)
        self.assertIn(f"libwatch: pid {pid} loaded {path} from outside its search path: "
                      f"it {HELD_NOTE}", rec.stderr)

    def test_full_path_held(self):
        """-p PID --hold: the driver by full path, called at once, every call."""
        path = self.place("hidden")
        pid, rec = self.record([HOST.exe, SCRIPT, "--wait", path], path, flags=["--hold"],
                               ahead=False)
        self.verify_held(pid, path, rec)

    def test_full_path_held_py_thread(self):
        """--hold: a Python thread started after the attach loads it."""
        path = self.place("hidden")
        pid, rec = self.record([HOST.exe, SCRIPT, "--wait", "--thread", path], path,
                               flags=["--hold"], ahead=False)
        self.verify_held(pid, path, rec)

    def test_full_path_held_command_shim(self):
        """record --hold -- SHIM, where the shim (sh, as pyenv's is bash) execs
        Python: followed into it, held; the driver loaded by full path from a
        thread, every call."""
        path = self.place("hidden")
        cmd = shlex.join([HOST.exe, SCRIPT, "--thread", path])
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        res = ptg.run(["record", "--hold", "-o", self.out, "--", "sh", "-c", "exec " + cmd],
                      env=env, timeout=600)
        self.assertEqual(res.returncode, 0, res.stderr)
        pid = int(re.search(r"recording pid (\d+) too \(Python", res.stderr).group(1))
        self.verify_held(pid, path, res)

    def nopy_dlopen(self, path, mode="main"):
        """helpers/nopy_dlopen loading path once told, from its thread mode;
        (process, pid)."""
        proc = subprocess.Popen([NOPY_DLOPEN, path, str(plan.LAUNCHES), str(plan.SYNCS), mode],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        self.assertTrue(line.startswith("ready"), line)
        return proc, int(line.split()[1])

    def test_full_path_held_nopy(self, mode="main"):
        """-p of a C program with no Python, held by -p alone: every call."""
        path = self.place("hidden")
        proc, pid = self.nopy_dlopen(path, mode)
        try:
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            self.assertIn("held at the exec until probed", rec.stderr)
            ptg.go(proc)
            self.finish(proc, rec)
        finally:
            ptg.close(proc)
        self.verify_held(pid, path, rec)

    def test_full_path_held_thread(self):
        """The same from a thread that was there when record attached: each
        thread is held, not the main one alone."""
        self.test_full_path_held_nopy("early")

    def test_full_path_held_new_thread(self):
        """The same from a thread started after the attach: held from birth."""
        self.test_full_path_held_nopy("late")

    @staticmethod
    def maps(pid):
        with open(f"/proc/{pid}/maps") as f:
            return f.read()

    @staticmethod
    def stopped_thread(pid, tracer):
        """The thread of pid in a ptrace stop of tracer's, or None."""
        for tid in os.listdir(f"/proc/{pid}/task"):
            if ptg.proc_status(int(tid)) == ("t", tracer):
                return int(tid)
        return None

    def test_held_notice_kill_safe(self, mode="main"):
        """record stopped (SIGSTOP) before the dlopen: the thread waits at the
        loader's notice for it, in a ptrace stop; record killed (SIGKILL)
        then, it runs on untraced and makes all its calls."""
        path = self.place("hidden")
        proc, pid = self.nopy_dlopen(path, mode)
        rec = None
        try:
            rec = ptg.Recorder(["-p", str(pid)], self.out)
            os.kill(rec.proc.pid, signal.SIGSTOP)
            ptg.go(proc)
            # a bound on a hang, not a timing: the stop comes within the dlopen
            self.assertTrue(ptg.wait_until(lambda: self.stopped_thread(pid, rec.proc.pid)
                                           and LIB in self.maps(pid)), ptg.proc_status(pid))
            if mode != "main":
                self.assertNotEqual(self.stopped_thread(pid, rec.proc.pid), pid)
            os.kill(rec.proc.pid, signal.SIGKILL)
            rec.proc.wait()
            self.assertEqual(proc.stdout.read(), "done\n")
            self.assertEqual(proc.wait(timeout=300), 0)
        finally:
            if rec:
                ptg.close(rec.proc)
            ptg.close(proc)

    def test_held_notice_kill_safe_thread(self):
        """The same where the waiting thread is not the main one."""
        self.test_held_notice_kill_safe("early")


if __name__ == "__main__":
    ptg.main()
