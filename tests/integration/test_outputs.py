"""Output files are safe to write as root in a directory others can write.

Every writer creates a new file (mode 0600) beside its output and renames it
over the output once complete: a symlink planted at the output (or at a name
the writer used to derive from it) is replaced, its target never written; a
failure leaves the previous file as it was, and no temporary file behind.
"""
import gzip
import json
import os
import pstats
import resource
import stat
import subprocess
import tempfile
import unittest

import ptg

PY = ptg.Python(ptg.ONCE)
VICTIM_TEXT = b"not yours to overwrite\n"

# A few calls and a step function for --schedule, in a second or less.
SCRIPT = """
def work(n):
    return sum(range(n))

def step(i):
    return work(1000 + i)

for i in range(12):
    step(i)
"""


class Outputs(unittest.TestCase):
    def setUp(self):
        if PY.missing:
            self.skipTest(PY.missing)
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.victim = self.path("victim")
        with open(self.victim, "wb") as f:
            f.write(VICTIM_TEXT)
        self.script = self.path("work.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def plant(self, name):
        """A symlink at name to the victim file, as another user could plant it."""
        os.symlink(self.victim, self.path(name))
        return self.path(name)

    def assert_safe_output(self, path):
        """The victim is intact, path a new regular file of mode 0600, no temporary left."""
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), VICTIM_TEXT, "the symlink's target was written")
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode), f"{path} is not a regular file")
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, f"mode of {path}")
        self.assert_no_temporaries()

    def assert_no_temporaries(self, where=None):
        where = where or self.dir
        left = [n for n in os.listdir(where)
                if n.endswith(".tmp") and not os.path.islink(os.path.join(where, n))]
        self.assertEqual(left, [], "temporary files left behind")

    def record(self, out, *args):
        res = ptg.run(["record", "-o", out, *args, "--", *PY.argv(self.script)])
        self.assertEqual(res.returncode, 0, res.stderr)
        return res

    def test_record_replaces_planted_symlink(self):
        out = self.plant("run.ptg")
        self.record(out)
        self.assert_safe_output(out)
        self.assertGreater(ptg.Trace(out).count(self.script)["work:2"], 11)

    def test_schedule_cycles_replace_planted_symlinks(self):
        out = self.path("run.ptg")
        planted = [self.plant("run.cycle1.ptg"), self.plant("run.ptg.recording")]
        res = self.record(out, "--schedule", "wait=1,warmup=1,active=2,repeat=2",
                          "--step-function", "__main__:step")
        self.assertTrue(os.path.exists(self.path("run.cycle2.ptg")), res.stderr)
        self.assert_safe_output(planted[0])
        self.assertEqual(ptg.Trace(planted[0]).meta["steps"], "ProfilerStep#2-#3")
        self.assertFalse(os.path.lexists(planted[1]), "the recording's scratch file stays")

    def test_failed_record_keeps_previous_trace(self):
        out = self.path("run.ptg")
        self.record(out)
        with open(out, "rb") as f:
            before = f.read()
        res = ptg.run(["record", "-q", "-p", "999999999", "-o", out])
        self.assertNotEqual(res.returncode, 0)
        # --steps of a command that never ran Python: the writer was open, then record failed
        res = ptg.run(["record", "-q", "--steps", "1", "-o", out, "--", "/bin/true"])
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("need Python", res.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), before, "a failed record changed the previous trace")
        self.assert_no_temporaries()

    def trace(self):
        """A recorded trace of SCRIPT."""
        out = self.path("in.ptg")
        self.record(out)
        return out

    def assert_refused(self, args, what):
        """args fail with one line on stderr, and what is unchanged."""
        with open(what, "rb") as f:
            before = f.read()
        res = ptg.run(args)
        self.assertEqual(res.returncode, 2, res.stderr)
        self.assertEqual(len(res.stderr.strip().splitlines()), 1, res.stderr)
        self.assertIn("itself", res.stderr)
        with open(what, "rb") as f:
            self.assertEqual(f.read(), before, f"{what} changed")

    def test_export_replaces_planted_symlinks(self):
        trace = self.trace()
        outs = {name: self.plant(name) for name in ("t.json", "t.json.gz", "t.pstats")}
        for opt, name in (("--chrome", "t.json"), ("--chrome", "t.json.gz"),
                          ("--pstats", "t.pstats")):
            res = ptg.run(["export", opt, outs[name], trace])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assert_safe_output(outs[name])
        with open(outs["t.json"]) as f:
            events = json.load(f)["traceEvents"]
        self.assertTrue(any(e.get("name", "").endswith("(2): work") for e in events))
        with gzip.open(outs["t.json.gz"]) as f:
            self.assertEqual(json.load(f)["traceEvents"], events)
        stats = pstats.Stats(outs["t.pstats"])
        self.assertTrue(any(k[2] == "work" for k in stats.stats))

    def test_export_refuses_its_input(self):
        trace = self.trace()
        self.assert_refused(["export", "--chrome", trace, trace], trace)
        self.assert_refused(["export", "--pstats", trace, trace], trace)
        os.link(trace, self.path("hard.ptg"))
        self.assert_refused(["export", "--chrome", self.path("hard.ptg"), trace], trace)
        # a symlink to the input is replaced, the input stays
        os.symlink(trace, self.path("link.json"))
        with open(trace, "rb") as f:
            before = f.read()
        res = ptg.run(["export", "--chrome", self.path("link.json"), trace])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(trace, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_flamegraph_replaces_planted_symlinks(self):
        trace = self.trace()
        for name in ("t.folded", "t.svg"):
            out = self.plant(name)
            res = ptg.run(["flamegraph", "-o", out, trace])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assert_safe_output(out)
            with open(out) as f:
                self.assertIn("work (", f.read())
        self.assert_refused(["flamegraph", "-o", trace, trace], trace)

    def test_import_replaces_planted_symlink(self):
        kineto = self.path("k.json")
        res = ptg.run(["export", "--chrome", kineto, self.trace()])
        self.assertEqual(res.returncode, 0, res.stderr)
        out = self.plant("k.ptg")
        res = ptg.run(["import", kineto])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assert_safe_output(out)
        self.assertGreater(ptg.Trace(out).count(self.script)["work:2"], 11)
        self.assert_refused(["import", kineto, "-o", kineto], kineto)

    def test_import_of_bad_json_leaves_no_output(self):
        kineto = self.path("k.json")
        res = ptg.run(["export", "--chrome", kineto, self.trace()])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(kineto, "rb") as f:
            good = f.read()
        bad = {
            "truncated.json": good[:len(good) // 2],
            "garbage.json": good[:1000] + b"\x00\xff{]" + good[1000:],
            "notatrace.json": json.dumps({"traceEvents": {"ph": "X"}}).encode(),
        }
        for name, data in bad.items():
            src = self.path(name)
            with open(src, "wb") as f:
                f.write(data)
            out = self.path(name.replace(".json", ".ptg"))
            res = ptg.run(["import", src])
            self.assertNotEqual(res.returncode, 0, f"{name}: {res.stdout}")
            self.assertFalse(os.path.lexists(out), f"{name} left {out}")
            # and a previous output of the same name stays as it was
            with open(out, "wb") as f:
                f.write(VICTIM_TEXT)
            res = ptg.run(["import", src])
            self.assertNotEqual(res.returncode, 0)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), VICTIM_TEXT, f"{name} changed {out}")
        self.assert_no_temporaries()

    def test_sample_replaces_planted_symlinks(self):
        proc = subprocess.Popen(PY.argv("-c", "while True: pass"))
        try:
            # the old fixed scratch name, next to the output, is planted too
            outs = [self.plant("s.pb.gz"), self.plant("s.folded")]
            self.plant("s.pb.gz.tmp")
            res = ptg.run(["sample", "-q", "-p", str(proc.pid), "-d", "0.5",
                           "-o", outs[0], "-o", outs[1]])
            self.assertEqual(res.returncode, 0, res.stderr)
        finally:
            proc.kill()
            proc.wait()
        for out in outs:
            self.assert_safe_output(out)
        with gzip.open(outs[0]) as f:
            self.assertGreater(len(f.read()), 0)
        with open(outs[1]) as f:
            self.assertIn("python", f.read())

    def test_file_size_limit_keeps_complete_chunks(self):
        """RLIMIT_FSIZE fails the write (the recorder ignores SIGXFSZ) as a full disk does."""
        out = self.path("big.ptg")
        code = "def f(i):\n    return i\nfor i in range(2000000):\n    f(i)\n"

        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

        res = subprocess.run([ptg.PTG, "record", "-q", "-o", out, "--", *PY.argv("-c", code)],
                             capture_output=True, text=True, preexec_fn=limit, timeout=300)
        self.assertEqual(res.returncode, 1, res.stderr)
        loss = [line for line in res.stderr.splitlines() if "keeps the" in line]
        self.assertEqual(len(loss), 1, res.stderr)
        self.assertIn("(File too large)", loss[0])
        kept = int(loss[0].split("keeps the ")[1].split()[0])
        self.assertGreater(kept, 100000)
        self.assertLessEqual(os.path.getsize(out), 1 << 20)
        trace = ptg.Trace(out)
        self.assertEqual(len(trace.records), kept)
        self.assertTrue(any(l.startswith("trace_write ") for l in trace.losses), trace.losses)
        self.assert_no_temporaries()


