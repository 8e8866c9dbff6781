"""The kernel matrix's checks: run inside a guest kernel by tools/kmatrix.sh
(ctest's kernel.SUITE tests), the real binary against real processes.

  tools/kmatrix.sh [-a preempt=full] SUITE -- python3 tests/kernels/guest.py [--part=N] [NAME...]

NAMEs (the start or the end of the check names below: "a.", "f", "pyenv-3.12")
select checks; by default all run. --part=1 or --part=2: one of two halves
(lanes(), below), for a kernel that ctest boots twice:

  a.record_pid.PY   record --uprobes -p: exact call counts of mixed.py == its
                    sys.setprofile oracle, on Debian's 3.11, a pyenv 3.12 (or 3.13)
                    and one chroot interpreter (3.14 or 3.13) of tools/make-chroots.sh
                    where present
  a.record_pid_inprocess.PY
                    the same by record -p's default: the agent injected into the target
  b.record_cmd.PY   record -- CMD: the same counts, from the command's first call,
                    the uprobes until its script starts and the agent after
  c.sample.PY       sample: every sampled stack one the workload can have
  d.off_cpu.PY      off-CPU intervals of sleeps and of a read woken by a thread
  e.cuda.PY         the CUDA probes on the fake driver and runtime (tests/fakecuda)
  f.torch_ops.PY    the op probes on Debian's python3-torch == torch.profiler's counts
  g.children.PY     record --children: a process tree, exact calls per process
  g.children_mixed.PY
                    record --children -- CMD of mixed.py: b's exact counts, with
                    the probes on the interpreter's file
  h.preempt_pinned.PY
                    on a kernel with preempt=full, where uprobe programs can be
                    preempted: two processes pinned to one CPU, recorded at once
                    by one recorder, exact counts and names for each
  i.check          ptrace-gpu check: each feature line agrees with this kernel
                    (bpftool's probes, its BTF, the verifier), the exit status
                    with the lines (1 before bpf_loop, 5.17: bullseye's 5.10)

Most reuse the integration tests' own checks (tests/integration). Under QEMU's
TCG everything runs about ten times slower and the verifier needs seconds per
recording, so the workloads are small and the checks run in two lanes at once
(the guest has two CPUs). Each check prints one line, PASS, FAIL or SKIP with
the reason and its time; the last line says "N passed, N failed, N skipped".
Exit status: 1 when a check failed, 77 when all were skipped, else 0.
"""
import collections
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
sys.path.insert(0, HERE)

import ptg  # noqa: E402

_run = ptg.run


def _tolerant_run(args, **kw):
    """ptg.run, tolerant of names that are not UTF-8: module code objects
    read while an interpreter starts can come out garbled (as test_sched's
    and test_cuda_host's Trace say: pyframe's business, not these checks')."""
    kw.setdefault("errors", "replace")
    return _run(args, **kw)


ptg.run = _tolerant_run

import naps  # noqa: E402


def integration(name):
    """The module of tests/integration/NAME.py, for its checks. Imported only
    where needed: they select their interpreters as they are imported
    (ptg.selected()), which, with no PTG_PYTHON, imports torch in each one
    to see which have it (20 s and more each here); one that is here, named,
    stops that."""
    if name not in sys.modules:
        os.environ["PTG_PYTHON"] = next(
            (n for n in ptg.INTERPRETERS if not ptg.Python(n).missing), ptg.ONCE)
        try:
            importlib.import_module(name)
        finally:
            del os.environ["PTG_PYTHON"]
    return sys.modules[name]


MIXED = os.path.join(ptg.WORKLOADS, "mixed.py")
NAPS = os.path.join(HERE, "naps.py")
PINNED = os.path.join(HERE, "pinned.py")
TORCH_STEPS = os.path.join(HERE, "torch_steps.py")
NS = 10**9
# record's options where neither ops nor CUDA calls are checked: with
# Debian's 3.11, whose search path has libtorch, record would probe its
# ~3000 ops ahead (seconds here), and load the CUDA and op programs (more
# seconds of verifier); checks e and f load them, a uses the defaults.
LEAN = ("--no-ops", "--no-cuda")
PREEMPTED, BLOCKED = 1, 2  # a sched record's aux0, as test_sched.py has them


