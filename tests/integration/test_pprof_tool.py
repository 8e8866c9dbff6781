# SPDX-License-Identifier: MIT
"""sample's and export --pprof's output read by the real pprof tool
(github.com/google/pprof).

pprof is built once from Debian's golang-github-google-pprof-dev sources,
offline, into build/pprof-tool/ and reused; without Go or those sources the
test is skipped (exit 77) and says why. A real workload (sample_split.py) is
sampled, then:
- `pprof -top` names every function: "<module>" stays "<module>", nothing is
  "<unknown>" (pprof demangles a system_name equal to the name and strips
  <...> from it);
- `pprof -raw` lists each (location list, labels) once: samples of the same
  stack are merged, their values summed, and the totals still add up;
- Python frames sit in a mapping that says it has functions, files and lines.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import ptg

GOPATH = "/usr/share/gocode"
PPROF_SRC = os.path.join(GOPATH, "src", "github.com", "google", "pprof")
TOOL_DIR = os.path.join(ptg.BUILD, "pprof-tool")
TOOL = os.path.join(TOOL_DIR, "pprof")


def pprof_tool():
    """The pprof binary, built on first use; exits 77 when it cannot be."""
    if os.access(TOOL, os.X_OK):
        return TOOL
    go = shutil.which("go")
    if not go or not os.path.isdir(PPROF_SRC):
        why = ("no go (apt-get install golang-go)" if not go
               else f"no {PPROF_SRC} (golang-github-google-pprof-dev)")
        print(f"skip: pprof cannot be built here: {why}", flush=True)
        sys.exit(77)
    os.makedirs(TOOL_DIR, exist_ok=True)
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH,
               GOCACHE=os.path.join(TOOL_DIR, "gocache"))
    res = subprocess.run([go, "build", "-o", TOOL + ".tmp", "github.com/google/pprof"],
                         capture_output=True, text=True, env=env, timeout=300)
    if res.returncode:
        print(f"skip: building pprof failed: {res.stderr.strip()[-300:]}", flush=True)
        sys.exit(77)
    os.rename(TOOL + ".tmp", TOOL)
    return TOOL


class PprofTool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pprof = pprof_tool()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.prof = os.path.join(cls.tmp.name, "split.pb.gz")
        work = subprocess.Popen(["/usr/bin/python3.11",
                                 os.path.join(ptg.WORKLOADS, "sample_split.py"),
                                 "--seconds", "6"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            res = ptg.run(["sample", "-p", str(work.pid), "-d", "3", "-o", cls.prof])
            if res.returncode:
                raise AssertionError(f"sample failed: {res.stderr}")
        finally:
            work.kill()
            work.wait()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_pprof(self, *args):
        res = subprocess.run([self.pprof, *args, self.prof], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout

    def test_top_names_every_function(self):
        top = self.run_pprof("-top")
        self.assertNotIn("<unknown>", top)
        names = {line.split()[-1] for line in top.splitlines()
                 if re.match(r"\s*[0-9.]+\w*\s+[0-9.]+%", line)}
        for name in ("<module>", "loop", "hot", "cold", "work"):
            self.assertIn(name, names, top)
        traces = self.run_pprof("-traces")
        self.assertNotIn("<unknown>", traces)
        self.assertIn("<module>", traces)

    def test_samples_merged(self):
        raw = self.run_pprof("-raw")
        samples = raw.split("Samples:", 1)[1].split("Locations", 1)[0].splitlines()[2:]
        seen, total, entries = set(), 0, []
        for line in samples:
            m = re.match(r"\s+(\d+)\s+(\d+): ([\d ]+)$", line)
            if m:
                entries.append([int(m.group(1)), int(m.group(2)), m.group(3).split(), ""])
            elif entries and line.strip():
                entries[-1][3] += line.strip() + " "
        self.assertTrue(entries, raw[:2000])
        for count, ns, locs, labels in entries:
            key = (tuple(locs), labels)
            self.assertNotIn(key, seen, f"two samples of one stack: {locs} {labels}")
            seen.add(key)
            total += count
        # the -top total is the sum of the merged samples
        top = self.run_pprof("-top", "-sample_index=samples")
        m = re.search(r"Total samples = (\d+)", top)
        self.assertTrue(m, top)
        self.assertEqual(int(m.group(1)), total)

    def test_python_mapping(self):
        raw = self.run_pprof("-raw")
        maps = raw.split("Mappings", 1)[1]
        self.assertRegex(maps, r"\[python\]\s+\[FN\]\[FL\]\[LN\]")


def folded_total(trace, *args):
    res = ptg.run(["flamegraph", *args, trace])
    if res.returncode:
        raise AssertionError(res.stderr)
    return sum(int(line.rpartition(" ")[2]) for line in res.stdout.splitlines())


def raw_samples(text):
    """(count, location ids, labels) of each Sample of `pprof -raw`."""
    body = text.split("Samples:", 1)[1].split("Locations", 1)[0].splitlines()[2:]
    out = []
    for line in body:
        m = re.match(r"\s+(\d+): ([\d ]+)$", line)
        if m:
            out.append([int(m.group(1)), tuple(m.group(2).split()), ""])
        elif out and line.strip():
            out[-1][2] += line.strip() + " "
    return out


class ExportPprof(unittest.TestCase):
    """export --pprof: a trace's flame graph stacks, one Sample each."""

    @classmethod
    def setUpClass(cls):
        cls.pprof = pprof_tool()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.fib = os.path.join(cls.tmp.name, "fib.ptg")
        res = ptg.run(["record", "-q", "-o", cls.fib, "--", "/usr/bin/python3.11",
                       os.path.join(ptg.WORKLOADS, "fib.py")])
        if res.returncode:
            raise AssertionError(res.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def export(self, trace, *args):
        out = os.path.join(self.tmp.name, os.path.basename(trace) + "".join(args) + ".pb.gz")
        res = ptg.run(["export", "--pprof", out, *args, trace])
        self.assertEqual(res.returncode, 0, res.stderr)
        return out

    def pprof_out(self, *args):
        res = subprocess.run([self.pprof, *args], capture_output=True, text=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout

    def check(self, prof, total_ns):
        samples = raw_samples(self.pprof_out("-raw", prof))
        keys = [(locs, labels) for _, locs, labels in samples]
        self.assertEqual(len(keys), len(set(keys)), "two samples of one stack")
        self.assertEqual(sum(n for n, _, _ in samples), total_ns)
        top = self.pprof_out("-top", prof)
        self.assertNotIn("<unknown>", top)
        return top

    def test_recorded_trace(self):
        prof = self.export(self.fib)
        top = self.check(prof, folded_total(self.fib))
        self.assertIn("<module>", top)
        self.assertRegex(top, r"\s f\n")

    def test_kineto_gpu(self):
        src = os.path.join(os.environ.get("PTG_SHARED_DIR", ""), "traces", "kineto",
                           "train_rank0.json.gz")
        if not os.path.exists(src):
            self.skipTest(f"no {src}")
        trace = os.path.join(self.tmp.name, "train.ptg")
        self.assertEqual(ptg.run(["import", src, "-o", trace]).returncode, 0)
        prof = self.export(trace, "--weight", "gpu")
        top = self.check(prof, folded_total(trace, "--weight", "gpu"))
        # kernel names keep their templates: pprof has no system_name to demangle
        self.assertIn("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>",
                      top)

    def test_nothing_to_write(self):
        out = os.path.join(self.tmp.name, "none.pb.gz")
        res = ptg.run(["export", "--pprof", out, "--weight", "gpu", self.fib])
        self.assertEqual(res.returncode, 1)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
        self.assertIn("nothing to write to pprof", res.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    ptg.main()
