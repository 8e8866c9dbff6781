"""ptrace-gpu sample against real Python processes.

Profiles are decoded with protoc and Debian's copy of pprof's profile.proto,
a decoder this project did not write. Shares are checked against workloads
whose functions split their CPU time by construction (sample_split.py: hot
75%, cold 25%), with tolerances wide enough never to flake.

SampleStacks runs for each interpreter of ptg.selected() (PTG_PYTHON: one):
every sampled stack must be one the workload can have, frame by frame, with
the line each frame was executing. SampleTest (options, outputs, errors)
runs once, with both kinds of 3.11 executable.
"""
# ptg: per version (tests/CMakeLists.txt): one interpreter of each CPython version
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
# Sampling of several processes at once, of both kinds of 3.11 executable.
DEBIAN = ptg.Python("debian-3.11").exe
PYENV = ptg.Python("pyenv-3.11").exe


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
        self.native = set()  # functions of native frames: their locations have an address
        for loc in p["location"]:
            line = loc["line"][0] if loc["line"] else None
            self.locations[loc["id"][0]] = (
                self.functions[line["function_id"][0]] if line else ("", "", 0),
                line["line"][0] if line and line["line"] else 0)
            if loc["address"]:
                self.native.add(self.locations[loc["id"][0]][0])
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
    """python: an executable's path, or a ptg.Python (script as it sees it; "-c" for code)."""
    if isinstance(python, ptg.Python):
        argv = python.argv(script if script == "-c" else python.path(script), *args)
    else:
        argv = [python, script, *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
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


LOST = ("[no Python stack]", "[truncated]")


def reported_lost(stderr):
    """Samples the sampler's summary says lost their Python stack, or part of it."""
    return sum(int(m) for m in re.findall(
        r"(\d+) samples had (?:an unreadable frame|no Python thread state)", stderr))


def line_of(text, marker):
    """The line of text that holds marker (once)."""
    found = [i for i, line in enumerate(text.splitlines(), 1) if marker in line]
    if len(found) != 1:
        raise AssertionError(f"{marker!r} is on lines {found}")
    return found[0]


# Python functions called from C: sorted() calls key(), sum() resumes gen().
# On 3.11 the frames they start are marked is_entry; from 3.12 on a C-stack
# shim frame sits under each, which the sampler must step over.
CENTRY = """import time
def key(x):
    s = 0
    for i in range(300):
        s += i ^ x
    return s  # key ends
def gen(n):
    for i in range(n):  # gen loops
        yield key(i)  # gen yields
def by_sort():
    return sorted(range(20), key=key)  # by_sort calls
def by_gen():
    return sum(gen(20))  # by_gen calls
def main(deadline):
    while time.monotonic() < deadline:  # main loops
        by_sort()  # main calls by_sort
        by_gen()  # main calls by_gen
print("ready", flush=True)
main(time.monotonic() + 600)  # module calls
"""


class StackRules:
    """The stacks a workload can have: the functions each function calls,
    on which lines, and the lines it runs as the innermost frame."""

    def __init__(self, path, text, roots):
        """roots: the frames of other files above the workload's (as "file:name") -> the
        workload's outermost function under them."""
        self.path, self.text, self.roots = path, text, roots
        self.calls, self.leaf, self.firstline = {}, {}, {}

    def func(self, name, leaf_lines=(), **calls):
        """calls: callee=line or callee=(lines...)."""
        first = 1 if name == "<module>" else line_of(self.text, f"def {name}(")
        self.firstline[name] = first
        self.calls[name] = {k: {v} if isinstance(v, int) else set(v) for k, v in calls.items()}
        # innermost, a frame is at a line of its own code; at a call line (the
        # call not started yet, a C function running, or C code between two
        # calls back into Python); or at its def line (no instruction run yet)
        self.leaf[name] = set(leaf_lines).union({first}, *self.calls[name].values())

    def check(self, test, frames, what):
        """frames: outermost first, ((name, file, start line), line)."""
        ours = [i for i, ((_, file, _), _) in enumerate(frames) if file == self.path]
        test.assertTrue(ours, f"{what}: no frame of {self.path}: {frames}")
        first = ours[0]
        # the workload's frames are one run, under one of the roots
        test.assertEqual(ours, list(range(first, len(frames))), f"{what}: {frames}")
        root = tuple(os.path.basename(f[0][1]) + ":" + f[0][0] for f in frames[:first])
        test.assertIn(root, self.roots, f"{what}: {frames}")
        mine = frames[first:]
        test.assertEqual(mine[0][0][0], self.roots[root], f"{what}: {frames}")
        for i, ((name, _, start), line) in enumerate(mine):
            test.assertIn(name, self.calls, f"{what}: {frames}")
            test.assertEqual(start, self.firstline[name], f"{what}: {name}'s first line")
            if i + 1 == len(mine):
                test.assertIn(line, self.leaf[name], f"{what}: innermost {name}: {frames}")
                continue
            callee = mine[i + 1][0][0]
            test.assertIn(callee, self.calls[name], f"{what}: {name} -> {callee}: {frames}")
            test.assertIn(line, self.calls[name][callee],
                          f"{what}: line of {name}'s call of {callee}: {frames}")


def split_rules(python):
    with open(SPLIT) as f:
        text = f.read()
    threads = ("threading.py:Thread._bootstrap", "threading.py:Thread._bootstrap_inner",
               "threading.py:Thread.run")
    r = StackRules(python.path(SPLIT), text, {(): "<module>", threads: "loop"})
    loop = line_of(text, "def loop(")
    r.func("<module>", main=line_of(text, "    main()"))
    r.func("main", loop=line_of(text, "    loop(deadline)"))
    # the while line, then hot() three times and cold()
    r.func("loop", [loop + 1], hot=(loop + 2, loop + 3, loop + 4), cold=loop + 5)
    r.func("hot", work=line_of(text, "def hot(") + 1)
    r.func("cold", work=line_of(text, "def cold(") + 1)
    r.func("work", range(line_of(text, "def work(") + 1, line_of(text, "    return x") + 1))
    return r


def centry_rules():
    t = CENTRY
    r = StackRules("<string>", t, {(): "<module>"})
    r.func("<module>", main=line_of(t, "# module calls"))
    r.func("main", [line_of(t, "# main loops")], by_sort=line_of(t, "# main calls by_sort"),
           by_gen=line_of(t, "# main calls by_gen"))
    r.func("by_sort", key=line_of(t, "# by_sort calls"))
    r.func("by_gen", gen=line_of(t, "# by_gen calls"))
    r.func("gen", [line_of(t, "# gen loops")], key=line_of(t, "# gen yields"))
    r.func("key", range(line_of(t, "def key(") + 1, line_of(t, "# key ends") + 1))
    return r


@ptg.per_interpreter
class SampleStacks(unittest.TestCase):
    """Stacks, names and lines on each CPython version, threads and C-entered frames included."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def check_stacks(self, python):
        procs = [start(python, SPLIT, "--threads", "3"), start(python, "-c", CENTRY)]
        try:
            pids = [p.pid for p in procs]
            pb = os.path.join(self.dir, "s.pb.gz")
            s = Sampler(["-p", ",".join(map(str, pids)), "-F", "499", "-d", "4", "-o", pb])
            s.wait()
        finally:
            stop(*procs)
        prof = Profile(pb)
        version = "CPython %d.%d." % python.version
        rules = {pids[0]: split_rules(python), pids[1]: centry_rules()}
        ends, lost, unknown = collections.Counter(), 0, 0
        for frames, values, labels in prof.samples:
            self.assertTrue(labels["interpreter"].startswith(version), labels)
            frames = frames[::-1]
            if frames[0][0][0] in LOST:
                lost += values[0]
                continue
            if any(f[0][0] == "[unknown code]" for f in frames):
                # the same transient seen one step later: the frame read, but the
                # code pointer in it was stale (counted: "frames name code that was gone")
                unknown += values[0]
                continue
            rules[labels["pid"]].check(self, frames, f"{python} pid {labels['pid']} tid "
                                       f"{labels['tid']}")
            ends[labels["pid"], labels["tid"], tuple(f[0][0] for f in frames[-2:])] += values[0]
        # a transient now and then (see docs/sample.md), said in the summary
        self.assertLessEqual(lost, reported_lost(s.stderr), s.stderr)
        self.assertLessEqual(lost, prof.total(0) // 200, s.stderr)
        gone = re.search(r"(\d+) frames name code that was gone", s.stderr)
        self.assertLessEqual(unknown, int(gone.group(1)) if gone else 0, s.stderr)
        self.assertLessEqual(unknown, prof.total(0) // 200, s.stderr)
        # each thread of the split workload, mostly in work(), 3/4 of that under hot()
        threads = {tid for pid, tid, _ in ends if pid == pids[0]}
        self.assertEqual(len(threads), 3, ends)
        for tid in threads:
            mine = {k[2]: v for k, v in ends.items() if k[1] == tid}
            hot, cold = mine.get(("hot", "work"), 0), mine.get(("cold", "work"), 0)
            self.assertGreater(hot + cold, 50, f"{python} tid {tid}: {mine}")
            self.assertGreater(hot + cold, 0.8 * sum(mine.values()), f"{python} tid {tid}: {mine}")
            self.assertAlmostEqual(hot / (hot + cold), 0.75, delta=0.15,
                                   msg=f"{python} tid {tid}: {mine}")
        # key() under both ways in from C
        got = {k[2] for k in ends if k[0] == pids[1]}
        self.assertIn(("by_sort", "key"), got, ends)
        self.assertIn(("gen", "key"), got, ends)

    def check_native(self, python):
        """--native: the Python frames merged into the native stack stay in their order."""
        proc = start(python, "-c", CENTRY)
        try:
            pb = os.path.join(self.dir, "n.pb.gz")
            s = Sampler(["-p", str(proc.pid), "--native", "-F", "499", "-d", "2", "-o", pb])
            s.wait()
        finally:
            stop(proc)
        prof = Profile(pb)
        rules = centry_rules()
        self.assertTrue(prof.native, f"{python}: no native frame")
        # a native frame that no mapping covers has no address
        native = prof.native | {("[unknown]", "", 0)}
        lost = 0
        for frames, values, labels in prof.samples:
            python_frames = [f for f in frames[::-1] if f[0] not in native]
            if not python_frames or python_frames[0][0][0] in LOST:
                lost += values[0]
                continue
            rules.check(self, python_frames, f"{python} --native")
        self.assertLessEqual(lost, reported_lost(s.stderr), s.stderr)

    def check_off_cpu(self, python):
        proc = start(python, SLEEP)
        try:
            pb = os.path.join(self.dir, "off.pb.gz")
            s = Sampler(["-p", str(proc.pid), "--off-cpu", "-d", "2", "-o", pb])
            s.wait()
        finally:
            stop(proc)
        prof = Profile(pb)
        with open(SLEEP) as f:
            text = f.read()
        nap = ("nap", line_of(text, "time.sleep("))
        sleeper = ("sleeper", line_of(text, "        nap()"))
        naps = collections.Counter()
        for frames, values, labels in prof.samples:
            names = [(f[0][0], f[1]) for f in frames[::-1]]
            if nap in names:
                self.assertEqual(names[-2:], [sleeper, nap], names)
                naps[labels["tid"]] += values[1]
        # only the sleeper thread, blocked for about the 2 s sampled
        self.assertEqual(len(naps), 1, naps)
        self.assertNotIn(proc.pid, naps)
        self.assertGreater(sum(naps.values()), 1.4e9, naps)


@ptg.once
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
            cut = ptg.run(["sample", "-p", str(proc.pid), "-d", "1", "--folded", "-q",
                           "--max-stack", "2"])
        finally:
            stop(proc)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("hot (" + SPLIT, res.stdout)
        # the process frame, one more, and what is deeper folded into one
        self.assertEqual(cut.returncode, 0, cut.stderr)
        stacks = [line.rpartition(" ")[0].split(";") for line in cut.stdout.splitlines()]
        self.assertTrue(stacks)
        self.assertLessEqual(max(len(st) for st in stacks), 3, cut.stdout)
        self.assertTrue(any(st[-1].endswith(" frames cut]") for st in stacks), cut.stdout)
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
        # below the supported range, and so never supported
        others = [p for p in (ptg.pyenv_exe("3.10"), ptg.pyenv_exe("3.9")) if p]
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