def preempt_mode():
    """The kernel's preemption model (none, voluntary, full, lazy), or None."""
    try:
        with open("/sys/kernel/debug/sched/preempt") as f:
            m = re.search(r"\((\w+)\)", f.read())
            if m:
                return m.group(1)
    except OSError:
        pass
    with open("/proc/cmdline") as f:
        m = re.search(r"(?:^|\s)preempt=(\w+)", f.read())
    return m.group(1) if m else None


def first_present(*names):
    """The first of these interpreters that is here (else the first, missing)."""
    pythons = [ptg.Python(n) for n in names]
    return next((p for p in pythons if not p.missing), pythons[0])


def need(test, python):
    if python.missing:
        test.skipTest(f"{python}: {python.missing}")


def borrow(cls, method, *args):
    """Runs check METHOD of an integration test class (cls) with args, on
    an instance of its own, setUp and tearDown included."""
    t = cls(method)
    t.setUp()
    try:
        getattr(t, method)(*args)
    finally:
        t.tearDown()
        t.doCleanups()


def scratch(test):
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    return tmp.name


def record_attached(test, python, script, args=(), rec_args=()):
    """record -p of SCRIPT ARGS started with --wait, until it exits: its pid and trace."""
    out = os.path.join(scratch(test), "run.ptg")
    w, rec = ptg.Workload(python, script, *args), None
    try:
        rec = ptg.Recorder(["-p", str(w.pid), *rec_args], out)
        w.go()
        test.assertIn("done", w.finish())
        test.assertEqual(rec.wait(), 0, rec.stderr)
    finally:
        w.close(rec)
    return w.pid, ptg.Trace(out)


# --- the checks: functions of (test, args...) ---------------------------------

def record_pid(test, python, rec_args=("--uprobes",)):
    """mixed.py under record -p, by the uprobes (what the kernel runs) unless
    REC_ARGS say otherwise: the calls of its run() are the oracle's."""
    need(test, python)
    oracle = ptg.oracle(python, "mixed.py")
    _, trace = record_attached(test, python, "mixed.py", rec_args=rec_args)
    test.assertEqual(ptg.as_oracle(trace.count("mixed.py"), oracle), oracle)


def record_cmd(test, python, rec_args=()):
    """mixed.py under record -- CMD: the calls made inside its run() are the
    oracle's, and its module ran once, recorded from the first call. With
    --children the probes sit on the interpreter's file and find _PyRuntime
    from their own address (before 6.6, from the trap's ip: bpf_get_func_ip
    knew no uprobes), and mixed.py's exceptions that C code swallows reach
    the eval loop's return probe."""
    need(test, python)
    oracle = ptg.oracle(python, "mixed.py")
    out = os.path.join(scratch(test), "cmd.ptg")
    res = ptg.run(["record", "-o", out, *LEAN, *rec_args, "--",
                   *python.argv(python.path(MIXED))])
    test.assertEqual(res.returncode, 0, res.stderr)
    test.assertIn("done", res.stdout)
    trace = ptg.Trace(out)
    test.assertEqual(trace.losses, [], "events were lost")
    calls = [c for c in trace.calls() if c[2].endswith("/mixed.py")]
    runs = [c for c in calls if c[1] == "run"]
    test.assertEqual(len(runs), 1, "run() once")
    tid, start, end = runs[0][0], runs[0][4], runs[0][5]
    got = collections.Counter(f"{c[1]}:{c[3]}" for c in calls
                              if c[0] == tid and start <= c[4] <= end
                              and not c[6] & ptg.ENTER_RESUME)
    test.assertEqual(dict(got), oracle)
    test.assertEqual(len([c for c in calls if c[1] == "<module>"]), 1, "the module once")
    # by default the uprobes until its script starts, the agent after (py_audit
    # stops its main thread there); --children keeps the uprobes
    if not rec_args:
        test.assertIn("python calls in-process from its script's start", res.stderr)


def sample(test, python):
    need(test, python)
    borrow(integration("test_sample").SampleStacks, "check_stacks", python)


