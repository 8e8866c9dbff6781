# SPDX-License-Identifier: MIT
"""idle's per-name totals on a recursive workload: a name's total counts an
interval once however deep it recurses, as cProfile's cumtime does.

tests/workloads/fib.py (fib(15) three times, 5919 calls of f, 3 of them
outermost) is recorded for real; idle --json's total for f must be the time
of the 3 outermost calls (from the trace's own records), equal to the
cumtime pstats reads from export --pstats, and never more than the trace's
duration, while its self time stays the sum over every call.
"""
import json
import os
import pstats
import tempfile
import unittest

import ptg


class IdleRecursion(unittest.TestCase):
    def test_fib_total_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "fib.ptg")
            res = ptg.run(["record", "-q", "-o", out, "--", "/usr/bin/python3.11",
                           os.path.join(ptg.WORKLOADS, "fib.py")])
            self.assertEqual(res.returncode, 0, res.stderr)
            res = ptg.run(["idle", "--json", "-n", "100000", out])
            self.assertEqual(res.returncode, 0, res.stderr)
            rep = json.loads(res.stdout)
            rows = [n for n in rep["self_time"] if n["name"] == "f" and n["kind"] == "python"]
            self.assertEqual(len(rows), 1, rep["self_time"][:5])
            f = rows[0]

            calls = [c for c in ptg.Trace(out).calls()
                     if c[1] == "f" and c[2].endswith("fib.py")]
            self.assertEqual(len(calls), 5919)
            # the calls not inside another call of f on their thread
            outer, end = [], {}
            for c in sorted(calls, key=lambda c: (c[0], c[4], -c[5])):
                if c[4] >= end.get(c[0], 0):
                    outer.append(c)
                    end[c[0]] = c[5]
            self.assertEqual(len(outer), 3)
            want_total = sum(c[5] - c[4] for c in outer)
            self.assertEqual(f["count"], 5919)
            self.assertEqual(f["total_ns"], want_total)
            self.assertLess(f["self_ns"], f["total_ns"] + 1)
            self.assertLessEqual(f["total_ns"], rep["trace"]["last_ns"] - rep["trace"]["first_ns"])

            prof = os.path.join(tmp, "fib.prof")
            res = ptg.run(["export", "--pstats", prof, out])
            self.assertEqual(res.returncode, 0, res.stderr)
            st = pstats.Stats(prof)
            key = next(k for k in st.stats if k[2] == "f" and k[0].endswith("fib.py"))
            cc, nc, tt, ct, _ = st.stats[key]
            self.assertEqual((cc, nc), (3, 5919))
            self.assertAlmostEqual(f["total_ns"] / 1e9, ct, delta=1e-6)


if __name__ == "__main__":
    ptg.main()
