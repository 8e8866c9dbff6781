"""`ptrace-gpu inject`: a library loaded into running Python processes through
ptrace (what `record -p` does with the CUPTI agent) runs there, and the
process goes on exactly as before: same output, same exit status, system
calls it was blocked in still complete. Failures leave it unharmed too.
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

BUILD = ptg.BUILD
# inject loads only a file root alone can have written: a build under /tmp is not
MARKER_LIB = ptg.trusted_lib(os.path.join(BUILD, "tests", "libinject_marker.so"))
SLOW_LIB = ptg.trusted_lib(os.path.join(BUILD, "tests", "libinject_slow.so"))

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


def read_trace(path):
    """ptg.Trace, tolerant of bytes that are not UTF-8 in names that are not ours."""
    res = subprocess.run([ptg.PTG, "dump", path], capture_output=True, text=True,
                         errors="replace")
    if res.returncode != 0:
        raise RuntimeError(f"dump {path}: {res.stderr}")
    t = ptg.Trace.__new__(ptg.Trace)
    t.meta, t.losses, t.records = {}, [], []
    for line in res.stdout.splitlines():
        if line.startswith("# lost "):
            t.losses.append(line[7:])
        elif line.startswith("# "):
            key, _, value = line[2:].partition(": ")
            t.meta[key] = value
        else:
            t.records.append(ptg.Trace._parse(line))
    return t


def files(python, pid):
    """What the injected libraries write in the target's /tmp, as the host sees it."""
    return {k: python.on_host(f"/tmp/ptg-inject-{k}.{pid}") for k in ("marker", "call", "slow")}