def off_cpu(test, python):
    """naps.py: each sleep blocked inside nap(), the read blocked until the
    feeder thread wrote the pipe (and woke it)."""
    need(test, python)
    pid, trace = record_attached(test, python, NAPS, rec_args=LEAN)
    lost = [x for x in trace.losses if x.startswith(("sched", "py_event", "py_stack"))]
    test.assertEqual(lost, [])
    spans, off = integration("test_sched").analyse(trace)
    for records in off.values():
        for r, _ in records:
            test.assertIn(r.fields.get("aux0"), (PREEMPTED, BLOCKED))
            test.assertGreater(r.fields.get("dur", 0), 0)
            test.assertEqual(r.pid, pid)
    (start, end), = spans[pid]["naps"]
    inside = [r for r, _ in off[pid] if start <= r.ts < end]
    seen = [(r.ts - start, r.fields) for r in inside]
    away = sum(r.fields["dur"] for r in inside)
    test.assertGreaterEqual(away, 0.9 * naps.NAPS * naps.NAP_S * NS, seen)
    test.assertLessEqual(away, end - start, seen)
    # each sleep blocked inside its nap(): mostly in one interval, but under
    # TCG the thread can be preempted, and even run for milliseconds of
    # emulated time, between arming its timer and blocking; the more so
    # while the host is busy (a guest's clock is the host's: 8 ms preempted
    # and 37 of 50 ms blocked on 5.10 beside the host's tests)
    test.assertEqual(len(spans[pid]["nap"]), naps.NAPS, "nap() once per sleep")
    for nap_start, nap_end in spans[pid]["nap"]:
        mine = [r for r in inside if nap_start <= r.ts < nap_end]
        where = f"a sleep blocked inside its nap() at {nap_start - start}: {seen}"
        test.assertTrue(any(r.fields["aux0"] == BLOCKED for r in mine), where)
        test.assertGreaterEqual(sum(r.fields["dur"] for r in mine), 0.5 * naps.NAP_S * NS,
                                where)
    feeders = [tid for tid, funcs in spans.items() if "feed" in funcs]
    test.assertEqual(len(feeders), 1, "one thread ran feed()")
    (start, end), = spans[pid]["read_pipe"]
    waits = [r for r, _ in off[pid] if start <= r.ts < end and r.fields["aux0"] == BLOCKED]
    test.assertTrue(waits, "read_pipe() blocked")
    wait = max(waits, key=lambda r: r.fields["dur"])
    test.assertGreaterEqual(wait.fields["dur"], 0.5 * naps.PIPE_DELAY_S * NS)
    test.assertEqual(wait.fields.get("aux2"), feeders[0], "the feeder woke the reader")


def check_cmd(test):
    """As test_check.py's root check, in this kernel; and before bpf_loop (5.17)
    record runs degraded (the legacy programs), so check exits 1."""
    tc = integration("test_check")
    borrow(tc.Check, "test_root_lines_agree")
    res = tc.check("--no-trap")
    lines = tc.lines_of(res.stdout)
    if tc.kernel_version() < (5, 17):
        test.assertEqual(tc.status_of(lines, "bpf_loop (5.17)"), "degraded", res.stdout)
        test.assertEqual(res.returncode, 1, res.stdout)


def cuda(test, python):
    need(test, python)
    host = integration("test_cuda_host")
    host.BLOCKED_SHARE = 0.5  # its thread preempted before it blocks: see there
    borrow(host.CudaHost, "check_attached", python)


# Op counts that torch.profiler and the probes cannot agree on: as
# test_torch_ops.py's DISAGREE and UNOBSERVED (see the reasons there).
DISAGREE = {"aten::div_"}
UNOBSERVED = {"aten::size", "aten::is_leaf", "aten::output_nr", "aten::_version",
              "aten::is_complex"}


