"""CUDA host-side probes on the fake driver and runtime (tests/fakecuda).

The workload maps the libraries only after recording started (dlopen through
ctypes, as PyTorch maps libcuda at its first CUDA call), then makes a known
number of calls per entry point on known streams. Checked in both `-p` and
`-- CMD` mode: exact counts per entry point and stream, durations at least the
fake's known sleeps, result codes, sizes, runtime calls with their driver call
nested inside, the Python function around each call, and the off-CPU time of
a blocking synchronization attributed to that call.
"""
# ptg: per build (tests/CMakeLists.txt): 3.11, a shared libpython, the newest CPython
import collections
import glob
import os
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

import ptg

sys.path.insert(0, ptg.WORKLOADS)
import cuda_driver as plan  # noqa: E402

LIBDIR = os.path.join(ptg.BUILD, "tests", "helpers")
SCRIPT = os.path.join(ptg.WORKLOADS, "cuda_driver.py")
CUDA_LIB = "/usr/local/cuda/lib64"
US = 1000
# The share of cuStreamSynchronize(A)'s pending time its thread spends blocked
# inside it. tests/kernels/guest.py lowers it: under TCG a guest's clock is the
# host's, and on a busy host its thread can be preempted for milliseconds of
# that clock between arming its wait and blocking (23 of 28 ms blocked, on
# sid with preempt=full beside the host's tests).
BLOCKED_SHARE = 0.9

# Runtime call -> the driver call the fake runtime makes inside it.
NESTED = {
    "cudaLaunchKernel": "cuLaunchKernel",
    "cudaLaunchKernelExC": "cuLaunchKernelEx",
    "cudaMemcpyAsync": "cuMemcpyAsync",
    "cudaStreamSynchronize": "cuStreamSynchronize",
}


class Trace(ptg.Trace):
    """ptg.Trace, tolerant of names that are not UTF-8: module code objects read
    while the interpreter starts can come out garbled (pyframe's business, not
    this test's)."""

    def __init__(self, path):
        run = ptg.run
        ptg.run = lambda args, **kw: run(args, errors="replace", **kw)
        try:
            super().__init__(path)
        finally:
            ptg.run = run


def expected_calls():
    """(api, stream) -> count, and api -> the Python function that calls it."""
    counts, funcs = collections.Counter(), {}
    for api, func, stream, n in plan.PLAN:
        counts[(api, stream)] += n
        funcs[(api, stream)] = func
        if api in NESTED:
            counts[(NESTED[api], stream)] += n
            funcs[(NESTED[api], stream)] = func
    return counts, funcs


def python_stacks(trace):
    """Replays enter/exit: each cuda_call and sched record with its tid's Python stack."""
    stacks = collections.defaultdict(list)
    out = []
    for r in trace.records:
        if r.kind == "py_enter":
            stacks[r.tid].append(r.name)
        elif r.kind == "py_exit":
            stacks[r.tid].pop()
        elif r.kind in ("cuda_call", "sched"):
            out.append((r, list(stacks[r.tid])))
    return out


