"""GPU activity (CUPTI) of every process of a multi-process recording: the
agent injected into each of -p A,B once it maps NVIDIA's driver, loaded by
each process of --children -- CMD through CUDA_INJECTION64_PATH, and taken
from the set's processes alone. The agent's real code runs against the
stand-in libcupti (tests/helpers/inject_fakecupti.c): no GPU needed. Exact
kernel counts per process, each record under its own pid, --per-process
files with their own GPU records only, the Chrome export's GPU tracks under
each pid, and kill -9 of record with two agents live.
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import collections
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402
from test_inject import read_trace  # noqa: E402  (a Trace tolerant of non-UTF-8 names)

AGENT = os.path.join(ptg.BUILD, "libptg_cupti.so")
FAKE_CUPTI = os.path.join(ptg.BUILD, "tests", "libinject_fakecupti.so")
CUDA_STUBS = ["/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/lib/stubs/libcuda.so"]
ACTIVE = 106  # fakecupti_state() while the agent has CUPTI's activity kinds on

# A CUDA program as far as the agent can tell: NVIDIA's stub driver is mapped
# (so record injects), libcupti.so.13 is the stand-in, kernels are "launched"
# through it. argv: mode, kernels, the stub driver. attach: waits for the
# injected agent, launches, says "launched", waits until the agent turned
# CUPTI off. launch: starts the agent as cuInit does under
# CUDA_INJECTION64_PATH, launches, exits (the agent's last flush at exit).
GPU_TARGET = """
import ctypes, os, sys, time

def say(*words):
    # one write a line: two targets share the pipe, and a print may come in pieces
    os.write(1, (" ".join(map(str, words)) + "\\n").encode())

ctypes.CDLL(sys.argv[3])
fake = ctypes.CDLL("libcupti.so.13")
mode, n = sys.argv[1], int(sys.argv[2])
if mode == "launch":
    ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()
say("ready", os.getpid())

def wait_state(want, secs):
    end = time.time() + secs
    while fake.fakecupti_state() != want and time.time() < end:
        time.sleep(0.01)
    say("state", os.getpid(), fake.fakecupti_state())

wait_state(%d, 30 if mode == "attach" else 3)
for i in range(n):
    fake.fakecupti_launch(b"volta_sgemm" if i %% 2 else b"_Z6kernelPfi", 5000)
    time.sleep(0.002)
say("launched", os.getpid(), n)
if mode == "attach":
    wait_state(0, 60)
""" % ACTIVE


# Starts two GPU targets (fork + exec) once a line comes on stdin, after the
# recording began: argv: the target script, the stub driver.
LAUNCHER = """
import subprocess, sys
print("ready", flush=True)
sys.stdin.readline()
kids = [subprocess.Popen([sys.executable, sys.argv[1], "attach", n, sys.argv[2]])
        for n in ("12", "21")]
sys.exit(max(k.wait() for k in kids))
"""


def environ(pid):
    """pid's environment, as a dict."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(x.decode().partition("=")[::2] for x in f.read().split(b"\0") if x)


def kernels(trace):
    """{pid: kernel records}"""
    return dict(collections.Counter(r.pid for r in trace.records if r.kind == "kernel"))


def gpu_pids(trace):
    """The pids of every record that came from an agent (kernels and CUPTI's API records)."""
    return {r.pid for r in trace.records
            if r.kind == "kernel" or (r.kind == "cuda_call" and r.fields.get("corr"))}


class Target:
    """GPU_TARGET started (wrap: words before the interpreter's, which exec it)."""

    def __init__(self, python, libdir, stub, mode, n, env=None, wrap=()):
        self.n = n
        self.proc = subprocess.Popen(
            [*wrap, *python.argv(python.path(os.path.join(libdir, "gpu_target.py")), mode,
                                 str(n), python.path(stub))],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
            env=env or dict(os.environ, LD_LIBRARY_PATH=python.path(libdir)))
        line = self.proc.stdout.readline().split()
        if line[:1] != ["ready"]:
            self.kill()
            raise RuntimeError(f"gpu target did not start: {line}")
        self.pid = int(line[1])
        self.lines = []

    def until(self, word):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return None
            self.lines.append(line.split())
            if line.startswith(word):
                return line.split()

    def finish(self):
        self.lines += [x.split() for x in self.proc.stdout]
        return self.proc.wait(timeout=60)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.proc.stdout.closed:
            self.proc.stdout.close()

    def has_agent(self):
        with open(f"/proc/{self.pid}/maps") as f:
            return "libptg_cupti" in f.read()