def op_calls(trace):
    """(name, parent op, Python stack) of each op of the trace, replayed per thread."""
    stacks, calls = collections.defaultdict(list), []
    for r in trace.records:
        if r.kind in ("py_enter", "op_enter"):
            stacks[r.tid].append(r)
        elif r.kind in ("py_exit", "op_exit"):
            st = stacks[r.tid]
            if not st:
                raise AssertionError(f"exit without enter on tid {r.tid} at {r.ts}")
            e = st.pop()
            if (e.kind == "op_enter") != (r.kind == "op_exit"):
                raise AssertionError(f"{r.kind} closes a {e.kind} on tid {r.tid} at {r.ts}")
            if e.kind == "op_enter":
                parent = next((x.name for x in reversed(st) if x.kind == "op_enter"), None)
                calls.append((e.name, parent, [x.name for x in st if x.kind == "py_enter"]))
    return calls


class TorchSteps:
    """torch_steps.py started ahead (importing torch takes 20 s and more
    here), to be released by torch_ops(); or why it could not start."""

    STEPS = 3

    def __init__(self, python):
        self.python, self.workload, self.why = python, None, python.missing
        if self.why:
            return
        res = subprocess.run(python.argv("-c", "import importlib.util as u, sys; "
                                         "sys.exit(u.find_spec('torch') is None)"))
        if res.returncode:
            self.why = f"no PyTorch in {python}"
            return
        try:
            self.workload = ptg.Workload(python, TORCH_STEPS, "--steps", str(self.STEPS))
        except RuntimeError as e:
            self.why = str(e)


def torch_ops(test, steps):
    """record -p --ops-from probes of steps of training: every aten op as
    torch.profiler counts the same steps, nested as torch nests them."""
    if steps.why:
        test.skipTest(steps.why)
    w, rec, n = steps.workload, None, TorchSteps.STEPS
    out = os.path.join(scratch(test), "ops.ptg")
    try:
        rec = ptg.Recorder(["-p", str(w.pid), "--ops-from", "probes"], out)
        w.go()
        test.assertEqual(w.proc.stdout.readline().strip(), "trained")
        rec.proc.send_signal(signal.SIGINT)
        test.assertEqual(rec.wait(), 0, rec.stderr)
        w.go()
        line = w.proc.stdout.readline()
        test.assertTrue(line.startswith("oracle "), line)
        theirs = {k: v for k, v in json.loads(line[7:]).items() if k.startswith("aten::")}
        test.assertIn("done", w.finish())
    finally:
        w.close(rec)
    trace = ptg.Trace(out)
    test.assertEqual(trace.losses, [], "events were lost")
    test.assertEqual(trace.meta["ops.source"], "uprobes")
    calls = [c for c in op_calls(trace) if "train" in c[2]]
    ours = collections.Counter(c[0] for c in calls)
    nested = collections.Counter(c[0] for c in calls if c[0] == c[1])
    test.assertGreater(len(theirs), 20, theirs)
    test.assertEqual({k for k in ours if not k.startswith("aten::")}, set())
    for name in sorted(set(ours) | set(theirs)):
        mine, torch_n = ours.get(name, 0), theirs.get(name, 0)
        if name in DISAGREE:
            test.assertLessEqual(torch_n, mine, name)
            test.assertGreaterEqual(torch_n, mine - nested[name], name)
        elif name in UNOBSERVED:
            test.assertEqual(torch_n, 0, name)
        else:
            test.assertEqual(mine, torch_n, f"{name}: ptrace-gpu {mine}, torch.profiler {torch_n}")
    children = collections.Counter(c[0] for c in calls if c[1] == "aten::linear")
    test.assertEqual((children["aten::addmm"], children["aten::t"]), (2 * n, 2 * n))
    linear = [c for c in calls if c[0] == "aten::linear"]
    test.assertEqual(len(linear), 2 * n)
    test.assertTrue(all(c[2][-1:] == ["Linear.forward"] for c in linear), "under Linear.forward")


def named_refusal(test, func, *args):
    """FUNC(test, *ARGS), where record may refuse with its one line for a
    feature this kernel lacks ("needs X (Linux 5.15); this kernel is ..."):
    a skip with that line when the kernel is older than the version it
    names, a failure otherwise."""
    try:
        func(test, *args)
    except AssertionError as e:
        m = re.search(r"(\S+: .*needs .* \(Linux (\d+)\.(\d+)\)[^\n]*)", str(e))
        have = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
        if m and have < (int(m.group(2)), int(m.group(3))):
            test.skipTest(m.group(1).strip())
        raise


