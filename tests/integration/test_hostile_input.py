# SPDX-License-Identifier: MIT
"""Hostile or huge input stays bounded: in memory, in time and in output size,
and fails with one line rather than a crash or a half-written file."""
import json
import os
import re
import struct
import subprocess
import tempfile
import time
import unittest
import zlib

import ptg

MiB = 1 << 20


def run_rusage(args, stdout=subprocess.DEVNULL):
    """(returncode, stderr, peak RSS in bytes, wall seconds) of ptrace-gpu ARGS,
    run under tests/helpers/maxrss.c."""
    t0 = time.monotonic()
    rfd, wfd = os.pipe()
    try:
        p = subprocess.run([os.path.join(ptg.BUILD, "tests", "maxrss"), str(wfd), ptg.PTG,
                            *args], stdout=stdout, stderr=subprocess.PIPE, pass_fds=(wfd,))
        os.close(wfd)
        wfd = -1
        with os.fdopen(rfd) as f:
            rfd = -1
            rss_kib = int(f.read() or 0)
    finally:
        for fd in (rfd, wfd):
            if fd >= 0:
                os.close(fd)
    return (p.returncode, p.stderr.decode(errors="replace"), rss_kib * 1024,
            time.monotonic() - t0)


def gzip_file(path, head, fill, count, tail):
    """head + fill * count + tail, gzipped into path, without holding it whole."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        f.write(z.compress(head))
        for _ in range(count):
            f.write(z.compress(fill))
        f.write(z.compress(tail))
        f.write(z.flush())


class ImportBomb(unittest.TestCase):
    """import streams its input: a small gzip file that inflates to a GiB
    neither fills memory nor leaves an output behind."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out.ptg")

    def tearDown(self):
        self.tmp.cleanup()

    def check_bomb(self, head, fill, count, tail, expect):
        bomb = os.path.join(self.tmp.name, "bomb.json.gz")
        gzip_file(bomb, head, fill, count, tail)
        size = os.path.getsize(bomb)
        inflated = len(head) + len(fill) * count + len(tail)
        rc, err, rss, wall = run_rusage(["import", "-o", self.out, bomb])
        print(f"\n  {size} bytes inflating to {inflated >> 20} MiB: exit {rc}, "
              f"peak RSS {rss / MiB:.1f} MiB, {wall:.2f} s: {err.strip()}")
        self.assertEqual(rc, 1, err)
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("ptrace-gpu: import: "), lines[0])
        self.assertIn(expect, lines[0])
        self.assertLess(rss, 300 * MiB)
        self.assertFalse(os.path.exists(self.out), "partial output left behind")

    def test_huge_string(self):
        # one 1 GiB event name: json-c would hold it whole
        self.check_bomb(b'{"traceEvents": [{"ph": "X", "name": "', b"a" * MiB, 1024,
                        b'"}]}', "JSON value longer than")

    def test_whitespace(self):
        # holds no memory once streamed, but is no trace: refused by its inflation ratio
        self.check_bomb(b'{"traceEvents": [', b" " * MiB, 1024, b"]}", "gzip bomb")

    def test_plain_file_still_imports(self):
        """The bounds leave a real trace alone, gzipped or not."""
        ev = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, ' \
             b'"ts": 1.5, "dur": 2},'
        body = b'{"traceEvents": [' + ev * 1000 + b'{"ph": "M", "name": "x"}]}'
        plain, gz = os.path.join(self.tmp.name, "t.json"), os.path.join(self.tmp.name, "t.json.gz")
        with open(plain, "wb") as f:
            f.write(body)
        gzip_file(gz, body, b"", 0, b"")
        for path in (plain, gz):
            rc, err, _, _ = run_rusage(["import", "-o", self.out, path])
            self.assertEqual(rc, 0, err)
            self.assertEqual(ptg.Trace(self.out).meta["import.events"], "1001")
            os.unlink(self.out)