@ptg.per_interpreter
class TreeGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stub = next((p for p in CUDA_STUBS if os.path.exists(p)), None)
        if not os.path.exists(AGENT) or not os.path.exists(FAKE_CUPTI):
            raise unittest.SkipTest("no CUPTI agent in this build (CUPTI not found)")
        if cls.stub is None:
            raise unittest.SkipTest(f"no stub libcuda.so of the CUDA toolkit ({', '.join(CUDA_STUBS)})")
        # under the build, which a chroot interpreter sees at the same path
        cls.libdir = tempfile.mkdtemp(prefix="tree-gpu.", dir=os.path.abspath(ptg.BUILD))
        os.chmod(cls.libdir, 0o755)
        for src, name in ((FAKE_CUPTI, "libcupti.so.13"), (cls.stub, "libcuda.so")):
            shutil.copyfile(src, os.path.join(cls.libdir, name))
            os.chmod(os.path.join(cls.libdir, name), 0o755)
        cls.stub = os.path.join(cls.libdir, "libcuda.so")
        with open(os.path.join(cls.libdir, "gpu_target.py"), "w") as f:
            f.write(GPU_TARGET)
        with open(os.path.join(cls.libdir, "launcher.py"), "w") as f:
            f.write(LAUNCHER)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.libdir, True)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.targets = []

    def tearDown(self):
        for t in self.targets:
            t.kill()
        self.tmp.cleanup()

    def target(self, python, mode, n, env=None, wrap=()):
        t = Target(python, self.libdir, self.stub, mode, n, env, wrap)
        self.targets.append(t)
        return t

    def record_pids(self, python, out, *flags):
        """-p A,B (and C, which maps the driver too but is no part of the set)."""
        a, b = self.target(python, "attach", 40), self.target(python, "attach", 25)
        c = self.target(python, "attach", 0)
        rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}", *flags], out)
        for t in (a, b):
            self.assertEqual(t.until("state"), ["state", str(t.pid), str(ACTIVE)], rec.stderr)
            self.assertEqual(t.until("launched"), ["launched", str(t.pid), str(t.n)])
        rec.proc.send_signal(signal.SIGINT)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        rec.proc.stderr.close()
        for t in (a, b):
            self.assertEqual(t.finish(), 0)
            self.assertEqual(t.lines[-1], ["state", str(t.pid), "0"],
                             "the agent did not turn CUPTI off")
        self.assertFalse(c.has_agent(), "the agent went into a process outside the set")
        self.assertNotIn("not the target", rec.stderr)
        return a, b, rec

    def check_pids(self, python):
        """-p A,B: injected into each; each pid's kernels exactly, under its pid."""
        out = os.path.join(self.tmp.name, "two.ptg")
        a, b, rec = self.record_pids(python, out)
        self.assertNotIn("not yet GPU activity", rec.stderr)
        self.assertIn(f"recording GPU activity of pid {a.pid}", rec.stderr)
        self.assertIn(f"recording GPU activity of pid {b.pid}", rec.stderr)
        self.assertIn("GPU: 65 kernels", rec.stderr)
        self.assertIn("from 2 processes", rec.stderr)
        self.assertIn(f"GPU of pid {a.pid}: 40 kernels", rec.stderr)
        self.assertIn(f"GPU of pid {b.pid}: 25 kernels", rec.stderr)
        trace = read_trace(out)
        self.assertEqual(kernels(trace), {a.pid: 40, b.pid: 25})
        self.assertEqual(sorted(trace.meta["cupti.pids"].split(",")), sorted([str(a.pid), str(b.pid)]))
        self.assertEqual(gpu_pids(trace), {a.pid, b.pid})
        names = collections.Counter((r.pid, r.name) for r in trace.records if r.kind == "kernel")
        self.assertEqual(names[(a.pid, "volta_sgemm")], 20)
        self.assertEqual(names[(b.pid, "kernel(float*, int)")], 13)
        # several processes: each one's GPU rows under its own pid, not all under device 0
        self.chrome_kernels(out, {a.pid: 40, b.pid: 25})

    def chrome_kernels(self, path, want):
        """The Chrome export: {pid: kernels} as its events place them."""
        chrome = path + ".json"
        res = ptg.run(["export", "--chrome", chrome, path])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
        got = collections.Counter(e["pid"] for e in events if e.get("cat") == "kernel")
        self.assertEqual(dict(got), want)

    def check_per_process(self, python):
        """--per-process: each file has its own process's GPU records and no other's."""
        out = os.path.join(self.tmp.name, "run.ptg")
        a, b, rec = self.record_pids(python, out, "--per-process")
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted([f"run.pid{a.pid}.ptg", f"run.pid{b.pid}.ptg"]))
        for t in (a, b):
            path = os.path.join(self.tmp.name, f"run.pid{t.pid}.ptg")
            trace = read_trace(path)
            self.assertEqual(kernels(trace), {t.pid: t.n})
            self.assertEqual(gpu_pids(trace), {t.pid})
            self.assertIn("cupti.version", trace.meta)
            self.assertEqual(trace.meta.get("cupti.pids"), str(t.pid))
            # one process: Kineto's GPU rows (pid = device), as HTA reads a rank's file
            self.chrome_kernels(path, {0: t.n})

    def check_launch(self, python):
        """record -- CMD of one process: it loads the agent through the environment, a chroot
        interpreter (unshare + chroot, as a container) from the copy put at the same path in
        its root while its exec was held; the copy goes at the end."""
        out = os.path.join(self.tmp.name, "one.ptg")
        res = subprocess.run([ptg.PTG, "record", "-o", out, "--",
                              *python.argv(python.path(os.path.join(self.libdir, "gpu_target.py")),
                                           "launch", "9", python.path(self.stub))],
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, LD_LIBRARY_PATH=self.libdir))
        self.assertEqual(res.returncode, 0, res.stderr)
        launched = [x.split() for x in res.stdout.splitlines() if x.startswith("launched")]
        self.assertEqual(len(launched), 1, res.stdout + res.stderr)
        pid = int(launched[0][1])
        trace = read_trace(out)
        self.assertEqual(kernels(trace), {pid: 9}, res.stderr)
        self.assert_other_root(python, res.stderr, [pid])

    def assert_other_root(self, python, stderr, pids):
        """What record says of the agent's copy in a chroot's root, and that it is gone."""
        copied = [x for x in stderr.splitlines() if "the CUPTI agent is copied to" in x]
        if python.root is None:
            self.assertEqual(copied, [], stderr)
            return
        # once per root: the processes after the first find it there
        self.assertEqual(len(copied), 1, stderr)
        self.assertTrue(any(f"pid {p} runs in another root" in copied[0] for p in pids), stderr)
        path = copied[0].rpartition(" copied to ")[2].rpartition(" there")[0]
        self.assertTrue(path.startswith("/tmp/ptg-"), path)
        self.assertFalse(os.path.exists(python.root + os.path.dirname(path)),
                         f"{python.root}{path} is left behind")

    def check_children_launch(self, python):
        """--children -- sh -c 'A & B; wait': each loads the agent through the environment
        (in a chroot, from the copy put in its root); a process outside the set, given the
        same environment, is refused."""
        out = os.path.join(self.tmp.name, "kids.ptg")
        argv = shlex.join(python.argv(os.path.join(self.libdir, "gpu_target.py")))
        script = (f"read go; {argv} launch 30 {self.stub} & "
                  f"{argv} launch 17 {self.stub} & wait")
        env = dict(os.environ, LD_LIBRARY_PATH=self.libdir)
        rec = subprocess.Popen([ptg.PTG, "record", "--children", "-o", out, "--", "sh", "-c",
                                script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
        try:
            sh = self.child_with_env(rec.pid)
            # a process of the same user that is not in the set, with the agent and socket
            senv = environ(sh)
            # on the host: a chroot has no copy until a process of the set execs there
            foreign = self.target(ptg.Python(ptg.ONCE) if python.root else python, "launch", 5,
                                  env=senv)
            self.assertEqual(foreign.finish(), 0)
            stdout, stderr = rec.communicate("go\n", timeout=120)
        finally:
            if rec.poll() is None:
                rec.kill()
                rec.wait()
        self.assertEqual(rec.returncode, 0, stderr)
        launched = {int(x.split()[1]): int(x.split()[2]) for x in stdout.splitlines()
                    if x.startswith("launched")}
        self.assertEqual(sorted(launched.values()), [17, 30], stdout)
        states = [x.split() for x in stdout.splitlines() if x.startswith("state")]
        self.assertEqual([s[2] for s in states], [str(ACTIVE)] * 2, stdout)
        self.assertIn(f"pid {foreign.pid} (uid 0) connected to the CUPTI agents' socket and is "
                      "not the target", stderr)
        trace = read_trace(out)
        self.assertEqual(kernels(trace), launched, stderr)
        self.assertEqual(gpu_pids(trace), set(launched))
        self.assertIn("from 2 processes", stderr)
        self.assert_other_root(python, stderr, launched)

    def check_other_root_taken(self, python):
        """-- CMD into a chroot whose /tmp already has a directory at the agent's path: record
        says so and leaves it alone, puts nothing of its own there, and the process runs on
        without GPU activity."""
        if python.root is None:
            self.skipTest("needs a chroot interpreter (its root is not the host's)")
        out = os.path.join(self.tmp.name, "taken.ptg")
        code = ("import ctypes, os\n"
                "try:\n    ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH'])\n"
                "except OSError:\n    print('no agent', flush=True)\n")
        script = f"read go; exec {shlex.join(python.argv('-c', code))}"
        rec = subprocess.Popen([ptg.PTG, "record", "-o", out, "--", "sh", "-c", script],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        planted = None
        try:
            sh = self.child_with_env(rec.pid)
            path = environ(sh)["CUDA_INJECTION64_PATH"]
            # somebody's directory, at the name the copy would take, with nothing in it
            planted = python.root + os.path.dirname(path)
            os.mkdir(planted, 0o755)
            stdout, stderr = rec.communicate("go\n", timeout=120)
        finally:
            if rec.poll() is None:
                rec.kill()
                rec.wait()
        try:
            self.assertEqual(rec.returncode, 0, stderr)
            self.assertEqual(stdout.split("\n")[0], "no agent", stdout + stderr)
            self.assertIn(f"it runs in another root, where {path} cannot be put: "
                          f"/tmp/{os.path.basename(planted)} exists there already", stderr)
            self.assertNotIn("the CUPTI agent is copied to", stderr)
            self.assertEqual(os.listdir(planted), [])
        finally:
            if planted and os.path.isdir(planted):
                os.rmdir(planted)

    def child_with_env(self, pid):
        """The command record started, once it runs with the agent's environment."""
        def child():
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    kids = f.read().split()
                if not kids:
                    return None
                with open(f"/proc/{kids[0]}/environ", "rb") as f:
                    return kids[0] if b"CUDA_INJECTION64_PATH=" in f.read() else None
            except OSError:
                return None
        self.assertTrue(ptg.wait_until(lambda: child() is not None, 60))
        # "read go" is reached once the shell runs: then its environment is final
        time.sleep(0.2)
        return child()

    def check_children_join(self, python):
        """-p P --children: two processes P starts after the attach (fork + exec) get the
        agent injected once they map the driver; P, which never does, gets none."""
        out = os.path.join(self.tmp.name, "join.ptg")
        p = subprocess.Popen(
            python.argv(python.path(os.path.join(self.libdir, "launcher.py")),
                        python.path(os.path.join(self.libdir, "gpu_target.py")),
                        python.path(self.stub)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, LD_LIBRARY_PATH=python.path(self.libdir)))
        try:
            self.assertEqual(p.stdout.readline(), "ready\n")
            rec = ptg.Recorder(["-p", str(p.pid), "--children"], out)
            p.stdin.write("go\n")
            p.stdin.flush()
            launched = {}
            while len(launched) < 2:
                line = p.stdout.readline().split()
                self.assertTrue(line, rec.stderr)
                if line[0] == "launched":
                    launched[int(line[1])] = int(line[2])
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
            rest = p.stdout.read()
            self.assertEqual(p.wait(timeout=60), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdin.close()
            p.stdout.close()
        self.assertEqual(sorted(launched.values()), [12, 21])
        off = {int(x.split()[1]) for x in rest.splitlines() if x.split()[::2] == ["state", "0"]}
        self.assertEqual(off, set(launched), "an agent did not turn CUPTI off: " + rest)
        trace = read_trace(out)
        self.assertEqual(kernels(trace), launched, rec.stderr)
        self.assertEqual(gpu_pids(trace), set(launched))
        for pid in launched:
            self.assertIn(f"recording GPU activity of pid {pid}", rec.stderr)
        self.assertNotIn(f"pid {p.pid} (CUPTI)", rec.stderr)

    def check_cgroup(self, python):
        """--cgroup: a process in the cgroup and one that execs into it while recording
        get the agent; one outside that maps the driver as well gets none."""
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[2] == "cgroup2"]
        if not mounts:
            self.skipTest("no cgroup v2 mounted")
        cg = os.path.join(mounts[0], f"ptg-gpu-{os.getpid()}")
        try:
            os.mkdir(cg)
        except OSError as e:
            self.skipTest(f"cannot make a cgroup in {mounts[0]}: {e}")
        out = os.path.join(self.tmp.name, "cg.ptg")
        try:
            inside, outside = self.target(python, "attach", 20), self.target(python, "attach", 0)
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(inside.pid))
            rec = ptg.Recorder(["--cgroup", cg], out)
            # joins at its exec, started after the attach
            late = self.target(python, "attach", 9, wrap=(
                "sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec "$0" "$@"'))
            for t in (inside, late):
                self.assertEqual(t.until("launched")[0], "launched", rec.stderr)
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
            for t in (inside, late):
                self.assertEqual(t.finish(), 0)
            self.assertFalse(outside.has_agent(), "the agent went into a process outside")
        finally:
            for t in self.targets:
                t.kill()
            os.rmdir(cg)
        self.assertEqual(kernels(read_trace(out)), {inside.pid: 20, late.pid: 9}, rec.stderr)

    def check_one_refused(self, python):
        """-p A,B where B cannot be injected (another tracer holds it): one warning line
        that names B, and A's GPU activity all the same."""
        out = os.path.join(self.tmp.name, "one.ptg")
        a, b = self.target(python, "attach", 15), self.target(python, "attach", 0)
        libc = ctypes.CDLL(None, use_errno=True)
        PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
        self.assertEqual(libc.ptrace(PTRACE_SEIZE, b.pid, None, None), 0,
                         os.strerror(ctypes.get_errno()))
        try:
            rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}"], out)
            self.assertEqual(a.until("launched"), ["launched", str(a.pid), "15"], rec.stderr)
            rec.proc.send_signal(signal.SIGINT)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            rec.proc.stderr.close()
        finally:
            libc.ptrace(PTRACE_DETACH, b.pid, None, None)
        self.assertEqual(a.finish(), 0)
        refused = [x for x in rec.stderr.splitlines() if "no GPU activity" in x]
        self.assertEqual(len(refused), 1, rec.stderr)
        self.assertIn(f"no GPU activity of pid {b.pid}: cannot load the CUPTI agent", refused[0])
        self.assertEqual(kernels(read_trace(out)), {a.pid: 15})

    def check_kill_two_agents(self, python):
        """kill -9 of record with two agents live: both notice, turn CUPTI off, finish."""
        out = os.path.join(self.tmp.name, "killed.ptg")
        a, b = self.target(python, "attach", 300), self.target(python, "attach", 300)
        rec = ptg.Recorder(["-p", f"{a.pid},{b.pid}"], out)
        for t in (a, b):
            self.assertEqual(t.until("state"), ["state", str(t.pid), str(ACTIVE)], rec.stderr)
        time.sleep(0.1)
        rec.proc.kill()
        rec.proc.wait()
        rec.proc.stderr.close()
        for t in (a, b):
            self.assertEqual(t.finish(), 0)
            self.assertIn(["launched", str(t.pid), "300"], t.lines)
            self.assertEqual(t.lines[-1], ["state", str(t.pid), "0"],
                             "the agent did not turn CUPTI off")


if __name__ == "__main__":
    ptg.main()