def children(test, python):
    need(test, python)
    borrow(integration("test_tree").Tree, "check_children_of_command", python)


class Pinned(ptg.Workload):
    """pinned.py ROLE --wait, run by taskset on one CPU."""

    def __init__(self, python, role, cpu):
        argv = python.argv(python.path(PINNED), role, "--wait")
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), *argv], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready"):
            self.kill()
            raise RuntimeError(f"pinned.py {role} did not start: {line!r}")
        self.pid = self.proc.pid


def preempt_pinned(test, python, explicit=False):
    """Two processes on one CPU, traced by one recorder (the same programs,
    per-CPU maps and ring): on a preemptible kernel one's uprobe program
    is preempted by the other's. Each one's calls exact, under its own names.
    Skipped on other kernels, unless named on the command line (explicit)."""
    mode = preempt_mode()
    if mode != "full" and not explicit:
        test.skipTest(f"the kernel runs preempt={mode or 'unknown'}, not full "
                      "(tools/kmatrix.sh -a preempt=full)")
    need(test, python)
    roles = ("alpha", "beta")
    oracles = {role: json.loads(subprocess.run(
        python.argv(python.path(PINNED), role, "--oracle"), check=True, capture_output=True,
        text=True).stdout) for role in roles}
    cpu = min(os.sched_getaffinity(0))
    ws = []
    try:
        for role in roles:
            ws.append(Pinned(python, role, cpu))
    except Exception:
        for w in ws:
            w.close()
        raise
    for w in ws:
        with open(f"/proc/{w.pid}/status") as f:
            test.assertIn(f"Cpus_allowed_list:\t{cpu}\n", f.read())
    out = os.path.join(scratch(test), "pinned.ptg")
    ptg.record_workloads(test, ws, LEAN, out)
    trace = ptg.Trace(out)
    test.assertEqual(trace.losses, [], "events were lost")
    counts = trace.count("/pinned.py", by_tid=True)
    for w, role in zip(ws, roles):
        got = {key: n for (tid, key), n in counts.items() if tid == w.pid}
        test.assertEqual(ptg.as_oracle(got, oracles[role]), oracles[role], f"{role} (pid {w.pid})")
        preempted = [r for r in trace.records if r.kind == "sched" and r.tid == w.pid
                     and r.fields.get("aux0") == PREEMPTED]
        test.assertTrue(preempted, f"{role}: preempted by the other on CPU {cpu}")
    pids = {r.pid for r in trace.records if r.kind == "py_enter"}
    test.assertEqual(pids, {w.pid for w in ws}, "calls of no other process")


# --- running them ---------------------------------------------------------------
#
# Each check runs in a process of its own (guest.py --one NAME), in two lanes
# at once: a check that hangs (a recorder stuck in the kernel) is killed after
# CHECK_TIMEOUT with what its processes were waiting for, and the lane goes
# on. The parent watches the kernel's log: an oops or a warning while a check
# ran fails it; after an oops, the checks still running get OOPS_GRACE seconds.

CHECK_TIMEOUT = float(os.environ.get("PTG_KMATRIX_CHECK_TIMEOUT", 150))
# f imports PyTorch and probes its thousands of op sites (one perf event each
# before 6.6): 80-140 s alone here, 256 s on 5.10 beside the host's tests
# (ctest -j2): three times the limit of the others.
CHECK_TIMEOUT_F = 3 * CHECK_TIMEOUT
OOPS_GRACE = 20
# When the last check must have ended, in the guest's uptime: tools/kmatrix.sh
# stops the guest PTG_KMATRIX_TIMEOUT s after its start; the summary comes
# first. A check that cannot start with a minute left is not run (skipped).
# Outside tools/kmatrix.sh (no PTG_KMATRIX_OUT), no limit.
DEADLINE = float(os.environ.get("PTG_KMATRIX_TIMEOUT", 600)) - 30 \
    if "PTG_KMATRIX_OUT" in os.environ else float("inf")