class ImportCounts(unittest.TestCase):
    """What import counts per name of its input stays bounded by the input,
    not by the square of it."""

    def test_unknown_categories(self):
        n = 200000
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "cats.json"), os.path.join(tmp, "cats.ptg")
            with open(src, "w") as f:
                json.dump({"traceEvents": [{"ph": "X", "cat": f"made-up {i}", "name": "n",
                                            "pid": 1, "tid": 1, "ts": i, "dur": 1}
                                           for i in range(n)]}, f)
            rc, err, rss, wall = run_rusage(["import", "-o", out, src])
            print(f"\n  {n} distinct unknown categories: {wall:.2f} s, "
                  f"peak RSS {rss / MiB:.1f} MiB", end="")
            self.assertEqual(rc, 0, err)
            self.assertLess(wall, 20)
            meta = ptg.Trace(out).meta
        unknown = {k: int(v) for k, v in meta.items() if k.startswith("import.unknown.")}
        self.assertEqual(int(meta["import.unknown"]), n)
        self.assertEqual(sum(unknown.values()), n)
        self.assertLessEqual(len(unknown), 65)
        self.assertEqual(unknown["import.unknown.(other)"], n - 64)


    def test_idle_many_gaps(self):
        """idle -n N keeps the N longest gaps in a heap: 200,000 gaps, each
        longer than the last, with N larger than all of them."""
        n = 200000
        with tempfile.TemporaryDirectory() as tmp:
            src, out = os.path.join(tmp, "gaps.json"), os.path.join(tmp, "gaps.ptg")
            evs, ts = [], 0
            for i in range(n + 1):
                evs.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                            "ts": ts, "dur": 1,
                            "args": {"stream": 7, "device": 0, "correlation": i + 1}})
                ts += 2 + i
            with open(src, "w") as f:
                json.dump({"traceEvents": evs}, f)
            res = ptg.run(["import", "-o", out, src])
            self.assertEqual(res.returncode, 0, res.stderr)
            t0 = time.monotonic()
            res = subprocess.run([ptg.PTG, "idle", "--json", "-n", "1000000", out],
                                 capture_output=True, text=True)
            wall = time.monotonic() - t0
        print(f"\n  idle -n 1000000 with {n} growing gaps: {wall:.2f} s", end="")
        self.assertEqual(res.returncode, 0, res.stderr)
        # an insertion into a sorted array per gap took 21 s here
        self.assertLess(wall, 10)
        gaps = json.loads(res.stdout)["gpu"]["longest_idle_intervals"]
        self.assertEqual(len(gaps), n)
        # kernel i + 1 starts 2 + i µs after kernel i, which lasts 1 µs
        self.assertEqual([g["dur_ns"] for g in gaps[:3]], [n * 1000, (n - 1) * 1000,
                                                            (n - 2) * 1000])


class InvalidUtf8(unittest.TestCase):
    """Names that are not UTF-8 (json-c imports bytes as they are; any .ptg can
    hold any bytes) come out of every JSON writer as valid JSON."""

    BAD = [b"f\xff\xfe", b"overlong \xc0\xaf", b"surrogate \xed\xa0\x80", b"cut \xe4\xb8"]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ptg = os.path.join(self.tmp.name, "bad.ptg")
        evs = []
        for i, bad in enumerate(self.BAD):
            evs.append(b'{"ph": "X", "cat": "python_function", "name": "app\xff.py(%d): %s", '
                       b'"pid": 1, "tid": 1, "ts": %d, "dur": 5}' % (i + 1, bad, 10 * i))
            evs.append(b'{"ph": "X", "cat": "cpu_op", "name": "aten::%s", "pid": 1, "tid": 1, '
                       b'"ts": %d, "dur": 2, "args": {"External id": %d}}' % (bad, 10 * i + 1,
                                                                               i + 1))
        evs.append(b'{"ph": "X", "cat": "kernel", "name": "k\xff", "pid": 0, "tid": 7, '
                   b'"ts": 3, "dur": 4, "args": {"correlation": 9, "stream": 7, "device": 0}}')
        evs.append(b'{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, '
                   b'"args": {"name": "t\xfe"}}')
        doc = (b'{"schemaVersion": 1, "deviceProperties": [{"name": "gpu\xff"}], '
               b'"traceEvents": [' + b", ".join(evs) + b'], "displayTimeUnit": "ms"}')
        src = os.path.join(self.tmp.name, "bad.json")
        with open(src, "wb") as f:
            f.write(doc)
        res = ptg.run(["import", "-o", self.ptg, src])
        self.assertEqual(res.returncode, 0, res.stderr)

    def tearDown(self):
        self.tmp.cleanup()

    def load_strict(self, data):
        text = data.decode("utf-8")  # strict: raises on any invalid sequence
        return json.loads(text)  # strict=True: no raw control characters either

    def test_chrome(self):
        out = os.path.join(self.tmp.name, "out.json")
        res = ptg.run(["export", "--chrome", out, self.ptg])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(out, "rb") as f:
            doc = self.load_strict(f.read())
        names = [e.get("name", "") for e in doc["traceEvents"]]
        self.assertIn("aten::f\ufffd\ufffd", names)
        self.assertTrue(any(n.endswith("overlong \ufffd\ufffd") for n in names), names)
        self.assertEqual(doc["deviceProperties"], [{"name": "gpu\ufffd"}])

    def test_idle_json(self):
        res = subprocess.run([ptg.PTG, "idle", "--json", self.ptg], capture_output=True)
        self.assertEqual(res.returncode, 0, res.stderr)
        doc = self.load_strict(res.stdout)
        names = [n["name"] for n in doc["self_time"]]
        self.assertIn("aten::f\ufffd\ufffd", names)

    def test_crafted_meta(self):
        """A Kineto key of the trace's metadata is JSON text written back as it
        is: text that is no JSON becomes a string, not a broken document."""
        trace = os.path.join(self.tmp.name, "meta.json")
        with open(trace, "w") as f:
            json.dump({"traceEvents": [], "x": "y"}, f)
        res = ptg.run(["import", "-o", self.ptg, trace])
        self.assertEqual(res.returncode, 0, res.stderr)
        # the value '"y"' made into text of the same length that is no JSON,
        # in the first chunk (META): header of docs/trace-format.md, compressed payload
        with open(self.ptg, "rb") as f:
            data = f.read()
        version = struct.unpack_from("<I", data, 8)[0]
        magic, ctype, raw_len, comp_len, _, count = struct.unpack_from("<4sIIIII", data, 16)
        self.assertEqual((magic, ctype), (b"PTGC", 1))
        payload = ptg.chunk_payload(data[40:40 + comp_len], version, raw_len)
        self.assertEqual(payload.count(b'"y"'), 1)
        payload = ptg.chunk_store(payload.replace(b'"y"', b"}\xff{"), version)
        header = struct.pack("<4sIIIII", magic, ctype, raw_len, len(payload),
                             zlib.crc32(payload), count)
        with open(self.ptg, "wb") as f:
            f.write(data[:16] + header + payload + data[40 + comp_len:])
        out = os.path.join(self.tmp.name, "out.json")
        res = ptg.run(["export", "--chrome", out, self.ptg])
        self.assertEqual(res.returncode, 0, res.stderr)
        with open(out, "rb") as f:
            doc = self.load_strict(f.read())
        self.assertEqual(doc["x"], "}\ufffd{")