class Target:
    def __init__(self, python, script, *args, stdin=subprocess.DEVNULL):
        self.proc = subprocess.Popen(python.argv("-c", script, *map(str, args)), stdin=stdin,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline()
        if line != "ready\n":
            self.proc.kill()
            raise RuntimeError(f"target did not start: {line!r}")
        self.files = files(python, self.pid)

    def lines(self, timeout=60):
        # not communicate(): it would skip what readline() has buffered already
        out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        return out.splitlines()

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f:
                f.close()
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
        res = inject(t.pid, MARKER_LIB, "--call", "inject_marker_call",
                     "--arg", "hello")
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
        res = inject(t.pid, MARKER_LIB, "--call", "inject_marker_call",
                     "--arg", "again")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertFalse(os.path.exists(t.files["marker"]))
        self.assertEqual(t.lines()[-1], "99")
        self.assertEqual(t.proc.returncode, 0)
        with open(t.files["call"]) as f:
            self.assertEqual(f.read(), "again")

    def check_two_libraries(self, python):
        """Two libraries, one after the other: the second's memfd gets the fd
        number the first one's had (closed once loaded), and dlopen() returns
        an object already loaded under the same name before it opens
        anything: each is loaded under a name of its own content."""
        t = self.target(python, COUNTER, 300)
        t.proc.stdout.readline()
        res = inject(t.pid, MARKER_LIB)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assert_marker(t)
        res = inject(t.pid, SLOW_LIB)
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(f"/proc/{t.pid}/maps") as f:
            maps = f.read()
        for lib in (MARKER_LIB, SLOW_LIB):
            self.assertIn(os.path.basename(lib), maps)
        self.assertEqual(t.lines()[-1], "299")
        self.assertEqual(t.proc.returncode, 0)

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
        # where both the command and the target see it
        junk = os.path.join(BUILD, "tests", f"ptg-inject-junk.{os.getpid()}.so")
        with open(junk, "w") as f:
            f.write("not an ELF file\n")
        loaded = junk
        try:
            loaded = ptg.trusted_lib(junk)
            res = inject(t.pid, loaded)
        finally:
            os.unlink(junk)
            if loaded != junk:
                os.unlink(loaded)
        self.assertEqual(res.returncode, 1)
        # the target loads a copy made from the file checked, under its name
        self.assertIn(f"dlopen in pid {t.pid} failed: ", res.stderr)
        self.assertIn(os.path.basename(junk), res.stderr)
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


AGENT = ptg.trusted_lib(os.path.join(BUILD, "libptg_cupti.so"))
FAKE_CUPTI = os.path.join(BUILD, "tests", "libinject_fakecupti.so")
CUDA_STUBS = ["/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/lib/stubs/libcuda.so"]

# A CUDA program as far as the agent can tell: NVIDIA's stub driver is mapped
# (so record -p injects), libcupti.so.13 is the stand-in, kernels are
# "launched" through it. argv: mode, kernels, seconds to wait for the agent,
# the stub driver. Modes: launch (call InitializeInjection as cuInit does
# under CUDA_INJECTION64_PATH, launch, exit), attach (wait for record -p,
# launch, wait until the agent has turned CUPTI off), loop (launch every
# 10 ms until a line comes on stdin).
GPU_TARGET = """
import ctypes, os, select, sys, time
ctypes.CDLL(sys.argv[4])
fake = ctypes.CDLL("libcupti.so.13")
mode, n, wait_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if mode == "launch":
    ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()
print("ready", flush=True)

def wait_state(want, secs):
    end = time.time() + secs
    while fake.fakecupti_state() != want and time.time() < end:
        time.sleep(0.01)
    print("state", fake.fakecupti_state(), flush=True)

def launch(i):
    t = time.monotonic_ns()
    corr = fake.fakecupti_launch(b"_Z6kernelPfi" if i % 2 else b"volta_sgemm", 5000)
    print("launch", corr, t, flush=True)
    time.sleep(0.01)

if mode != "loop":
    wait_state(106, wait_s)
    for i in range(n):
        launch(i)
    if mode == "attach":
        wait_state(0, 30)
else:
    i = 0
    while not select.select([sys.stdin], [], [], 0)[0]:
        launch(i)
        i += 1
    wait_state(0, 30)
"""


# The fake libcuda and libcudart (tests/fakecuda) under the stand-in CUPTI:
# each launch is seen by the uprobes and reported by CUPTI from inside it.
JOIN_TARGET = """
import ctypes, os, sys
cupti = ctypes.CDLL("libcupti.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()
helpers = sys.argv[1]
cu = ctypes.CDLL(os.path.join(helpers, "libcuda.so.1"))
rt = ctypes.CDLL(os.path.join(helpers, "libcudart.so.12"))

class dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]

def runtime_launches(n):
    for _ in range(n):
        rt.cudaLaunchKernel(None, dim3(50, 1, 1), dim3(1, 1, 1), None, ctypes.c_size_t(0),
                            ctypes.c_void_p(0))

def driver_launches(n):
    for _ in range(n):
        cu.cuLaunchKernel(None, 300, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(0), None, None)

print("state", cupti.fakecupti_state(), flush=True)
sys.stdin.readline()  # the libraries are probed
runtime_launches(int(sys.argv[2]))
driver_launches(int(sys.argv[3]))
"""


# The stand-in CUPTI's API callbacks, once the agent is in and after up to
# argv[1] seconds of waiting for them to go off.
CALLBACKS_TARGET = """
import ctypes, os, sys, time
cupti = ctypes.CDLL("libcupti.so.13", mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.environ["CUDA_INJECTION64_PATH"]).InitializeInjection()
print("on", cupti.fakecupti_callbacks(), flush=True)
end = time.time() + float(sys.argv[1])
while cupti.fakecupti_callbacks() and time.time() < end:
    time.sleep(0.01)
print("after", cupti.fakecupti_callbacks(), flush=True)
"""


@ptg.once
class TestAgent(unittest.TestCase):
    """The CUPTI agent's real code against a stand-in libcupti: no GPU needed."""

    @classmethod
    def setUpClass(cls):
        cls.stub = next((p for p in CUDA_STUBS if os.path.exists(p)), None)
        if not os.path.exists(AGENT) or cls.stub is None:
            raise unittest.SkipTest("no CUPTI agent in this build (CUPTI not found)")
        cls.libdir = f"/tmp/ptg-fakecupti.{os.getpid()}"
        os.makedirs(cls.libdir, exist_ok=True)
        link = os.path.join(cls.libdir, "libcupti.so.13")
        # a copy, not a link into the build tree: a target of another user must
        # read it however private the build's folders are
        if not os.path.lexists(link):
            shutil.copyfile(FAKE_CUPTI, link)
            os.chmod(link, 0o755)
        cls.env = dict(os.environ, LD_LIBRARY_PATH=cls.libdir)
        # a file, not -c: the trace's cmdline then stays one line
        cls.script = os.path.join(cls.libdir, "gpu_target.py")
        with open(cls.script, "w") as f:
            f.write(GPU_TARGET)
        # the host's 3.11: the stand-in libraries and scripts are in the host's /tmp
        cls.python = next(p for p in map(ptg.Python, ("debian-3.11", "pyenv-3.11"))
                          if not p.missing)

    @classmethod
    def tearDownClass(cls):
        os.unlink(os.path.join(cls.libdir, "libcupti.so.13"))
        os.unlink(cls.script)
        os.rmdir(cls.libdir)

    def setUp(self):
        self.out = f"/tmp/ptg-agent-{os.getpid()}-{self._testMethodName}.ptg"
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdin, p.stdout):
                if f:
                    f.close()
        if os.path.exists(self.out):
            os.unlink(self.out)

    def argv(self, mode, n, wait_s):
        return self.python.argv(self.script, mode, str(n), str(wait_s), self.stub)

    def start_target(self, *args, env=None):
        p = subprocess.Popen(self.argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env or self.env)
        self.procs.append(p)
        self.assertEqual(p.stdout.readline(), "ready\n")
        return p

    def launches(self, lines):
        return [(int(x.split()[1]), int(x.split()[2])) for x in lines if x.startswith("launch")]

    def check_gpu_records(self, trace, launches, pid):
        kernels = [r for r in trace.records if r.kind == "kernel"]
        calls = {r.fields["corr"]: r for r in trace.records if r.kind == "cuda_call"}
        self.assertEqual(len(kernels), len(launches))
        self.assertEqual(len(calls), len(launches))
        start = dict(launches)
        for k in kernels:
            corr = k.fields["corr"]
            # the stand-in stamps the kernel with CLOCK_REALTIME right after the
            # target read CLOCK_MONOTONIC: mapped, it lands just after that
            self.assertGreaterEqual(k.ts, start[corr] - 1000000)
            self.assertLess(k.ts, start[corr] + 20000000)
            self.assertEqual(k.fields["dur"], 5000)
            self.assertEqual(k.pid, pid)
            self.assertEqual(k.name, "kernel(float*, int)" if corr % 2 == 0 else "volta_sgemm")
            call = calls[corr]
            self.assertEqual(call.name, "cudaLaunchKernel")
            self.assertEqual((call.pid, call.tid), (pid, pid))
            self.assertEqual(k.ts - call.ts, 2000)
        self.assertIn("cupti_dropped cpu=-1: 5", trace.losses)
        self.assertEqual(trace.meta.get("cupti.version"), trace.meta.get("cupti.version"))

    def test_launch(self):
        """record -- CMD: CUDA_INJECTION64_PATH names the agent, which InitializeInjection starts."""
        res = subprocess.run([ptg.PTG, "record", "-o", self.out, "--",
                              *self.argv("launch", 20, 5)],
                             capture_output=True, text=True, env=self.env, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        lines = res.stdout.splitlines()
        self.assertEqual(lines[1], "state 106")
        self.assertIn("recording GPU activity of pid", res.stderr)
        self.assertIn("GPU: 20 kernels", res.stderr)
        trace = read_trace(self.out)
        pid = int(trace.meta["pid"])
        self.check_gpu_records(trace, self.launches(lines), pid)
        self.assertIn("cupti.version", trace.meta)

    def test_join_host_calls(self):
        """Probed calls and CUPTI's records of them: one record each, linked by FLOW."""
        script = os.path.join(self.libdir, "join_target.py")
        with open(script, "w") as f:
            f.write(JOIN_TARGET)
        helpers = os.path.join(BUILD, "tests", "helpers")
        rec = subprocess.Popen([ptg.PTG, "record", "-o", self.out, "--",
                                *self.python.argv(script, helpers, "12", "7")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=self.env)
        self.procs.append(rec)
        err, probed = [], 0
        while probed < 2:
            line = rec.stderr.readline()
            self.assertTrue(line, "".join(err))
            err.append(line)
            # only the fake's: CUDA's own may be probed ahead (ld.so.cache); or left
            # unprobed, when the agent's calls came first
            probed += ("cuda: probing" in line or "not probed" in line) and helpers in line
        rec.stdin.write("go\n")
        rec.stdin.flush()
        out, rest = rec.communicate(timeout=120)
        os.unlink(script)
        self.assertEqual(rec.returncode, 0, "".join(err) + rest)
        self.assertEqual(out.splitlines()[0], "state 106")
        trace = read_trace(self.out)
        calls = [r for r in trace.records if r.kind == "cuda_call"]
        flows = [r for r in trace.records if r.kind == "flow"]
        kernels = [r for r in trace.records if r.kind == "kernel"]
        # 12 runtime launches, each with its driver launch inside; 7 driver launches
        names = collections.Counter(r.name for r in calls)
        self.assertEqual(names, {"cudaLaunchKernel": 12, "cuLaunchKernel": 19}, names)
        self.assertTrue(all(r.fields.get("corr", 0) == 0 for r in calls),
                        "a CUPTI record of a probed call was written as a call")
        self.assertEqual(len(flows), 31)
        self.assertEqual(trace.meta.get("cupti.api_joined"), "31")
        self.assertEqual(trace.meta.get("cupti.api_unjoined"), "0")
        # the agent was in before the libraries came: every call from CUPTI's callbacks
        self.assertEqual((trace.meta.get("cuda.calls_cupti"), trace.meta.get("cuda.calls_uprobes")),
                         ("31", "0"))
        by_id = {r.fields["aux3"]: r for r in calls}
        for fl in flows:
            call = by_id[fl.fields["aux3"]]
            self.assertEqual((fl.pid, fl.tid, fl.ts), (call.pid, call.tid, call.ts))
            self.assertEqual(fl.fields.get("aux1", 0), call.fields.get("aux1", 0))
        self.assertEqual(len(kernels), 19)
        flow_corr = {fl.fields["corr"]: by_id[fl.fields["aux3"]] for fl in flows}
        for k in kernels:
            launch = flow_corr[k.fields["corr"]]
            self.assertEqual(launch.name, "cudaLaunchKernel" if k.fields["dur"] == 50000
                             else "cuLaunchKernel")
        report = subprocess.run([ptg.PTG, "report", self.out], capture_output=True, text=True)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn("CUDA calls: 31 from 1 thread (launch 31,", report.stdout)
        fg = subprocess.run([ptg.PTG, "flamegraph", "--weight", "gpu", self.out],
                            capture_output=True, text=True)
        self.assertEqual(fg.returncode, 0, fg.stderr)
        weights = collections.Counter()
        for line in fg.stdout.splitlines():
            stack, _, w = line.rpartition(" ")
            frames = stack.split(";")
            if frames[-1] == "[gpu] fakecuda_kernel":
                weights[frames[-2].split(" ")[0]] += int(w)
        self.assertEqual(weights, {"runtime_launches": 12 * 50000,
                                   "driver_launches": 7 * 300000}, fg.stdout)
        self.check_chrome_links()

    def test_no_cuda_turns_callbacks_off(self):
        """record --no-cuda: the agent, which takes the CUDA calls from CUPTI's
        callbacks for the CUDA probes, is told that nothing reads them, and
        turns them off; by default they stay on."""
        script = os.path.join(self.libdir, "callbacks_target.py")
        with open(script, "w") as f:
            f.write(CALLBACKS_TARGET)
        self.addCleanup(os.unlink, script)
        got = {}
        for flags, wait in ((["--no-cuda"], "10"), ([], "1")):
            res = subprocess.run([ptg.PTG, "record", "-o", self.out, *flags, "--",
                                  *self.python.argv(script, wait)],
                                 capture_output=True, text=True, env=self.env, timeout=120)
            self.assertEqual(res.returncode, 0, res.stderr)
            got[tuple(flags)] = dict((k, int(v)) for k, v in
                                     (line.split() for line in res.stdout.splitlines()))
        self.assertGreater(got[("--no-cuda",)]["on"], 0, got)
        self.assertEqual(got[("--no-cuda",)]["after"], 0, got)
        self.assertEqual(got[()]["after"], got[()]["on"], got)

    def record_cuda_driver(self, *flags):
        """tests/workloads/cuda_driver.py under record -- CMD: its calls, as a trace."""
        helpers = os.path.join(BUILD, "tests", "helpers")
        script = os.path.join(ptg.WORKLOADS, "cuda_driver.py")
        res = subprocess.run([ptg.PTG, "record", "-o", self.out, *flags[1:], "--",
                              *self.python.argv(script, *[f for f in flags[:1] if f],
                                                helpers)],
                             capture_output=True, text=True, env=self.env, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        return read_trace(self.out), res.stderr

    def host_calls(self, trace):
        """Each CUDA call as the reports see it, and the Python function it was made in."""
        stacks, calls = collections.defaultdict(list), []
        for r in trace.records:
            if r.kind == "py_enter":
                stacks[r.tid].append(r.name)
            elif r.kind == "py_exit":
                stacks[r.tid].pop()
            elif r.kind == "cuda_call":
                calls.append((r, (stacks[r.tid] or [None])[-1]))
        return calls

    def check_same_calls(self, uprobes, cupti):
        """The calls of one workload, recorded both ways: same counts per entry point,
        stream, result, bytes, driver flag and Python function; durations at least the
        fake's known costs either way; runtime calls hold their driver call."""
        sys.path.insert(0, ptg.WORKLOADS)
        import cuda_driver as plan

        def key(c):
            r, func = c
            return (r.name, r.fields.get("stream", 0), r.flags, r.fields.get("aux1", 0),
                    r.fields.get("aux2", 0), func)

        a, b = self.host_calls(uprobes), self.host_calls(cupti)
        self.assertEqual(collections.Counter(map(key, b)), collections.Counter(map(key, a)))
        self.assertEqual(len(a), sum(n for *_, n in plan.PLAN) + 8)
        for r, _ in b:
            self.assertNotIn("corr", r.fields, "a host call has no CUPTI correlation id")
            if "Launch" in r.name and "Graph" not in r.name:
                self.assertGreaterEqual(r.fields["dur"], plan.HOST_US * 1000, r.name)
        sync = {(r.name, r.fields.get("stream", 0)): r for r, _ in b
                if r.name == "cuStreamSynchronize" and r.flags == 0}
        self.assertGreaterEqual(sync[("cuStreamSynchronize", plan.STREAM_A)].fields["dur"],
                                plan.PENDING_A * 1000)
        for rt in (r for r, _ in b if r.name == "cudaLaunchKernel"):
            inner = [r for r, _ in b if r.name == "cuLaunchKernel" and r.ts >= rt.ts
                     and r.ts + r.fields["dur"] <= rt.ts + rt.fields["dur"]]
            self.assertEqual(len(inner), 1)
        ids = [r.fields["aux3"] for r, _ in b]
        self.assertEqual(len(set(ids)), len(ids), "one call id per call")
        # the thread blocked in the synchronization: its off-CPU time says so
        off = [r for r in cupti.records if r.kind == "sched"
               and r.fields.get("aux3") == sync[("cuStreamSynchronize", plan.STREAM_A)]
               .fields["aux3"]]
        self.assertTrue(off and all(r.name == "cuStreamSynchronize" for r in off))

    def test_calls_from_cupti(self):
        """The agent in before the CUDA libraries: every call from CUPTI's callbacks,
        none from a uprobe, and the same calls as the uprobes record without it."""
        uprobes, _ = self.record_cuda_driver(None, "--no-cupti")
        total = str(sum(r.kind == "cuda_call" for r in uprobes.records))
        self.assertEqual((uprobes.meta["cuda.calls_uprobes"], uprobes.meta["cuda.calls_cupti"]),
                         (total, "0"))
        cupti, err = self.record_cuda_driver("--cupti")
        self.assertEqual((cupti.meta["cuda.calls_uprobes"], cupti.meta["cuda.calls_cupti"]),
                         ("0", total))
        self.assertIn("not probed: the CUDA calls come from the CUPTI agent", err)
        # (CUDA's own libcudart may be probed ahead, found on the search path, before)
        self.assertNotIn("helpers", cupti.meta.get("cuda.libraries", ""), "no fake probed")
        self.assertEqual(cupti.meta.get("cupti.api_joined"), total)
        self.check_same_calls(uprobes, cupti)

    def test_calls_handed_over(self):
        """The agent comes after the first calls: those from the uprobes, the rest from
        CUPTI, none lost and none twice."""
        uprobes, _ = self.record_cuda_driver(None, "--no-cupti")
        late, err = self.record_cuda_driver("--cupti-late")
        n_up, n_cupti = (int(late.meta[k]) for k in ("cuda.calls_uprobes", "cuda.calls_cupti"))
        self.assertGreaterEqual(n_up, 20, "launch_kernels' calls, before the agent")
        self.assertGreater(n_cupti, 0, err)
        self.check_same_calls(uprobes, late)

    def check_chrome_links(self):
        """The Chrome export links each probed call to its kernel as Kineto does: CUPTI's
        correlation id and cbid on the call, the same correlation id on the kernel."""
        chrome = self.out + ".json"
        res = subprocess.run([ptg.PTG, "export", "--chrome", chrome, self.out],
                             capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(chrome) as f:
            events = json.load(f)["traceEvents"]
        os.unlink(chrome)
        calls = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        cbids = collections.Counter((e["name"], e["args"].get("cbid")) for e in calls)
        self.assertEqual(cbids, {("cudaLaunchKernel", 211): 12, ("cuLaunchKernel", 307): 19},
                         cbids)
        by_corr = {e["args"]["correlation"]: e for e in calls}
        self.assertEqual(len(by_corr), 31)
        self.assertEqual(len(kernels), 19)
        # as in Kineto's traces, only a call that launched something starts an ac2g flow
        # (CUPTI numbers every API call), and every flow that starts ends on a GPU op
        starts = {e["id"] for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
        ends = {e["id"] for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
        self.assertEqual(starts, ends)
        self.assertEqual(ends, {k["args"]["correlation"] for k in kernels})
        for k in kernels:
            self.assertIn(k["args"]["correlation"], by_corr)
            # what CUPTI's kernel record adds, under Kineto's names
            self.assertIn("registers per thread", k["args"])
            self.assertIn("context", k["args"])

    def test_attach(self):
        """record -p: injected, records, and goes quiet when the recording stops."""
        p = self.start_target("attach", 20, 20)
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "1.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        lines = [x.strip() for x in p.stdout]
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(lines[0], "state 106")
        self.assertEqual(lines[-1], "state 0", "the agent did not turn CUPTI off")
        self.check_gpu_records(read_trace(self.out), self.launches(lines), p.pid)

    def test_rerecord(self):
        """A second record -p of the same process: the loaded agent starts again."""
        p = self.start_target("loop", 0, 0)
        counts = []
        for _ in range(2):
            rec = ptg.Recorder(["-p", str(p.pid), "-d", "1"], self.out)
            self.assertEqual(rec.wait(), 0, rec.stderr)
            counts.append(sum(r.kind == "kernel" for r in read_trace(self.out).records))
        p.stdin.write("stop\n")
        p.stdin.flush()
        lines = [x.strip() for x in p.stdout]
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertGreater(counts[0], 10)
        self.assertGreater(counts[1], 10)
        self.assertEqual(lines[-1], "state 0")

    def test_recorder_killed(self):
        """kill -9 of ptrace-gpu: the agent notices, turns CUPTI off, the target goes on."""
        p = self.start_target("attach", 50, 20)
        rec = ptg.Recorder(["-p", str(p.pid)], self.out)
        self.assertEqual(p.stdout.readline().strip(), "state 106")
        time.sleep(0.2)
        rec.proc.kill()
        rec.proc.wait()
        lines = [x.strip() for x in p.stdout]
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(len(self.launches(lines)), 50)
        self.assertEqual(lines[-1], "state 0")

    def test_busy(self):
        """Another CUPTI client holds CUPTI: one warning, host-side data only."""
        env = dict(self.env, FAKECUPTI_BUSY="1")
        res = subprocess.run([ptg.PTG, "record", "-o", self.out, "--",
                              *self.argv("launch", 3, 1)],
                             capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("another CUPTI client", res.stderr)
        self.assertIn("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", res.stderr)
        self.assertEqual(sum(r.kind == "kernel" for r in read_trace(self.out).records), 0)

    def test_no_cupti(self):
        """--no-cupti: nothing is loaded into the target."""
        p = self.start_target("loop", 0, 0)
        rec = ptg.Recorder(["-p", str(p.pid), "-d", "0.5", "--no-cupti"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        with open(f"/proc/{p.pid}/maps") as f:
            self.assertNotIn("libptg_cupti", f.read())
        p.stdin.write("stop\n")
        p.stdin.flush()
        self.assertEqual(p.wait(timeout=30), 0)

    def test_no_cuda(self):
        """A target without CUDA: no injection at all, and the recording is as before."""
        t = Target(self.python, BLOCKED_READ, stdin=subprocess.PIPE)
        self.procs.append(t.proc)
        rec = ptg.Recorder(["-p", str(t.pid), "-d", "0.5"], self.out)
        self.assertEqual(rec.wait(), 0, rec.stderr)
        with open(f"/proc/{t.pid}/maps") as f:
            self.assertNotIn("libptg_cupti", f.read())
        self.assertNotIn("CUPTI", rec.stderr)
        t.proc.stdin.write("ping\n")
        t.proc.stdin.flush()
        self.assertEqual(t.lines(), ["got ping"])
        self.assertEqual(t.proc.returncode, 0)


@ptg.once
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