def uptime():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])
RESULT = "PTGK-RESULT "


class Check(unittest.TestCase):
    """One check: NAME, and the function that runs it with ARGS; in PART 1
    or 2 of the kernels booted twice (--part), given up on after LIMIT s."""

    def __init__(self, name, func, *args, part=2, limit=CHECK_TIMEOUT):
        super().__init__("runTest")
        self.name, self.func, self.args = name, func, args
        self.part, self.limit = part, limit

    def runTest(self):
        self.func(self, *self.args)

    def id(self):
        return self.name

    def __str__(self):
        return self.name

    def shortDescription(self):
        return None


def lanes():
    """The checks, in two lanes that run side by side: Debian's 3.11 (with
    PyTorch: f imports it first, 20 s and more here) in one, the others'
    in the other, so that the uprobes on one interpreter's file (which trap
    in every process that runs it) slow down no other lane much. Part 1
    and part 2 (--part) take about equal time; h, which needs preempt=full,
    is in part 2, the half that ctest boots with it."""
    debian = ptg.Python("debian-3.11")
    pyenv = first_present("pyenv-3.12", "pyenv-3.13")
    pyenv13 = first_present("pyenv-3.13", "pyenv-3.12")
    chroot = first_present("sid-3.14", "forky-3.14", "trixie-3.13")
    explicit = any(w.startswith(("h.", "preempt"))
                   for w in os.environ.get("PTG_KMATRIX_WANTED", "").split())
    one = [Check(f"f.torch_ops.{debian}", lambda test: torch_ops(test, TorchSteps(debian)),
                 part=1, limit=CHECK_TIMEOUT_F),
           Check(f"a.record_pid.{debian}", record_pid, debian),
           Check(f"b.record_cmd.{debian}", record_cmd, debian),
           Check(f"h.preempt_pinned.{debian}", preempt_pinned, debian, explicit)]
    two = [Check(f"a.record_pid.{pyenv}", record_pid, pyenv, part=1),
           Check(f"a.record_pid.{chroot}", record_pid, chroot, part=1),
           Check(f"a.record_pid_inprocess.{chroot}", record_pid, chroot, (), part=1),
           Check(f"c.sample.{pyenv}", sample, pyenv, part=1),
           Check(f"e.cuda.{pyenv}", cuda, pyenv),
           Check(f"d.off_cpu.{pyenv13}", off_cpu, pyenv13),
           Check(f"g.children.{pyenv}", named_refusal, children, pyenv),
           Check(f"g.children_mixed.{chroot}", named_refusal, record_cmd, chroot,
                 ("--children",)),
           Check("i.check", check_cmd, part=1)]
    return one, two


