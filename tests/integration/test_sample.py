"""ptrace-gpu sample against real Python processes of both interpreters.

Profiles are decoded with protoc and Debian's copy of pprof's profile.proto,
a decoder this project did not write. Shares are checked against workloads
whose functions split their CPU time by construction (sample_split.py: hot
75%, cold 25%), with tolerances wide enough never to flake.
"""
import codecs
import collections
import glob
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ptg  # noqa: E402

SPLIT = os.path.join(ptg.WORKLOADS, "sample_split.py")
SLEEP = os.path.join(ptg.WORKLOADS, "sample_sleep.py")
DEBIAN = ptg.INTERPRETERS["debian"]
PYENV = ptg.INTERPRETERS["pyenv"]


def proto_dir():
    out = subprocess.run(["dpkg", "-L", "golang-github-google-pprof-dev"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if line.endswith("/proto/profile.proto"):
            return os.path.dirname(line)
    raise unittest.SkipTest("golang-github-google-pprof-dev is not installed")


def parse_text_proto(text):
    """protoc's text format -> nested dicts of lists."""
    root, stack = collections.defaultdict(list), []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if line.endswith("{"):
            child = collections.defaultdict(list)
            cur[line[:-1].strip()].append(child)
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        elif line:
            key, _, value = line.partition(": ")
            if value.startswith('"'):
                value = codecs.escape_decode(value[1:-1].encode())[0].decode("utf-8")
            elif value in ("true", "false"):
                value = value == "true"
            else:
                value = int(value)
            cur[key].append(value)
    return root


class Profile:
    """A pprof file as protoc decodes it."""

    def __init__(self, path):
        raw = gzip.open(path).read()
        res = subprocess.run(["protoc", "--decode", "perftools.profiles.Profile", "-I",
                              proto_dir(), "profile.proto"], input=raw, capture_output=True)
        if res.returncode:
            raise AssertionError(f"protoc cannot decode {path}: {res.stderr.decode()}")
        p = parse_text_proto(res.stdout.decode())
        self.strings = p["string_table"]
        s = self.strings
        self.types = [(s[t["type"][0]], s[t["unit"][0]]) for t in p["sample_type"]]
        self.period = p["period"][0] if p["period"] else 0
        self.period_type = (s[p["period_type"][0]["type"][0]] if p["period_type"] else "")
        self.duration = p["duration_nanos"][0] if p["duration_nanos"] else 0
        self.functions = {f["id"][0]: (s[f["name"][0]] if f["name"] else "",
                                       s[f["filename"][0]] if f["filename"] else "",
                                       f["start_line"][0] if f["start_line"] else 0)
                          for f in p["function"]}
        self.locations = {}
        for loc in p["location"]:
            line = loc["line"][0] if loc["line"] else None
            self.locations[loc["id"][0]] = (
                self.functions[line["function_id"][0]] if line else ("", "", 0),
                line["line"][0] if line and line["line"] else 0)
        self.mappings = p["mapping"]
        self.samples = []
        for smp in p["sample"]:
            labels = {}
            for lab in smp["label"]:
                key = s[lab["key"][0]]
                labels[key] = s[lab["str"][0]] if lab["str"] else lab["num"][0]
            frames = [self.locations[i] for i in smp["location_id"]]
            self.samples.append((frames, smp["value"], labels))

    def total(self, index, pid=None):
        return sum(v[index] for _, v, lab in self.samples if pid is None or lab["pid"] == pid)

    def by_function(self, pid, index=0):
        """Weight of the samples whose stack holds each function name (once per sample)."""
        c = collections.Counter()
        for frames, values, labels in self.samples:
            if labels["pid"] == pid:
                for name in {f[0][0] for f in frames}:
                    c[name] += values[index]
        return c


def folded_totals(path):
    per_proc = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, weight = line.rstrip("\n").rpartition(" ")
            pid = int(re.match(r".* \[(\d+)\]$", stack.split(";")[0]).group(1))
            per_proc[pid] += int(weight)
    return per_proc


def cpu_ns(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")


def def_line(path, name):
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(f"def {name}("):
                return i
    raise AssertionError(f"no def {name} in {path}")


class Sampler:
    """`ptrace-gpu sample ARGS`, returned once sampling has started."""

    def __init__(self, args):
        self.proc = subprocess.Popen([ptg.PTG, "sample", *args], stderr=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.lines = []
        while True:
            line = self.proc.stderr.readline()
            if not line:
                self.proc.wait()
                raise AssertionError("sample failed: " + "".join(self.lines))
            self.lines.append(line)
            if "ptrace-gpu: sampling" in line:
                break

    def wait(self, timeout=120):
        out, err = self.proc.communicate(timeout=timeout)
        self.lines.append(err)
        if self.proc.returncode:
            raise AssertionError(f"sample exited {self.proc.returncode}: {self.stderr}")
        return out

    @property
    def stderr(self):
        return "".join(self.lines)


def start(python, script, *args):
    proc = subprocess.Popen([python, script, *args], stdout=subprocess.PIPE, text=True)
    if not proc.stdout.readline().startswith("ready"):
        proc.kill()
        raise AssertionError(f"{script} did not start")
    return proc


def stop(*procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout:
            p.stdout.close()


class SampleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assert_split(self, prof, pid, interp, min_samples=200):
        counts = prof.by_function(pid)
        hot, cold = counts["hot"], counts["cold"]
        self.assertGreaterEqual(hot + cold, min_samples, f"pid {pid}: too few samples {counts}")
        share = hot / (hot + cold)
        self.assertAlmostEqual(share, 0.75, delta=0.15, msg=f"pid {pid} hot share {share:.2f}")
        interps = {lab["interpreter"] for _, _, lab in prof.samples if lab["pid"] == pid}
        self.assertEqual(interps, {interp})

    def test_shares_of_both_interpreters(self):
        procs = [start(DEBIAN, SPLIT), start(PYENV, SPLIT), start(PYENV, SPLIT)]
        try:
            pids = [p.pid for p in procs]
            pb, folded = os.path.join(self.dir, "x.pb.gz"), os.path.join(self.dir, "x.folded")
            # 499 Hz: hundreds of samples each even on a machine loaded by other work
            s = Sampler(["-p", ",".join(map(str, pids)), "-F", "499", "-d", "7", "-o", pb,
                         "-o", folded])
            cpu0 = {pid: cpu_ns(pid) for pid in pids}
            s.wait()
            cpu = {pid: cpu_ns(pid) - cpu0[pid] for pid in pids}
        finally:
            stop(*procs)
        prof = Profile(pb)
        self.assertEqual(prof.types, [("samples", "count"), ("cpu", "nanoseconds")])
        self.assertEqual((prof.period_type, prof.period), ("cpu", 10**9 // 499))
        self.assertGreater(prof.duration, 6 * 10**9)
        self.assert_split(prof, pids[0], "CPython 3.11.2")
        for pid in pids[1:]:
            self.assert_split(prof, pid, "CPython 3.11.7")
        # samples x period is the CPU time each process got (from /proc, loosely)
        for pid in pids:
            self.assertAlmostEqual(prof.total(1, pid) / cpu[pid], 1.0, delta=0.25,
                                   msg=f"pid {pid}: {prof.total(1, pid)} ns vs {cpu[pid]}")
        # every sample weighs its count times the period, and folded holds the same ns
        for _, values, _ in prof.samples:
            self.assertEqual(values[1], values[0] * prof.period)
        self.assertEqual(folded_totals(folded),
                         {pid: prof.total(1, pid) for pid in pids})
        for frames, _, labels in prof.samples:
            self.assertIn(labels["pid"], pids)
            self.assertEqual(labels["tid"], labels["pid"])  # one thread each
            self.assertEqual(labels["comm"], labels["thread"])
        self.check_functions_and_lines(prof)

    def check_functions_and_lines(self, prof):
        """Functions carry file and first line; frames the line they were executing."""
        funcs = {f[0]: f for f in prof.functions.values() if f[1] == SPLIT}
        for name in ("work", "hot", "cold", "loop", "main"):
            self.assertEqual(funcs[name][2], def_line(SPLIT, name), name)
        work = def_line(SPLIT, "work")
        lines = collections.Counter()
        for frames, values, _ in prof.samples:
            for (name, file, _), line in frames:
                if file == SPLIT and name == "work":
                    lines[line] += values[0]
        # lines of work() only, mostly its loop. A sample taken as the call
        # begins is on the def line: CPython 3.11 puts RESUME there, and a
        # frame that has not run an instruction yet reports co_firstlineno.
        self.assertTrue(set(lines) <= set(range(work, work + 5)), lines)
        self.assertGreaterEqual(lines[work + 2] + lines[work + 3], 0.95 * sum(lines.values()),
                                lines)
        hot_calls = {line for frames, _, _ in prof.samples
                     for (name, file, _), line in frames if name == "loop"}
        self.assertTrue(hot_calls <= set(range(def_line(SPLIT, "loop") + 1,
                                               def_line(SPLIT, "loop") + 6)), hot_calls)

    def test_all_finds_late_processes_and_keeps_exited_ones(self):
        pb = os.path.join(self.dir, "all.pb.gz")
        s = Sampler(["-a", "-F", "499", "-d", "8", "-o", pb, "-v"])
        procs = []
        try:
            time.sleep(1.5)
            # starts after sampling began, exits well before it ends
            procs.append(start(PYENV, SPLIT, "--seconds", "3.5"))
            procs.append(start(DEBIAN, SPLIT, "--seconds", "3.5"))
            for p in procs:
                p.wait(timeout=30)
            s.wait()
        finally:
            stop(*procs)
        prof = Profile(pb)
        for p, interp in zip(procs, ("CPython 3.11.7", "CPython 3.11.2")):
            self.assertIn(f"pid {p.pid} (", s.stderr)
            self.assertIn(f"pid {p.pid} (python3.11) ended", s.stderr)
            self.assert_split(prof, p.pid, interp)
            names = prof.by_function(p.pid)
            self.assertNotIn("[unknown code]", names)

    def test_off_cpu_weighs_blocked_time(self):
        proc = start(DEBIAN, SLEEP)
        try:
            pb = os.path.join(self.dir, "off.pb.gz")
            s = Sampler(["-p", str(proc.pid), "--off-cpu", "-d", "4", "-o", pb])
            s.wait()
        finally:
            stop(proc)
        prof = Profile(pb)
        self.assertEqual(prof.types, [("samples", "count"), ("off_cpu", "nanoseconds")])
        nap = prof.by_function(proc.pid, index=1)["nap"]
        # about the 4 s sampled: 50 ms naps, each counted when the thread runs again
        self.assertGreater(nap, 2.8e9, nap)
        self.assertLess(nap, 4.4e9, nap)
        naps = prof.by_function(proc.pid, index=0)["nap"]
        self.assertGreater(naps, 40)

    def test_native_svg_and_folded_stdout(self):
        proc = start(PYENV, SPLIT)
        try:
            svg = os.path.join(self.dir, "n.svg")
            pb = os.path.join(self.dir, "n.pb.gz")
            s = Sampler(["-p", str(proc.pid), "--native", "-d", "2", "-o", svg, "-o", pb])
            s.wait()
            res = ptg.run(["sample", "-p", str(proc.pid), "-d", "1", "--folded", "-q"])
        finally:
            stop(proc)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("hot (" + SPLIT, res.stdout)
        root = ET.parse(svg).getroot()
        titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
        self.assertTrue(any(t.startswith("hot (") for t in titles))
        prof = Profile(pb)
        names = prof.by_function(proc.pid)
        self.assertIn("hot", names)
        # libpython has a symbol table: the eval loop resolves by name
        self.assertTrue(prof.mappings)
        native = {f[0] for f in prof.functions.values() if "libpython" in f[1]}
        self.assertTrue(native, prof.functions)

    def test_continuous_keeps_the_newest(self):
        proc = start(DEBIAN, SPLIT)
        try:
            s = Sampler(["-p", str(proc.pid), "--every", "1", "--dir", self.dir, "--keep", "2",
                         "-d", "4.5"])
            s.wait()
        finally:
            stop(proc)
        files = sorted(glob.glob(os.path.join(self.dir, "sample-*.pb.gz")))
        self.assertEqual(len(files), 2, os.listdir(self.dir))
        # one a second and the last, partial one (a stalled loop may skip a second)
        self.assertIn(s.stderr.count("wrote "), (4, 5), s.stderr)
        for f in files:
            self.assertRegex(os.path.basename(f), r"^sample-\d{8}T\d{6}Z\.pb\.gz$")
            prof = Profile(f)
            self.assertGreater(prof.total(0, proc.pid), 0)
            self.assertLess(prof.duration, 2 * 10**9)

    def test_unsupported_versions_reported_once(self):
        others = [p for p in ("/root/.pyenv/versions/3.12.1/bin/python3.12",
                              "/root/.pyenv/versions/3.10.13/bin/python3.10") if os.path.exists(p)]
        if not others:
            self.skipTest("no other CPython version installed")
        procs = [subprocess.Popen([py, "-c", "import time; print('ready', flush=True); "
                                   "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
                 for py in others]
        try:
            for p in procs:
                p.stdout.readline()
            pb = os.path.join(self.dir, "u.pb.gz")
            # three rescans of /proc: still said once
            s = Sampler(["-a", "-d", "3.5", "-o", pb])
            s.wait()
            res = ptg.run(["sample", "-p", str(procs[0].pid), "-d", "1"])
        finally:
            stop(*procs)
        for p in procs:
            self.assertEqual(s.stderr.count(f"skipping pid {p.pid}: unsupported Python version"),
                             1, s.stderr)
        self.assertEqual(res.returncode, 1)
        self.assertEqual(res.stderr.count("\n"), 1, res.stderr)
        self.assertIn("unsupported Python version", res.stderr)

    def test_errors(self):
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            res = ptg.run(["sample", "-p", str(sleeper.pid), "-d", "1"])
        finally:
            stop(sleeper)
        self.assertEqual(res.returncode, 1)
        self.assertEqual(res.stderr.count("\n"), 1, res.stderr)
        self.assertIn("is not a Python process", res.stderr)

        res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              ptg.PTG, "sample", "-a", "-d", "1"], capture_output=True, text=True)
        self.assertEqual(res.returncode, 1)
        self.assertEqual(res.stderr.count("\n"), 1, res.stderr)
        self.assertIn("needs root", res.stderr)

        # found before sampling, not after it
        res = ptg.run(["sample", "-a", "-d", "30", "-o", "/nonexistent/x.pb.gz"], timeout=10)
        self.assertEqual(res.returncode, 1)
        self.assertEqual(res.stderr.count("\n"), 1, res.stderr)
        self.assertIn("cannot write /nonexistent/x.pb.gz", res.stderr)

        for args in (["-d", "1"], ["-a", "-p", "1"], ["-a", "-F", "0"],
                     ["-a", "--every", "5"], ["-a", "-o", "-", "--format", "pprof"]):
            res = ptg.run(["sample", *args])
            self.assertEqual(res.returncode, 2, args)


if __name__ == "__main__":
    ptg.main()