def kill_group(proc):
    """Kills proc's process group: record and, under -- CMD, the command that
    shares its stderr (started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


FAKE_LIBS = ("libcuda.so.1", "libcudart.so.12")


def probed(rec, name):
    """Whether record said it probed a library whose file name starts with
    name, now or ahead."""
    return any("cuda: probing" in x and x.rpartition("/")[2].startswith(name)
               for x in "".join(rec.lines).splitlines())


def wait_for_probes(rec, names=FAKE_LIBS, timeout=60):
    """Reads record's stderr until it says it probed the libraries named (a
    library on the target's search path, as CUDA's own in ld.so.cache, is
    probed ahead, before the gate); kills record if it has not within timeout
    seconds (instead of hanging)."""
    timer = threading.Timer(timeout, kill_group, (rec.proc,))
    timer.start()
    try:
        while not all(probed(rec, n) for n in names):
            line = rec.proc.stderr.readline()
            if not line:
                raise AssertionError(f"record ended (or was killed after {timeout} s) "
                                     "before probing: " + rec.stderr)
            rec.lines.append(line)
    finally:
        timer.cancel()


def go(stdin):
    stdin.write("go\n")
    stdin.flush()


class CudaHost(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "cuda.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def release_after_load(self, rec, stdin, stdout, names=FAKE_LIBS, late=FAKE_LIBS):
        """The workload loads the libraries once released; probed, it goes on.
        Those of late, loaded by a path on no search path, are probed only then."""
        for name in late:
            self.assertFalse(probed(rec, name), f"{name} probed before the gate: " + rec.stderr)
        go(stdin)
        self.assertEqual(stdout.readline().strip(), "loaded")
        wait_for_probes(rec, names)
        go(stdin)

    def record_attached(self, python):
        w = ptg.Workload(python, "cuda_driver.py", python.path(LIBDIR))
        try:
            rec = ptg.Recorder(["-p", str(w.pid)], self.out, start_new_session=True)
            with open(f"/proc/{w.pid}/maps") as f:
                self.assertNotIn("libcuda.so.1", f.read())
            self.release_after_load(rec, w.proc.stdin, w.proc.stdout)
            self.assertIn("done", w.finish())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            w.kill()
        self.stderr = rec.stderr
        return w.pid, Trace(self.out)

    def record_command(self, python):
        argv = python.argv(python.path(SCRIPT), "--wait", python.path(LIBDIR))
        rec = ptg.Recorder(["--", *argv], self.out, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           start_new_session=True)
        try:
            self.assertTrue(rec.proc.stdout.readline().startswith("ready"))
            self.release_after_load(rec, rec.proc.stdin, rec.proc.stdout)
            self.assertIn("done", rec.proc.stdout.read())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            if rec.proc.poll() is None:
                rec.proc.kill()
                rec.proc.wait()
            for f in (rec.proc.stdin, rec.proc.stdout, rec.proc.stderr):
                f.close()
        self.stderr = rec.stderr
        return int(Trace(self.out).meta["pid"]), Trace(self.out)

    def verify_trace(self, pid, trace, held=False):
        # code objects freed at interpreter exit may go unread: not this test's concern
        lost = [x for x in trace.losses if not x.startswith("py_code_unresolved")]
        # the runtime is loaded by full path from a folder on no search path, so
        # probed at the loader's notice. -p (not held): record cannot know that
        # no call came before, and says so; the driver it loads through its
        # RUNPATH is too, unless that notice came in time to probe it ahead.
        # -- CMD: the command's main thread is held (until its first op), so it
        # waits at the notice until probed, and nothing is missing.
        # (before 6.7, one line says the kernel cannot show mappings: no window)
        notes = [x for x in self.stderr.splitlines()
                 if "libwatch:" in x and "cannot see what a process has mapped" not in x]
        if held:
            self.assertTrue([x for x in notes if "/libcudart.so.12 from outside its search "
                             "path: it waited at the loader's notice" in x], self.stderr)
            self.assertNotIn("warning: libwatch", self.stderr)
            self.assertEqual(lost, [], "nothing lost")
        else:
            self.assertTrue([x for x in notes if "/libcudart.so.12 was loaded" in x],
                            self.stderr)
            self.assertEqual(lost, [f"lib_unprobed_window cpu=-1: {len(notes)}"],
                             "nothing else lost")
        libs = trace.meta["cuda.libraries"]
        self.assertIn("libcuda.so.1", libs)
        self.assertIn("libcudart.so.12", libs)
        calls = [r for r in trace.records if r.kind == "cuda_call"]
        counts, funcs = expected_calls()
        got = collections.Counter((r.name, r.fields.get("stream", 0)) for r in calls)
        self.assertEqual(got, counts)
        self.assertTrue(all(r.tid == pid and r.pid == pid for r in calls), "main thread")
        ids = [r.fields["aux3"] for r in calls]
        self.assertEqual(len(set(ids)), len(ids), "one call id per call")
        self.assertTrue(all(i > 0 for i in ids))
        self.verify_durations(calls)
        self.verify_fields(calls)
        self.verify_nesting(calls)
        self.verify_stacks(trace, funcs)
        self.verify_blocked_sync(trace, calls)

    def verify_durations(self, calls):
        for r in calls:
            dur = r.fields.get("dur", 0)
            self.assertLess(dur, 10 * 10**9, r.name)
            if "Launch" in r.name and "Graph" not in r.name:
                self.assertGreaterEqual(dur, plan.HOST_US * US, r.name)
        sync = {(r.name, r.fields.get("stream", 0)): r.fields["dur"] for r in calls
                if r.name.endswith("StreamSynchronize") and r.flags == 0}
        self.assertGreaterEqual(sync[("cuStreamSynchronize", plan.STREAM_A)],
                                plan.PENDING_A * US)
        self.assertGreaterEqual(sync[("cuStreamSynchronize", plan.STREAM_B)],
                                plan.PENDING_B * US)
        self.assertGreaterEqual(sync[("cuStreamSynchronize", plan.STREAM_RT)],
                                plan.PENDING_RT * US)
        self.assertGreaterEqual(sync[("cudaStreamSynchronize", plan.STREAM_RT)],
                                plan.PENDING_RT * US)
        ev = [r for r in calls if r.name == "cuEventSynchronize"]
        self.assertGreaterEqual(ev[0].fields["dur"], plan.EVENT_US * US)

    def verify_fields(self, calls):
        for r in calls:
            failed = r.fields.get("stream") == plan.BAD_STREAM
            self.assertEqual(r.flags, 400 if failed else 0, f"result of {r.name}")
            driver = not r.name.startswith("cuda")
            self.assertEqual(r.fields.get("aux1", 0), int(driver), f"driver flag of {r.name}")
            self.assertNotIn("corr", r.fields, "host-side calls have no CUPTI correlation")
            if "Memcpy" in r.name:
                self.assertEqual(r.fields.get("aux2"), plan.COPY_BYTES, r.name)
            elif r.name == "cuMemsetD32Async":
                self.assertEqual(r.fields.get("aux2"), plan.SET_ELEMS * 4)
            else:
                self.assertNotIn("aux2", r.fields, r.name)

    def verify_nesting(self, calls):
        runtime = [r for r in calls if r.name in NESTED]
        for rt in runtime:
            end = rt.ts + rt.fields["dur"]
            inner = [r for r in calls if r.name == NESTED[rt.name] and r.ts >= rt.ts
                     and r.ts + r.fields.get("dur", 0) <= end]
            self.assertEqual(len(inner), 1, f"one driver call inside {rt.name}")
            self.assertGreater(inner[0].fields["aux3"], rt.fields["aux3"])

    def verify_stacks(self, trace, funcs):
        for r, stack in python_stacks(trace):
            if r.kind != "cuda_call":
                continue
            want = funcs[(r.name, r.fields.get("stream", 0))]
            self.assertEqual(stack[-1:], [want], f"{r.name} called from {want}")
            self.assertIn("main", stack)

    def verify_blocked_sync(self, trace, calls):
        """The thread blocked in cuStreamSynchronize(A): its off-CPU time says so."""
        sync = [r for r in calls if r.name == "cuStreamSynchronize"
                and r.fields.get("stream") == plan.STREAM_A][0]
        off = [(r, stack) for r, stack in python_stacks(trace) if r.kind == "sched"
               and r.fields.get("aux3") == sync.fields["aux3"]]
        self.assertTrue(off, "off-CPU intervals inside the synchronization")
        for r, stack in off:
            self.assertEqual(r.name, "cuStreamSynchronize")
            self.assertEqual(r.tid, sync.tid)
            self.assertGreaterEqual(r.ts, sync.ts)
            self.assertLessEqual(r.ts + r.fields["dur"], sync.ts + sync.fields["dur"])
            self.assertEqual(stack[-1], "wait_for_gpu")
        blocked = sum(r.fields["dur"] for r, _ in off if r.fields.get("aux0") == 2)
        self.assertGreaterEqual(blocked, BLOCKED_SHARE * plan.PENDING_A * US)

    def verify_report(self):
        res = ptg.run(["report", self.out])
        self.assertEqual(res.returncode, 0, res.stderr)
        counts, _ = expected_calls()
        total = sum(counts.values())
        launches = sum(n for (api, _), n in counts.items()
                       if "Launch" in api and "Graph" not in api)
        self.assertIn(f"CUDA calls: {total} from 1 thread (launch {launches}, graph 1, ",
                      res.stdout)
        self.assertRegex(res.stdout, r"\n  cuLaunchKernel +14 calls ")

    def check_attached(self, python):
        pid, trace = self.record_attached(python)
        self.verify_trace(pid, trace)
        self.verify_report()

    def check_command(self, python):
        pid, trace = self.record_command(python)
        self.verify_trace(pid, trace, held=True)

    def check_real_libraries(self, python):
        """NVIDIA's libcudart and driver stub, where installed, on a machine with
        no driver (a real driver would run the bogus launches)."""
        rt = sorted(glob.glob(os.path.join(CUDA_LIB, "libcudart.so.*")))
        stub = os.path.join(CUDA_LIB, "stubs", "libcuda.so")
        if not rt or not os.path.exists(stub) or os.path.exists("/dev/nvidiactl"):
            self.skipTest("needs CUDA's libcudart and stub libcuda, and no NVIDIA driver")
        if python.root:
            self.skipTest(f"CUDA's libraries are on the host, not in {python.root}")
        script = os.path.join(ptg.WORKLOADS, "cuda_real.py")
        rec = ptg.Recorder(["--", *python.argv(script, "--wait", rt[-1], stub)], self.out,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        try:
            self.assertTrue(rec.proc.stdout.readline().startswith("ready"))
            # the runtime may be in the host's ld.so.cache, and then is probed ahead
            self.release_after_load(rec, rec.proc.stdin, rec.proc.stdout,
                                    ("libcudart.so", "libcuda.so"), ("libcuda.so",))
            self.assertIn("done", rec.proc.stdout.read())
            self.assertEqual(rec.wait(), 0, rec.stderr)
        finally:
            if rec.proc.poll() is None:
                rec.proc.kill()
                rec.proc.wait()
            for f in (rec.proc.stdin, rec.proc.stdout, rec.proc.stderr):
                f.close()
        calls = [r for r in Trace(self.out).records if r.kind == "cuda_call"]
        got = collections.Counter((r.name, r.fields.get("stream", 0)) for r in calls)
        # the runtime fails before it reaches a driver: no nested driver calls
        self.assertEqual(got, {("cudaLaunchKernel", 0x1234): 3,
                               ("cudaStreamSynchronize", 0x1234): 1,
                               ("cuLaunchKernel", 0x5678): 3,
                               ("cuStreamSynchronize", 0x5678): 1})
        self.assertTrue(all(r.flags != 0 for r in calls), "every call failed")
        self.assertEqual({r.flags for r in calls if r.name.startswith("cu") and
                          not r.name.startswith("cuda")}, {34}, "CUDA_ERROR_STUB_LIBRARY")

    def check_no_cuda(self, python):
        res = ptg.run(["record", "--no-cuda", "-o", self.out, "--",
                       *python.argv(python.path(SCRIPT), python.path(LIBDIR))])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertNotIn("cuda: probing", res.stderr)
        trace = Trace(self.out)
        self.assertFalse([r for r in trace.records if r.kind == "cuda_call"])
        self.assertNotIn("cuda.libraries", trace.meta)


ptg.per_interpreter(CudaHost)

if __name__ == "__main__":
    ptg.main()
