"""record on real PyTorch training (Debian's python3-torch, CPU: 1.13 on the
host, 2.x in the trixie and forky chroots): dispatcher ops counted as
torch.profiler counts them, nn.Module paths, training steps, backward threads,
libtorch loaded after recording started, C++ exceptions. Runs for each
interpreter that imports torch.
"""
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import ptg

STEPS = 5

# Ops whose counts torch.profiler and ptrace-gpu cannot agree on, and why.
# For each, torch.profiler's count must lie within the bounds the reason gives.
DISAGREE = {
    # EventList._remove_dup_nodes() (torch/autograd/profiler_util.py) deletes an
    # op that is the only child of an op of the same name: mean() calls
    # div_(Scalar), which calls div_(Tensor), two dispatcher calls. Whether
    # torch sees the nesting depends on microsecond timestamps (it merged them
    # in 2 of 5 steps here), so its count lies between ours minus the calls
    # nested in a same-name op, and ours.
    "aten::div_": "same-name nesting merged by torch.profiler",
}
# Never observed by torch.profiler (c10's ObservedOperators list), always by us.
UNOBSERVED = {"aten::size", "aten::is_leaf", "aten::output_nr", "aten::_version",
              "aten::is_complex"}


# The checks of how record handles processes (sets of them, a SIGKILL and a
# second recording, PyTorch loaded late, the hand-over refused or on the
# per-site path) depend on PyTorch's generation (1.x: probes and callback
# differ) and on whether the agent is 3.11's or 3.12+'s, not on which 2.x or
# which 3.12+: each runs on Debian's 3.11 (PyTorch 1.13) and on one of the two
# chroots with PyTorch 2.x, half on each, which saves CI minutes. The checks
# of counts, nesting and module paths run on all three.
ORACLES = {}  # (interpreter, mlp.py's args): torch.profiler's counts
REFERENCES = {}  # interpreter: probes_reference()

WHY = "the same on each PyTorch 2.x and 3.12+; the other half of these runs on the other"
ON_TRIXIE = ptg.only_on(("debian-3.11", "trixie-3.13"), WHY)
ON_FORKY = ptg.only_on(("debian-3.11", "forky-3.14"), WHY)


class Ops:
    """The op records of a trace, replayed per thread with the Python frames."""

    def __init__(self, trace):
        self.trace = trace
        self.calls = []  # (tid, name, parent op name, enter flags, exit flags, python stack)
        stacks = collections.defaultdict(list)
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
                    py = [x.name for x in st if x.kind == "py_enter"]
                    self.calls.append((r.tid, e.name, parent, e.flags, r.flags, py, e))
        for tid, st in stacks.items():
            if st:
                raise AssertionError(f"tid {tid}: {len(st)} spans never closed")

    def count(self, prefix="aten::"):
        return collections.Counter(c[1] for c in self.calls if c[1].startswith(prefix))

    def nested_in_same(self):
        return collections.Counter(c[1] for c in self.calls if c[1] == c[2])