def mount_tmpfs(where, size):
    """A tmpfs of size at where, or the reason why none can be mounted."""
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                          where], capture_output=True, text=True)
    return None if res.returncode == 0 else res.stderr.strip() or "mount failed"


class FullDisk(unittest.TestCase):
    """record on a 2 MiB file system: the trace ends with the last chunk that fit."""

    def setUp(self):
        if PY.missing:
            self.skipTest(PY.missing)
        self.tmp = tempfile.TemporaryDirectory()
        why = mount_tmpfs(self.tmp.name, "2m")
        if why:
            self.tmp.cleanup()
            self.skipTest(f"cannot mount a tmpfs: {why}")

    def tearDown(self):
        subprocess.run(["umount", self.tmp.name], check=True)
        self.tmp.cleanup()

    def test_full_disk_keeps_complete_chunks(self):
        out = os.path.join(self.tmp.name, "full.ptg")
        # ~6M records: compressed, several times what the file system holds
        code = "def f(i):\n    return i\nfor i in range(3000000):\n    f(i)\n"
        res = ptg.run(["record", "-q", "-o", out, "--", *PY.argv("-c", code)], timeout=300)
        self.assertEqual(res.returncode, 1, res.stderr)
        loss = [line for line in res.stderr.splitlines() if "keeps the" in line]
        self.assertEqual(len(loss), 1, res.stderr)
        self.assertRegex(loss[0], r"^trace: .*full\.ptg keeps the \d+ records written before "
                         r"the failure \(No space left on device\); \d+ more and every later "
                         r"event are lost$")
        kept = int(loss[0].split("keeps the ")[1].split()[0])
        trace = ptg.Trace(out)
        self.assertEqual(len(trace.records), kept)
        self.assertGreater(kept, 100000)
        self.assertTrue(any(l.startswith("trace_write ") for l in trace.losses), trace.losses)
        self.assertEqual(trace.meta["source"], "ptrace-gpu record")
        self.assertGreater(sum(1 for r in trace.records if r.kind == "py_enter"), 50000)
        self.assertEqual(stat.S_IMODE(os.lstat(out).st_mode), 0o600)
        self.assertEqual([n for n in os.listdir(self.tmp.name) if n != "full.ptg"], [])
        # the reports read it too
        res = ptg.run(["report", out])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn("trace_write", res.stdout)

    def test_import_on_full_disk_leaves_previous_output(self):
        """An import that cannot be written is no trace: nothing of it stays."""
        work = tempfile.TemporaryDirectory()
        self.addCleanup(work.cleanup)
        trace, kineto = os.path.join(work.name, "in.ptg"), os.path.join(work.name, "k.json")
        code = "def f(i):\n    return i\nfor i in range(100000):\n    f(i)\n"
        res = ptg.run(["record", "-q", "-o", trace, "--", *PY.argv("-c", code)])
        self.assertEqual(res.returncode, 0, res.stderr)
        res = ptg.run(["export", "--chrome", kineto, trace])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertGreater(os.path.getsize(trace), 160 << 10)
        out = os.path.join(self.tmp.name, "k.ptg")
        with open(out, "wb") as f:
            f.write(VICTIM_TEXT)
        # what is left of the 2 MiB: less than the trace
        with open(os.path.join(self.tmp.name, "filler"), "wb") as f:
            f.write(b"\0" * (1920 << 10))
        res = ptg.run(["import", kineto, "-o", out])
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertIn("No space left on device", res.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), VICTIM_TEXT)
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["filler", "k.ptg"])


if __name__ == "__main__":
    ptg.main()
