# SPDX-License-Identifier: MIT
"""report --ops against torch.profiler's key_averages() semantics, on the real
Kineto traces of shared/traces/kineto imported with `ptrace-gpu import`.

key_averages() has a row for every op, CUDA runtime call and annotation; an
op's Self CPU is its time minus that of every event nested in it, CUDA
runtime calls included, and autograd nodes
("autograd::engine::evaluate_function: AddmmBackward0") are rows of their
own. Every row of the table is compared with the numbers worked out from the
JSON (kineto_oracle), and the Self CPU total with their sum.
"""
import collections
import glob
import os
import pstats
import re
import subprocess
import tempfile
import unittest

import kineto_oracle
import ptg

UNITS = {"us": 1e3, "ms": 1e6, "s": 1e9}


def ns(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"not a time: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def near(got, want_ns):
    # three decimals of the unit printed: us below 1 ms, ms below 1 s, then s
    step = 1 if want_ns < 1e6 else 1e3 if want_ns < 1e9 else 1e6
    return abs(got - want_ns) <= 0.51 * step + 1


def table(text):
    """{name: (self_ns, total_ns, calls)} of key_averages-style table, and the total."""
    rows, total = {}, None
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip().startswith("Name"))
    for line in lines[head + 2:]:
        if line.startswith("Self CPU time total:"):
            total = ns(line.split(":")[1].strip())
            break
        if line.startswith("---"):
            continue
        cols = re.split(r"\s{2,}", line.strip())
        name, _, self_t, _, total_t, _, calls = cols
        if name in rows:
            rows[name] = None  # two names cut to the same text
        else:
            rows[name] = (ns(self_t), ns(total_t), int(calls))
    return rows, total


def shown(name):
    # torch cuts names of 52 characters or more (55 less the "...")
    return name if len(name) < 52 else name[:52] + "..."


class ReportOps(unittest.TestCase):
    def setUp(self):
        kdir = os.path.join(os.environ.get("PTG_SHARED_DIR", os.path.join(ptg.SRC, "..",
                                                                          "shared")),
                            "traces", "kineto")
        self.traces = sorted(glob.glob(os.path.join(kdir, "*.json.gz")))
        if not self.traces:
            self.skipTest(f"no Kineto traces in {kdir}")
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def check_trace(self, src):
        base = os.path.basename(src)
        out = os.path.join(self.tmp.name, base + ".ptg")
        res = ptg.run(["import", src, "-o", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        res = ptg.run(["report", "--ops", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        rows, total = table(res.stdout)
        want = {}
        for (_, _, name), (nc, tt, ct, _) in kineto_oracle.host_stats(src).items():
            name = name[1:-1]
            key = shown(name)
            w = want.setdefault(key, [0, 0, 0, set()])
            w[0] += tt
            w[1] += ct
            w[2] += nc
            w[3].add(name)
        self.assertEqual(set(rows), set(want), base)
        bad = []
        for key, (tt, ct, nc, names) in want.items():
            got = rows[key]
            if got is None or len(names) > 1:
                continue
            if not (near(got[0], tt) and near(got[1], ct) and got[2] == nc):
                bad.append(f"{key}: got {got}, want {(tt, ct, nc)}")
        self.assertEqual(bad, [], base)
        self.assertTrue(near(total, sum(w[0] for w in want.values())), (base, total))
        return rows, res.stdout

    def test_kineto_traces(self):
        for src in self.traces:
            with self.subTest(trace=os.path.basename(src)):
                rows, text = self.check_trace(src)
                # runtime calls are rows of their own, as key_averages() has them
                self.assertIn("cudaLaunchKernel", rows)
                if "train_rank0" in src:
                    self.assertIn("autograd::engine::evaluate_function: ConvolutionBack...",
                                  rows)
                    self.assertIn("ProfilerStep#101", rows)
                    # convolution_backward launches kernels: its self time is not
                    # its total any more
                    conv = rows["aten::convolution_backward"]
                    self.assertLess(conv[0], conv[1] * 0.5, conv)

    def test_recorded_training_loop(self):
        """A recorded trace (Debian's python3.11 with torch, record --steps):
        export --pstats --ops and report --ops count each op, and each
        ProfilerStep#N, as often as the trace has it, and pstats loads it."""
        py = "/usr/bin/python3.11"
        if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode:
            self.skipTest(f"no torch in {py}")
        out = os.path.join(self.tmp.name, "mlp.ptg")
        res = ptg.run(["record", "-q", "--steps", "3", "-o", out, "--", py,
                       os.path.join(ptg.WORKLOADS, "mlp.py"), "--steps", "5"])
        self.assertEqual(res.returncode, 0, res.stderr)
        want = collections.Counter()
        for r in ptg.Trace(out).records:
            if r.kind == "op_enter" or (r.kind == "span" and r.name.startswith("ProfilerStep#")):
                want[r.name] += 1
        self.assertTrue(any(k.startswith("ProfilerStep#") for k in want), want)
        prof = os.path.join(self.tmp.name, "mlp.prof")
        res = ptg.run(["export", "--pstats", prof, "--ops", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        st = pstats.Stats(prof)
        got = {k[2][1:-1]: v[1] for k, v in st.stats.items()}
        self.assertEqual(got, dict(want))
        self.assertTrue(all(k[:2] == ("~", 0) for k in st.stats))
        res = ptg.run(["report", "--ops", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        rows, _ = table(res.stdout)
        self.assertEqual({k: v[2] for k, v in rows.items() if v},
                         {shown(k): n for k, n in want.items()})


if __name__ == "__main__":
    ptg.main()