@ptg.per_interpreter(need_torch=True)
class TorchOps(unittest.TestCase):
    maxDiff = None
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, python, script, *args, rec_args=(), name="run.ptg", hold=False):
        """Attaches while the workload waits; returns (trace path, workload output, stderr).
        With hold, the recorder is stopped (SIGINT) while the trained workload
        still lives: module names are read from its memory, however far
        behind the recorder runs."""
        out = os.path.join(self.tmp.name, name)
        w, rec = ptg.Workload(python, script, *args, *(["--hold"] if hold else [])), None
        try:
            rec = ptg.Recorder(["-p", str(w.pid), *rec_args], out)
            w.go()
            if hold:
                self.assertEqual(w.proc.stdout.readline().strip(), "trained")
                rec.proc.send_signal(signal.SIGINT)
                self.assertEqual(rec.wait(), 0, rec.stderr)
                w.go()
            self.assertEqual(rec.wait(), 0, rec.stderr)
            printed = w.finish()
            self.assertIn("done", printed)
        finally:
            w.close(rec)
        return out, printed, rec.stderr

    def report(self, *args):
        res = ptg.run(["report", *args])
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout

    def torch_profiler_counts(self, python, *args):
        """{op: calls} of mlp.py args as torch.profiler counts them in-process;
        once per interpreter and args (the same every run: only the merges of
        DISAGREE vary, within the bounds assert_ops_counts allows)."""
        key = (python.name, args)
        if key not in ORACLES:
            mlp = python.path(os.path.join(ptg.WORKLOADS, "mlp.py"))
            res = subprocess.run(python.argv(mlp, "--oracle", "--steps", str(STEPS), *args),
                                 capture_output=True, text=True)
            self.assertEqual(res.returncode, 0, res.stderr)
            line = next(l for l in res.stdout.splitlines() if l.startswith("oracle "))
            ORACLES[key] = json.loads(line[7:])
        return ORACLES[key]

    def assert_counts(self, trace, theirs):
        """The trace's op counts are torch.profiler's (theirs, every
        RecordFunction range it lists): returns its Ops. The probes record
        aten ops only; the agent's callback (ops.source record_function,
        with or without --in-process) every range of FUNCTION scope, which
        also holds the autograd engine's one around each node it runs and
        autograd's detach/detach_, each as often as torch.profiler."""
        self.assertEqual(trace.losses, [])
        ops = Ops(trace)
        ops.source = trace.meta["ops.source"]
        self.assert_ops_counts(ops, theirs, ops.source.startswith("record_function"))
        return ops

    def assert_ops_counts(self, ops, theirs, in_process):
        """assert_counts() of the calls in ops (in_process: from the callback)."""
        ours, nested = ops.count(), ops.nested_in_same()
        other = collections.Counter(c[1] for c in ops.calls if not c[1].startswith("aten::"))
        if in_process:
            node = "autograd::engine::evaluate_function: "
            self.assertGreater(other[node + "torch::autograd::AccumulateGrad"], 0, other)
            self.assertGreater(other[node + "AddmmBackward0"], 0, other)
            for name, n in sorted(other.items()):
                self.assertEqual(n, theirs.get(name, 0), f"{name}: ptrace-gpu {n}, "
                                 f"torch.profiler {theirs.get(name, 0)}")
        else:
            self.assertEqual(other, {})
        theirs = {k: v for k, v in theirs.items() if k.startswith("aten::")}
        self.assertGreater(len(theirs), 20)
        for name in sorted(set(ours) | set(theirs)):
            mine, torch_n = ours.get(name, 0), theirs.get(name, 0)
            if name in DISAGREE:
                self.assertLessEqual(torch_n, mine, name)
                self.assertGreaterEqual(torch_n, mine - nested[name], name)
            elif name in UNOBSERVED:
                self.assertEqual(torch_n, 0, name)
                # the agent's callback is torch.profiler's own hook: it never sees them either
                if in_process:
                    self.assertEqual(mine, 0, name)
            else:
                self.assertEqual(mine, torch_n, f"{name}: ptrace-gpu {mine}, torch.profiler "
                                                f"{torch_n}")

    def compare_with_torch_profiler(self, python, *args, rec_args=()):
        """Op counts of mlp.py args as recorded, and as torch.profiler counts
        them in-process: (Ops of the trace, {op: calls} of torch.profiler)."""
        theirs = self.torch_profiler_counts(python, *args)
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), *args,
                                 rec_args=rec_args)
        ops = self.assert_counts(ptg.Trace(path), theirs)
        return ops, theirs

    def assert_linear_nesting(self, ops):
        """Nesting as torch shows it (aten::linear -> aten::t, aten::addmm),
        and every aten::linear under the Python frame that called it."""
        children = collections.Counter(c[1] for c in ops.calls if c[2] == "aten::linear")
        self.assertEqual(children["aten::addmm"], 2 * STEPS)
        self.assertEqual(children["aten::t"], 2 * STEPS)
        linear = [c for c in ops.calls if c[1] == "aten::linear"]
        self.assertEqual(len(linear), 2 * STEPS)
        self.assertTrue(all(c[5] and c[5][-1] == "Linear.forward" for c in linear))

    def check_counts_match_torch_profiler(self, python):
        """The default, PyTorch loaded at the attach: frames by the probes,
        ops by the agent's RecordFunction callback, merged in time order."""
        ops, _ = self.compare_with_torch_profiler(python)
        self.assertEqual(ops.source, "record_function")
        self.assert_linear_nesting(ops)

    def check_command_ops_handed_to_callback(self, python):
        """record -- CMD: the command's first op stops its main thread, the op
        agent goes in right there, and its callback has every op, that first
        one included. The same program recorded with --ops-from probes gives
        the same aten ops in the same order (less c10's unobserved ones, which
        no callback sees), and the training steps torch.profiler's counts."""
        self.command_handover(python, None)

    @ON_TRIXIE
    def check_command_handover_without_uprobe_multi(self, python):
        """The same on the per-site path of kernels before 6.6
        (PTG_NO_UPROBE_MULTI=1), where closing each probe site waits for a
        grace period: the hand-over takes one probe, not PyTorch's thousands
        of op sites, and the recorder ends soon after its command (a
        generous bound: with the sites it took over ten minutes here). The
        reference, --ops-from probes, is recorded with uprobe_multi."""
        self.command_handover(python, dict(os.environ, PTG_NO_UPROBE_MULTI="1"))

    @ON_FORKY
    def check_command_without_torch_without_uprobe_multi(self, python):
        """record -- CMD of a program that never imports PyTorch, with PyTorch
        on its search path, on the per-site path (PTG_NO_UPROBE_MULTI=1): no op
        probe goes in (the hand-over's one probe aside), every call is in the
        trace, and the recorder ends with its command (691 s here when the
        op sites were probed ahead; a generous bound, not a timing)."""
        out = os.path.join(self.tmp.name, "fib.ptg")
        script = python.path(os.path.join(ptg.WORKLOADS, "fib.py"))
        t0 = time.monotonic()
        res = ptg.run(["record", "-o", out, "--", *python.argv(script)],
                      env=dict(os.environ, PTG_NO_UPROBE_MULTI="1"))
        elapsed = time.monotonic() - t0
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertLess(elapsed, 60, res.stderr)
        self.assertIn("no PyTorch library was mapped: no op probes", res.stderr)
        self.assertNotIn("op probes:", res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.count("fib.py")["f:7"], 5919)

    def probes_reference(self, python):
        """The aten ops, in time order, of `record --ops-from probes -- mlp.py`
        (with uprobe_multi where the kernel has it, whatever runs this): the
        reference of the command's hand-over checks, recorded once per
        interpreter (a trace of a million calls: PyTorch's import)."""
        if python.name not in REFERENCES:
            env = {k: v for k, v in os.environ.items() if k != "PTG_NO_UPROBE_MULTI"}
            mlp = python.path(os.path.join(ptg.WORKLOADS, "mlp.py"))
            out = os.path.join(self.tmp.name, "probes.ptg")
            res = ptg.run(["record", "-o", out, "--ops-from", "probes", "--",
                           *python.argv(mlp, "--steps", str(STEPS))], env=env)
            self.assertEqual(res.returncode, 0, res.stderr)
            trace = ptg.Trace(out)
            self.assertEqual(trace.losses, [])
            self.assertEqual(trace.meta["ops.source"], "uprobes")
            calls = sorted(Ops(trace).calls, key=lambda c: c[6].ts)
            REFERENCES[python.name] = [c[1] for c in calls if c[1].startswith("aten::")]
            self.assertGreater(len(REFERENCES[python.name]), 100)
        return REFERENCES[python.name]

    def command_handover(self, python, env):
        theirs = self.torch_profiler_counts(python)
        mlp = python.path(os.path.join(ptg.WORKLOADS, "mlp.py"))
        out = os.path.join(self.tmp.name, "callback.ptg")
        t0 = time.monotonic()
        res = ptg.run(["record", "-o", out, "--", *python.argv(mlp, "--steps", str(STEPS))],
                      env=env)
        elapsed = time.monotonic() - t0
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("PyTorch ops by its RecordFunction callback, from its first op on",
                      res.stderr)
        # no op probe went in: one probe stopped the thread
        self.assertNotIn("PyTorch ops of", res.stderr)
        self.assertLess(elapsed, 60, res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["ops.source"], "record_function")
        ops = Ops(trace)
        seq = [c[1] for c in sorted(ops.calls, key=lambda c: c[6].ts)
               if c[1].startswith("aten::") and c[1] not in UNOBSERVED]
        ops.calls = [c for c in ops.calls if "train" in c[5]]
        self.assert_ops_counts(ops, theirs, True)
        self.assert_linear_nesting(ops)
        self.assertEqual(seq, [x for x in self.probes_reference(python) if x not in UNOBSERVED])

    @ON_FORKY
    def check_command_handover_falls_back(self, python):
        """record -- CMD whose op agent cannot go in at the first op (here refused:
        not root's): the probes keep the process, the op that stopped it written
        from the entry the BPF side saved; the same aten ops in the same order as
        with --ops-from probes, nothing twice, nothing lost."""
        mlp = python.path(os.path.join(ptg.WORKLOADS, "mlp.py"))
        bad = os.path.join(self.tmp.name, "libptg_pymon.so")
        shutil.copyfile(os.path.join(ptg.BUILD, "libptg_pymon.so"), bad)
        os.chown(bad, 65534, 65534)  # nobody's: where it lies (/tmp) would not refuse it
        out = os.path.join(self.tmp.name, "refused.ptg")
        res = ptg.run(["record", "-o", out, "--", *python.argv(mlp, "--steps", str(STEPS))],
                      env=dict(os.environ, PTG_PYMON_AGENT=bad))
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("refusing the agent", res.stderr)
        self.assertIn("no op callback at its first op: its ops come from the probes",
                      res.stderr)
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["ops.source"], "uprobes")
        calls = sorted(Ops(trace).calls, key=lambda c: c[6].ts)
        self.assertEqual([c[1] for c in calls if c[1].startswith("aten::")],
                         self.probes_reference(python))

    def check_command_first_op_on_thread(self, python):
        """record -- CMD whose first op runs on a thread other than the main
        one: the agent cannot go in through it, so the op probes go in while
        that thread waits in its stop; every torch.mm call is in the trace,
        its first op included (its entry from what the trigger saw, paired
        with its exit), nothing lost."""
        out = os.path.join(self.tmp.name, "thread.ptg")
        script = python.path(os.path.join(ptg.WORKLOADS, "torch_thread_first.py"))
        res = ptg.run(["record", "-o", out, "--", *python.argv(script)])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("not the main one: its ops come from the probes, put in while that "
                      "thread waited", res.stderr)
        n = int(re.search(r"mm (\d+)", res.stdout).group(1))
        trace = ptg.Trace(out)
        self.assertEqual(trace.losses, [])
        self.assertEqual(trace.meta["ops.source"], "uprobes")
        ops = Ops(trace)
        self.assertEqual(ops.count()["aten::mm"], n)
        first = min((c for c in ops.calls), key=lambda c: c[6].ts)
        self.assertEqual(first[1], "aten::ones")
        self.assertFalse(first[4] & ptg.EXIT_UNWIND, "its exit closed it")

    def check_probe_counts_match_torch_profiler(self, python):
        ops, _ = self.compare_with_torch_profiler(python, rec_args=("--ops-from", "probes"))
        self.assertEqual(ops.source, "uprobes")
        self.assert_linear_nesting(ops)

    def check_in_process_counts_match_torch_profiler(self, python):
        """record --in-process: ops from the agent's RecordFunction callback,
        counted, nested and placed under their Python frames as the probes do."""
        ops, _ = self.compare_with_torch_profiler(python, rec_args=("--in-process",))
        self.assertEqual(ops.source, "record_function")
        self.assert_linear_nesting(ops)
        ops, theirs = self.compare_with_torch_profiler(python, "--optim", "adam", "--hooks",
                                                       rec_args=("--in-process",))
        self.assertEqual(ops.count()["aten::addcdiv_"], 6 * STEPS)

    def pid_list(self, python, rec_args):
        """record -p A,B,C --per-process REC_ARGS of two trainings and one
        that imports PyTorch after the attach: each trace its process's
        alone and exact on its own, the trainings' against torch.profiler,
        the third's aten::mm calls from the probes, the first included.
        Returns (the recorder's stderr, the workloads, their traces)."""
        plans = [("--optim", "adam", "--hooks"), ()]
        theirs = [self.torch_profiler_counts(python, *a) for a in plans]
        out = os.path.join(self.tmp.name, "job.ptg")
        ws = [ptg.Workload(python, "mlp.py", "--steps", str(STEPS), *a) for a in plans]
        ws.append(ptg.Workload(python, "late_torch.py", "--seconds", "1"))
        err, printed = ptg.record_workloads(self, ws, [*rec_args, "--per-process"], out)
        self.assertEqual(sorted(os.listdir(self.tmp.name)),
                         sorted(f"job.pid{w.pid}.ptg" for w in ws))
        traces = [ptg.Trace(os.path.join(self.tmp.name, f"job.pid{w.pid}.ptg")) for w in ws]
        for w, trace in zip(ws, traces):
            self.assertEqual({r.pid for r in trace.records}, {w.pid})
            self.assertEqual(trace.meta["ops.source"], "record_function,uprobes")
        for trace, counts, args in zip(traces, theirs, plans):
            ops = self.assert_counts(trace, counts)
            linear = [c for c in ops.calls if c[1] == "aten::linear"]
            self.assertGreaterEqual(len(linear), 2 * STEPS, args)
            self.assertTrue(all(c[5] and c[5][-1] == "Linear.forward" for c in linear), args)
        self.assertEqual(Ops(traces[0]).count()["aten::addcdiv_"], 6 * STEPS)
        n = int(re.search(r"mm (\d+)", printed[2]).group(1))
        self.assertEqual(Ops(traces[2]).count()["aten::mm"], n)
        self.assertEqual([c for c in Ops(traces[2]).calls if not c[1].startswith("aten::")], [])
        return err, ws, traces

    @ON_FORKY
    def check_in_process_pid_list(self, python):
        """record -p A,B,C --in-process --per-process: an agent in each process,
        each one's ops exact in its own trace: two trainings against
        torch.profiler, and one that imports PyTorch after the attach, whose
        ops come from the probes, from the first call."""
        err, ws, _ = self.pid_list(python, ["--in-process"])
        self.assertIn(f"python calls: in-process (pid {ws[0].pid}: ", err)
        self.assertIn("RecordFunction callback in 2 of 3 processes", err)
        self.assertIn(f"ops of pid {ws[2].pid} through probes", err)

    @ON_TRIXIE
    def check_pid_list(self, python):
        """record -p A,B,C --per-process --uprobes: an agent of ops alone
        in each process that has PyTorch loaded at the attach, frames from
        the probes; the one that imports PyTorch after the attach has no
        agent, and its ops come from the probes."""
        err, ws, _ = self.pid_list(python, ["--uprobes"])
        self.assertIn(f"PyTorch ops: pid {ws[0].pid}: ops by RecordFunction; "
                      f"pid {ws[1].pid}: ops by RecordFunction\n", err)
        self.assertIn("RecordFunction callback in 2 of 2 processes with an agent", err)

    def check_in_process_module_paths_and_threads(self, python):
        path, _, err = self.record(python, "mlp.py", "--steps", str(STEPS), "--hooks",
                                   rec_args=["--in-process"], hold=True)
        self.assertIn("ops by RecordFunction", err)
        self.assert_hook_paths(self.module_rows(path))
        # backward passes on threads that never run Python: their ops all the same
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), "--backward-thread",
                                 rec_args=["--in-process"])
        trace = ptg.Trace(path)
        by_tid = collections.defaultdict(collections.Counter)
        for c in Ops(trace).calls:
            by_tid[c[0]][c[1]] += 1
        main_tid = int(trace.meta["pid"])
        backward = [t for t in by_tid if t != main_tid]
        self.assertEqual(len(backward), STEPS, "one thread ran each backward pass")
        for tid in backward:
            self.assertEqual(by_tid[tid]["aten::threshold_backward"], 1)
            self.assertEqual(by_tid[tid]["aten::mm"], 3)
        self.assertEqual(by_tid[main_tid]["aten::addmm"], 2 * STEPS)

    @ON_FORKY
    def check_in_process_killed_then_again(self, python):
        """SIGKILL of the recorder while a thread runs ops without pause: the
        agent takes its RecordFunction callback out, and the target goes on
        (its ops after that touch no ring); a second recording counts each op
        once (one callback, not two)."""
        out = os.path.join(self.tmp.name, "again.ptg")
        pid = ptg.killed_then_again(self, python, out, workload_args=("--torch",),
                                    after_extra={"mm": 100})
        trace = ptg.Trace(out)
        self.assertEqual(trace.meta["ops.source"], "record_function")
        main = collections.Counter(c[1] for c in Ops(trace).calls if c[0] == pid)
        self.assertEqual(main["aten::mm"], 100)

    @ON_TRIXIE
    def check_killed_then_again(self, python):
        """The same for the default's agent of ops alone: after the SIGKILL
        its callback is out, and the second recording's frames (probes) and
        ops (callback) are each counted once."""
        out = os.path.join(self.tmp.name, "again.ptg")
        pid = ptg.killed_then_again(self, python, out, workload_args=("--torch",),
                                    rec_args=(), after_extra={"mm": 100})
        trace = ptg.Trace(out)
        self.assertEqual(trace.meta["ops.source"], "record_function")
        main = collections.Counter(c[1] for c in Ops(trace).calls if c[0] == pid)
        self.assertEqual(main["aten::mm"], 100)

    def check_counts_match_torch_profiler_adam_hooks(self, python):
        # torch 2.x's Adam.step and hooks run through more Python wrappers and ops
        ops, theirs = self.compare_with_torch_profiler(python, "--optim", "adam", "--hooks")
        # one addcdiv_ per parameter and step: fc1, fc2 and the listed Linear
        self.assertEqual(theirs["aten::addcdiv_"], 6 * STEPS)
        self.assertEqual(theirs["aten::clamp"], STEPS)

    def module_rows(self, path):
        """{op: {module path: calls}} of report --group-by-module."""
        rows = collections.defaultdict(dict)
        for line in self.report("--group-by-module", path).splitlines():
            m = re.match(r"\s*(aten::\S+)(?:\s+\S+){5}\s+(\d+)\s+(\S*)\s*$", line)
            if m:
                rows[m.group(1)][m.group(3)] = int(m.group(2))
        return rows

    def assert_hook_paths(self, rows):
        """mlp.py --hooks's module paths in report --group-by-module's rows."""
        fc1 = "TOP(Net)::forward.fc1(Linear)"
        self.assertEqual(rows["aten::mul"], {fc1 + "::scale_input": STEPS})
        self.assertEqual(rows["aten::clamp"], {fc1 + "::hook": STEPS})
        self.assertEqual(rows["aten::addmm"], {fc1 + "::forward": STEPS,
                                               "TOP(Net)::forward.fc2(Linear)::forward": STEPS,
                                               "TOP(Net)::forward.Linear#0(Linear)::forward": STEPS})

    def check_module_paths_hooks(self, python):
        # torch 2.1+ runs hooks and forward from a closure of _call_impl that
        # holds the module in a cell; a hook may be bound to another object
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), "--hooks",
                                 hold=True)
        rows = self.module_rows(path)
        self.assert_hook_paths(rows)
        self.assertEqual(rows["aten::relu"], {"TOP(Net)::forward": STEPS})

    def check_module_paths_attached_in_forward(self, python):
        # the tracer attaches while Net.forward runs: the module calls come
        # from the stack snapshot, their modules read from the running frames
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), "--hooks",
                                 "--wait-in-forward", hold=True)
        rows = self.module_rows(path)
        self.assertEqual(rows["aten::addmm"], {"TOP(Net)::forward.fc1(Linear)::forward": STEPS,
                                               "TOP(Net)::forward.fc2(Linear)::forward": STEPS,
                                               "TOP(Net)::forward.Linear#0(Linear)::forward": STEPS})
        self.assertEqual(rows["aten::relu"], {"TOP(Net)::forward": STEPS})
        self.assertEqual(rows["aten::clamp"], {"TOP(Net)::forward.fc1(Linear)::hook": STEPS})

    def check_module_paths(self, python):
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), hold=True)
        rows = self.module_rows(path)
        fc1 = "TOP(Net)::forward.fc1(Linear)::forward"
        fc2 = "TOP(Net)::forward.fc2(Linear)::forward"
        self.assertEqual(rows["aten::addmm"], {fc1: STEPS, fc2: STEPS})
        self.assertEqual(rows["aten::linear"], {fc1: STEPS, fc2: STEPS})
        self.assertEqual(rows["aten::relu"], {"TOP(Net)::forward": STEPS})
        self.assertEqual(rows["aten::mse_loss"], {"TOP(MSELoss)::forward": STEPS})
        # backward ops run outside any module call
        self.assertEqual(rows["aten::threshold_backward"], {"": STEPS})
        # the stack grouping names the Python function of the op
        stack = self.report("--group-by-stack", "1", path)
        self.assertRegex(stack, r"aten::addmm.*torch/nn/modules/linear\.py\(\d+\): Linear\.forward")

    def check_steps_stop_after_exactly_three(self, python):
        path, printed, err = self.record(python, "mlp.py", "--steps", "8",
                                         rec_args=["--steps", "3"])
        trace = ptg.Trace(path)
        self.assertEqual(trace.meta["stop.reason"], "3 steps recorded")
        self.assertEqual(trace.meta["steps"], "ProfilerStep#0-#2")
        spans = [r.name for r in trace.records if r.kind == "span"]
        self.assertEqual(spans, ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"])
        steps = [c for c in trace.calls() if c[1] == "SGD.step" and c[2].endswith("sgd.py")]
        self.assertEqual(len(steps), 3)
        self.assertTrue(all(c[7] == 0 for c in steps), "each step() returned in the trace")
        self.assertEqual(Ops(trace).count()["aten::addmm"], 2 * 3)

    def check_steps_adam(self, python):
        # torch 2.x wraps Adam.step in profile_hook_step, _use_grad and
        # maybe_fallback: one step per opt.step() all the same
        path, _, _ = self.record(python, "mlp.py", "--steps", "8", "--optim", "adam",
                                 rec_args=["--steps", "3"])
        trace = ptg.Trace(path)
        self.assertEqual(trace.meta["stop.reason"], "3 steps recorded")
        spans = [r.name for r in trace.records if r.kind == "span"]
        self.assertEqual(spans, ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"])
        steps = [c for c in trace.calls() if c[1] == "Adam.step" and c[2].endswith("adam.py")]
        self.assertEqual(len(steps), 3)
        # each span ends where its Adam.step() returned
        self.assertEqual([r.ts + r.fields["dur"] for r in trace.records if r.kind == "span"],
                         [c[5] for c in steps])
        self.assertEqual(Ops(trace).count()["aten::addcdiv_"], 4 * 3, "4 parameters, 3 steps")

    def check_step_function(self, python):
        path, _, _ = self.record(python, "mlp.py", "--steps", "5",
                                 rec_args=["--steps", "2", "--step-function", "mlp:Net.forward"])
        trace = ptg.Trace(path)
        self.assertEqual(trace.meta["stop.reason"], "2 steps recorded")
        forward = [c for c in trace.calls() if c[1] == "Net.forward"]
        self.assertEqual(len(forward), 2)
        self.assertTrue(all(c[7] == 0 for c in forward), "both returned in the trace")

    def check_schedule_one_trace_per_active_cycle(self, python):
        self.record(python, "mlp.py", "--steps", "9",
                    rec_args=["--schedule", "wait=1,warmup=1,active=2,repeat=2"])
        for cycle, first in ((1, 2), (2, 6)):
            trace = ptg.Trace(os.path.join(self.tmp.name, f"run.cycle{cycle}.ptg"))
            self.assertEqual(trace.meta["steps"], f"ProfilerStep#{first}-#{first + 1}")
            spans = [r.name for r in trace.records if r.kind == "span"]
            self.assertEqual(spans, [f"ProfilerStep#{first}", f"ProfilerStep#{first + 1}"])
            self.assertEqual(Ops(trace).count()["aten::addmm"], 4)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "run.cycle3.ptg")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "run.ptg.recording")))

    def check_backward_threads(self, python):
        path, _, _ = self.record(python, "mlp.py", "--steps", str(STEPS), "--backward-thread")
        trace = ptg.Trace(path)
        ops = Ops(trace)
        main_tid = int(trace.meta["pid"])
        by_tid = collections.defaultdict(collections.Counter)
        for c in ops.calls:
            by_tid[c[0]][c[1]] += 1
        backward = [t for t in by_tid if t != main_tid]
        self.assertEqual(len(backward), STEPS, "one thread ran each backward pass")
        for tid in backward:
            self.assertEqual(by_tid[tid]["aten::threshold_backward"], 1)
            self.assertEqual(by_tid[tid]["aten::mm"], 3)
        self.assertEqual(by_tid[main_tid]["aten::threshold_backward"], 0)
        self.assertEqual(by_tid[main_tid]["aten::addmm"], 2 * STEPS)

    def check_cpp_exception_unwinds_through_probes(self, python):
        path, printed, _ = self.record(python, "mlp.py", "--steps", "1", "--errors", "50",
                                       rec_args=("--ops-from", "probes"))
        self.assertIn("caught 50", printed)
        mm = [c for c in Ops(ptg.Trace(path)).calls if c[1] == "aten::mm"]
        failed = [c for c in mm if c[4] & ptg.EXIT_UNWIND]
        self.assertEqual(len(failed), 50, "each failed mm is closed as left by an exception")

    def check_cpp_exception_through_callback(self, python):
        """The callback's end runs as the exception unwinds: each failed mm
        is closed (returned, not unwound) and the target goes on."""
        path, printed, err = self.record(python, "mlp.py", "--steps", "1", "--errors", "50")
        self.assertIn("caught 50", printed)
        # its calls in-process by default, the agent's callback with them
        self.assertIn("ops by RecordFunction)", err)
        trace = ptg.Trace(path)
        self.assertEqual(trace.meta["ops.source"], "record_function")
        mm = [c for c in Ops(trace).calls if c[1] == "aten::mm"]
        self.assertGreaterEqual(len(mm), 50)
        self.assertEqual([c for c in mm if c[4] & ptg.EXIT_UNWIND], [])

    def late_import(self, python, via_pid, rec_args=()):
        out = os.path.join(self.tmp.name, "late.ptg")
        script = python.path(os.path.join(ptg.WORKLOADS, "late_torch.py"))
        if via_pid:
            path, printed, err = self.record(python, "late_torch.py", "--seconds", "2",
                                             name="late.ptg", rec_args=rec_args)
        else:
            res = ptg.run(["record", "-o", out, "--", *python.argv(script, "--seconds", "2")])
            self.assertEqual(res.returncode, 0, res.stderr)
            path, printed, err = out, res.stdout, res.stderr
        n = int(re.search(r"mm (\d+)", printed).group(1))
        if via_pid:
            self.assertIn("PyTorch ops of", err, "libtorch was probed")
        else:
            # -- CMD: the hand-over's one probe, put on by path like the op probes
            self.assertIn("PyTorch ops by its RecordFunction callback, from its first op on",
                          err)
        # probed by path before `import torch` maps it: every call, the first included
        trace = ptg.Trace(path)
        self.assertEqual(Ops(trace).count()["aten::mm"], n)
        return trace

    @ON_TRIXIE
    def check_late_import_attached(self, python):
        self.late_import(python, True)

    @ON_FORKY
    def check_late_import_command(self, python):
        self.late_import(python, False)

    @ON_TRIXIE
    def check_late_import_in_process(self, python):
        # PyTorch imported after the agent attached: its ops come from the probes
        trace = self.late_import(python, True, rec_args=("--in-process",))
        self.assertEqual(trace.meta["ops.source"], "uprobes")

    def check_without_torch(self, python):
        path, _, err = self.record(python, "fib.py")
        self.assertIn("no PyTorch library was mapped", err)
        self.assertIn("no PyTorch dispatcher ops in this trace", self.report("--ops", path))


if __name__ == "__main__":
    ptg.main()