def reason(text):
    """The line of a failure's text that says most: what record said went
    wrong (a feature the kernel lacks, libbpf, the verifier) when it failed,
    else the error."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    # the verifier refused a program: its last words before its statistics
    prog = re.search(r"prog '(\w+)': BPF program load failed: (.*)", text)
    if prog:
        done = [i for i, x in enumerate(lines) if re.search(r"libbpf: processed \d+ insns", x)]
        last = lines[done[0] - 1].partition("libbpf: ")[2] if done and done[0] else prog[2]
        return f"BPF program {prog[1]} refused: {last}"[:400]
    said = [x[x.index("ptrace-gpu: "):] for x in lines if "ptrace-gpu: " in x]
    bad = re.compile(r"needs|error|fail|cannot|refus|invalid|not supported|unsupported|"
                     r"missing|too large|exceeds|verif|libbpf", re.I)
    generic = re.compile(r"^ptrace-gpu: record failed: [\w ]+$")  # "...: Operation not supported"
    said = [x for x in said if bad.search(x)]
    said = [x for x in said if not generic.match(x)] + [x for x in said if generic.match(x)]
    if said:
        return said[0][:400]
    last = [x for x in lines if re.match(r"\w+(Error|Exception|Exit)\b", x)]
    return (last[-1] if last else lines[-1] if lines else "?")[:400]


class OneResult(unittest.TestResult):
    """The outcome of one check, in the child: its traceback on stdout, then
    a RESULT line ({"status", "why"}) for the parent."""

    def __init__(self):
        super().__init__()
        self.outcome = ("FAIL", "it did not run")

    def addSuccess(self, test):
        self.outcome = ("PASS", "")

    def addSkip(self, test, why):
        self.outcome = ("SKIP", why)

    def addFailure(self, test, err):
        print(self._exc_info_to_string(err, test), flush=True)
        self.outcome = ("FAIL", reason("".join(traceback.format_exception_only(*err[:2]))))

    addError = addFailure


def run_one(name):
    check = next((c for lane in lanes() for c in lane if c.name == name), None)
    if check is None:
        print(f"guest.py: no check {name}", file=sys.stderr)
        return 2
    result = OneResult()
    check.run(result)
    status, why = result.outcome
    print(RESULT + json.dumps({"status": status, "why": why}), flush=True)
    return 0


class KernelLog(threading.Thread):
    """Collects what the kernel logs that says it went wrong (BUG, Oops,
    WARNING, panic), with the 40 lines after (its call trace), while the
    checks run; fatal: when it first said BUG, Oops or panic
    (time.monotonic()), else None."""

    SPLAT = re.compile(r"BUG:|Oops|WARNING:|Kernel panic|general protection|RIP: 0010:")
    FATAL = re.compile(r"BUG:|Oops|Kernel panic|general protection")

    def __init__(self):
        super().__init__(daemon=True)
        self.lines, self.fatal, self.after = [], None, 0
        try:
            self.fd = os.open("/dev/kmsg", os.O_RDONLY)
            os.lseek(self.fd, 0, os.SEEK_END)
        except OSError:
            self.fd = None

    def run(self):
        while self.fd is not None:
            try:
                rec = os.read(self.fd, 8192)
            except BrokenPipeError:  # overwritten before it was read
                continue
            line = rec.decode(errors="replace").partition(";")[2].split("\n")[0]
            if self.SPLAT.search(line):
                self.after = 40
                if self.fatal is None and self.FATAL.search(line):
                    self.fatal = time.monotonic()
            if self.after:
                self.lines.append(line)
                self.after -= 1


def waiting_on(pids):
    """What each process is doing: its command, state, kernel wait channel
    and the top of its kernel stack (the reason a check hangs)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rpartition(")")[2].split()[0]
            with open(f"/proc/{pid}/wchan") as f:
                wchan = f.read().strip() or "-"
            try:
                with open(f"/proc/{pid}/stack") as f:
                    stack = [x.split()[-1] for x in f.read().splitlines()[:4]]
            except OSError:
                stack = []
        except OSError:
            continue
        out.append(f"pid {pid} {state} in {wchan} [{' < '.join(stack)}]: {cmd[:160]}")
    return out