DEPTH = 300000
# generous for O(n log n) on 600k records, short of what a scan of the stack
# per record takes (~30 s at this depth)
REPORT_BOUND_S = 20


class DeepStack(unittest.TestCase):
    """A real 300,000-deep recursion: every report is linear in records and
    depth, and folded output stays small."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.tmp.name, "deep.ptg")
        py = ptg.Python(ptg.ONCE)
        if py.missing:
            raise unittest.SkipTest(py.missing)
        res = ptg.run(["record", "-q", "-o", cls.trace, "--", *py.argv(
            os.path.join(ptg.WORKLOADS, "deep_recursion.py"), str(DEPTH))])
        if res.returncode != 0:
            raise RuntimeError("record failed: " + res.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def timed(self, *args, out=subprocess.DEVNULL):
        rc, err, rss, wall = run_rusage(list(args), stdout=out)
        print(f"\n  {' '.join(args[:-1])}: {wall:.2f} s, peak RSS {rss / MiB:.1f} MiB", end="")
        self.assertEqual(rc, 0, err)
        self.assertLess(wall, REPORT_BOUND_S, f"{args[0]} is not linear in depth")
        return err

    def test_reports(self):
        out = os.path.join(self.tmp.name, "o")
        for args in (["report"], ["report", "--callers"], ["report", "--callees"],
                     ["report", "--ops"], ["report", "--per-thread"],
                     ["export", "--pstats", out + ".pstats"],
                     ["export", "--chrome", out + ".json"], ["idle"]):
            with self.subTest(args=args):
                self.timed(*args, self.trace)

    def check_folded(self, path, max_stack):
        size = os.path.getsize(path)
        with open(path) as f:
            lines = f.read().splitlines()
        widest = max(len(line.rpartition(" ")[0].split(";")) for line in lines)
        cut = [fr for line in lines for fr in line.rpartition(" ")[0].split(";")
               if fr.startswith("[... ")]
        print(f"\n  folded: {size >> 10} KiB, {len(lines)} lines, at most {widest} frames",
              end="")
        self.assertLessEqual(widest, max_stack + 1)
        self.assertLess(size, 64 * MiB)
        # the recursion's stacks fold into one frame that says how many frames it
        # cut: the deepest, DEPTH + 1 rec and a few frames of threading, lose all
        # but max_stack
        most = [int(m.group(1)) for fr in cut
                for m in [re.search(r"(\d+) frames cut\]$", fr)] if m]
        self.assertEqual(len([n for n in most if n > DEPTH - max_stack]), 1, cut)
        self.assertLess(max(most), DEPTH + 16 - max_stack, cut)

    def test_flamegraph(self):
        out = os.path.join(self.tmp.name, "fg.folded")
        with open(out, "w") as f:
            self.timed("flamegraph", self.trace, out=f)
        self.check_folded(out, 1024)
        with open(out, "w") as f:
            self.timed("flamegraph", "--max-stack", "100", self.trace, out=f)
        self.check_folded(out, 100)
        svg = os.path.join(self.tmp.name, "fg.svg")
        self.timed("flamegraph", "-o", svg, self.trace)
        self.assertLess(os.path.getsize(svg), 16 * MiB)

    def test_pstats_counts(self):
        """rec: DEPTH + 1 calls of which 1 primitive; rec -> rec: DEPTH calls,
        1 primitive, as cProfile counts recursion."""
        import pstats
        out = os.path.join(self.tmp.name, "c.pstats")
        self.timed("export", "--pstats", out, self.trace)
        st = pstats.Stats(out).stats
        rec = [k for k in st if k[2] == "rec" and k[0].endswith("deep_recursion.py")]
        self.assertEqual(len(rec), 1, rec)
        cc, nc, _, _, callers = st[rec[0]]
        self.assertEqual((cc, nc), (1, DEPTH + 1))
        self.assertEqual(callers[rec[0]][:2], (DEPTH, 1))


if __name__ == "__main__":
    ptg.main()