class Lanes:
    """Runs the checks of each lane one after the other, the lanes at once."""

    def __init__(self, chosen):
        self.chosen, self.klog = chosen, KernelLog()
        self.lock = threading.Lock()
        self.rows, self.running = [], {}

    def report(self, name, status, secs, why, detail, mark):
        """One check's line (and its details), the kernel's complaints since
        it started first."""
        splat = self.klog.lines[mark:]
        if splat:
            rip = [x for x in splat if x.startswith("RIP: 0010:")][:1]
            why = "kernel (while it ran): " + " / ".join(splat[:1] + rip) + \
                (f"; and: {why}" if why else "")
            status = "FAIL" if status != "SKIP" else status
            detail = "\n".join(["the kernel said:", *splat[:80], detail])
        self.rows.append((name, status, secs, why))
        print(f"{status:4}  {name:34} {secs:6.1f} s  {why}".rstrip(), flush=True)
        if status == "FAIL" and detail.strip():
            print("      " + detail.strip().replace("\n", "\n      "), flush=True)

    def kill(self, proc):
        """proc and what it started (whatever session they went to)."""
        for pid in [*ptg.descendants(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def lane(self, checks):
        for check in checks:
            left = DEADLINE - uptime()
            if left < 60:
                with self.lock:
                    self.report(check.name, "SKIP", 0, f"not run: the boot's time is up "
                                f"(PTG_KMATRIX_TIMEOUT), {left:.0f} s left", "",
                                len(self.klog.lines))
                continue
            limit = min(check.limit, left)
            t0, mark = time.monotonic(), len(self.klog.lines)
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one",
                                     check.name], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    start_new_session=True)
            with self.lock:
                self.running[check.name] = (t0, mark, proc)
            status = None
            try:
                out, _ = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                waits = waiting_on([proc.pid, *ptg.descendants(proc.pid)])
                self.kill(proc)
                try:
                    out, _ = proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    out = ""
                status = "FAIL"
                busy = [w for w in waits if "ptrace-gpu" in w] or waits
                why = f"did not end within {limit:.0f} s: " + (busy[0] if busy else "?")
                out = "\n".join([out, "its processes were:", *waits])
            with self.lock:
                if check.name not in self.running:
                    return  # given up on after an oops (unfinished())
                del self.running[check.name]
                res = [x for x in out.splitlines() if x.startswith(RESULT)]
                if status is None and res:
                    got = json.loads(res[-1][len(RESULT):])
                    status, why = got["status"], got["why"]
                elif status is None:
                    status, why = "FAIL", f"the check's process exited {proc.returncode}"
                detail = "\n".join(x for x in out.splitlines() if not x.startswith(RESULT))
                self.report(check.name, status, time.monotonic() - t0, why, detail, mark)

    def unfinished(self):
        """Fails the checks still running OOPS_GRACE s after an oops: they may never end."""
        with self.lock:
            for name, (t0, mark, proc) in sorted(self.running.items()):
                waits = waiting_on([proc.pid, *ptg.descendants(proc.pid)])
                self.kill(proc)
                self.report(name, "FAIL", time.monotonic() - t0,
                            f"not ended {OOPS_GRACE} s after the oops", "\n".join(
                                ["its processes were:", *waits]), mark)
            self.running.clear()

    def run(self):
        self.klog.start()
        threads = [threading.Thread(target=self.lane, args=(lane,), daemon=True)
                   for lane in self.chosen]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            next(t for t in threads if t.is_alive()).join(1)
            if self.klog.fatal is not None and time.monotonic() - self.klog.fatal > OOPS_GRACE:
                self.unfinished()
                break
        return sorted(self.rows)


def main():
    if os.geteuid() != 0:
        print("guest.py: needs root (run it in tools/kmatrix.sh)", file=sys.stderr)
        return 2
    if sys.argv[1:2] == ["--one"]:
        return run_one(sys.argv[2])
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    part = next((a.partition("=")[2] for a in sys.argv[1:] if a.startswith("--part=")), "")
    if part not in ("", "1", "2"):
        print(f"guest.py: --part={part}: 1 or 2", file=sys.stderr)
        return 2
    os.environ["PTG_KMATRIX_WANTED"] = " ".join(wanted)  # a check named runs anywhere (h)
    chosen = [[c for c in lane if (not wanted
               or any(c.name.startswith(w) or c.name.endswith(w) for w in wanted))
               and (not part or c.part == int(part))]
              for lane in lanes()]
    if os.environ.get("PTG_KMATRIX_LANES") == "1":  # one after the other, for timings
        chosen = [[c for lane in chosen for c in lane]]
    print(f"kernel {os.uname().release}, preempt={preempt_mode()}, {ptg.PTG}", flush=True)
    t0 = time.monotonic()
    lanes_ = Lanes(chosen)
    rows = lanes_.run()
    n = collections.Counter(status for _, status, _, _ in rows)
    print(f"-- {os.uname().release}, {time.monotonic() - t0:.1f} s:", flush=True)
    for name, status, secs, why in rows:
        print(f"{status:4}  {name:34} {secs:6.1f} s  {why}".rstrip())
    print(f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped", flush=True)
    if lanes_.klog.fatal is not None:
        # what still runs may be stuck in the kernel for good: no waiting for it
        sys.stdout.flush()
        os._exit(1)
    if n["FAIL"]:
        return 1
    return 0 if n["PASS"] else 77


if __name__ == "__main__":
    sys.exit(main())
