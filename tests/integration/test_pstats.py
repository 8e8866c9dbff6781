# SPDX-License-Identifier: MIT
"""export --pstats, checked with Python's own pstats.

A tiny torch.profiler (Kineto) trace with python_function and cpu_op events
is imported with `ptrace-gpu import`, exported with `export --pstats`, and
loaded with pstats.Stats: every function's (cc, nc, tt, ct) and every caller
edge is compared with numbers worked out by hand, and `report`'s table with
what pstats prints for the same file.
"""
import glob
import io
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile

import kineto_oracle

PTG = os.environ.get("PTRACE_GPU", "ptrace-gpu")
MS = 1e-3

MAIN = ("app.py", 1, "main")
F = ("app.py", 3, "f")
G = ("app.py", 20, "g")
W = ("worker.py", 7, "w")

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL {what}", file=sys.stderr)


def near(a, b):
    return abs(a - b) < 1e-9


def event(name, tid, ts_ms, dur_ms, cat="python_function"):
    # Kineto times are microseconds
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid,
            "ts": ts_ms * 1000, "dur": dur_ms * 1000}


def pyname(key):
    return f"{key[0]}({key[1]}): {key[2]}"


def kineto_trace():
    """
    thread 1: main(0..100) > f(1..61) > f(11..51) > f(21..31);
              main > g(70..90) > [f(72..78), op aten::mm(80..88)]
    thread 2: w(5..25) > g(6..16)
    """
    return {"traceEvents": [
        event(pyname(MAIN), 1, 0, 100),
        event(pyname(F), 1, 1, 60),
        event(pyname(F), 1, 11, 40),
        event(pyname(F), 1, 21, 10),
        event(pyname(G), 1, 70, 20),
        event(pyname(F), 1, 72, 6),
        event("aten::mm", 1, 80, 8, cat="cpu_op"),
        event(pyname(W), 2, 5, 20),
        event(pyname(G), 2, 6, 10),
    ]}


# (cc, nc, tt, ct, {caller: (nc, cc, tt, ct)}) in ms. The op's 8 ms are self
# time of g, its nearest Python frame. f's primitive calls are f(1..61) and
# f(72..78); f(11..51) is a primitive call of the f -> f pair, f(21..31) not.
EXPECTED = {
    MAIN: (1, 1, 20, 100, {}),
    F: (2, 4, 66, 66, {MAIN: (1, 1, 20, 60), F: (2, 1, 40, 40), G: (1, 1, 6, 6)}),
    G: (2, 2, 24, 30, {MAIN: (1, 1, 14, 20), W: (1, 1, 10, 10)}),
    W: (1, 1, 10, 20, {}),
}


def run(*args, ok=True):
    p = subprocess.run([PTG, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def same_entry(got, want):
    cc, nc, tt, ct, callers = got
    wcc, wnc, wtt, wct, wcallers = want
    if (cc, nc) != (wcc, wnc) or not near(tt, wtt * MS) or not near(ct, wct * MS):
        return False
    if set(callers) != set(wcallers):
        return False
    for k, (enc, ecc, ett, ect) in wcallers.items():
        gnc, gcc, gtt, gct = callers[k]
        if (gnc, gcc) != (enc, ecc) or not near(gtt, ett * MS) or not near(gct, ect * MS):
            return False
    return True


def test_stats(prof):
    st = pstats.Stats(prof)
    check(set(st.stats) == set(EXPECTED), f"functions: {sorted(st.stats)}")
    for key, want in EXPECTED.items():
        got = st.stats.get(key)
        check(got is not None and same_entry(got, want), f"{key}: {got} != {want}")
    check(st.total_calls == 8, f"total_calls {st.total_calls}")
    check(st.prim_calls == 6, f"prim_calls {st.prim_calls}")
    check(near(st.total_tt, 0.120), f"total_tt {st.total_tt}")
    # pstats' own listings work on it
    out = io.StringIO()
    st.stream = out
    st.sort_stats("cumulative").print_callers()
    check("2/1    0.040    0.040  app.py:3(f)" in out.getvalue(), "print_callers f -> f")


def table(text):
    """The lines from '... function calls' to the end of the table."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if re.match(r" +\d+ function calls", l))
    return lines[start:]


def test_report_matches_pstats(trace, prof):
    rep = run("report", trace).stdout
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats()
    check(table(rep) == table(out.getvalue()),
          f"report table differs from pstats':\n{rep}\n---\n{out.getvalue()}")
    check("no events lost" in rep, "loss line")


def test_one_thread(trace, tmp):
    prof = os.path.join(tmp, "tid2.prof")
    run("export", "--pstats", prof, "--tid", "2", trace)
    st = pstats.Stats(prof)
    check(set(st.stats) == {W, G}, f"--tid 2 functions: {sorted(st.stats)}")
    check(same_entry(st.stats[G], (1, 1, 10, 10, {W: (1, 1, 10, 10)})), "g on thread 2")


def test_ops(trace, tmp):
    prof = os.path.join(tmp, "ops.prof")
    run("export", "--pstats", prof, "--ops", trace)
    st = pstats.Stats(prof)
    key = ("~", 0, "<aten::mm>")
    check(set(st.stats) == {key}, f"ops: {sorted(st.stats)}")
    check(same_entry(st.stats[key], (1, 1, 8, 8, {})), "aten::mm")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).print_stats()
    check("{aten::mm}" in out.getvalue(), "ops print as built-ins")


def test_errors(tmp):
    bad = os.path.join(tmp, "bad.ptg")
    with open(bad, "wb") as f:
        f.write(b"not a trace at all")
    p = run("export", "--pstats", os.path.join(tmp, "x.prof"), bad, ok=False)
    check(p.returncode == 1, f"bad trace: exit {p.returncode}")
    check(len(p.stderr.strip().splitlines()) == 1, f"one-line error: {p.stderr!r}")
    p = run("export", bad, ok=False)
    check(p.returncode == 2, f"no output: exit {p.returncode}")


def test_kineto_host_calls(tmp):
    """Real Kineto traces have no Python frames: pstats gets their ops, CUDA
    runtime calls and annotations as built-ins, with the JSON's numbers."""
    kdir = os.path.join(os.environ.get("PTG_SHARED_DIR", ""), "traces", "kineto")
    names = sorted(glob.glob(os.path.join(kdir, "*.json.gz")))
    if not names:
        # the project's shared folder beside the clone (PTG_SHARED_DIR)
        print(f"test_pstats: real Kineto traces skipped, none in {kdir}")
        return False
    for src in names:
        base = os.path.basename(src)
        trace = os.path.join(tmp, base + ".ptg")
        prof = os.path.join(tmp, base + ".prof")
        run("import", src, "-o", trace)
        p = run("export", "--pstats", prof, trace)
        check("has no Python frames" in p.stderr, f"{base}: says what it wrote: {p.stderr!r}")
        st = pstats.Stats(prof)
        want = kineto_oracle.host_stats(src)
        check(set(st.stats) == set(want),
              f"{base}: entries differ: {sorted(set(st.stats) ^ set(want))[:6]}")
        bad = 0
        for key, (nc, tt, ct, callers) in want.items():
            got = st.stats.get(key)
            if not got:
                continue
            gcc, gnc, gtt, gct, gcallers = got
            ok = (gnc == nc and abs(gtt - tt * 1e-9) < 1e-9 * (1 + nc)
                  and abs(gct - ct * 1e-9) < 1e-9 * (1 + nc)
                  and {k: v[0] for k, v in gcallers.items()} == callers)
            if not ok and bad < 3:
                gc = {k: v[0] for k, v in gcallers.items()}
                diff = {k: (gc.get(k), callers.get(k)) for k in set(gc) | set(callers)
                        if gc.get(k) != callers.get(k)}
                print(f"{base}: {key}: got {got[:4]}, want {nc} {tt} {ct}; callers "
                      f"(got, want): {diff}", file=sys.stderr)
            bad += not ok
        check(bad == 0, f"{base}: {bad} of {len(want)} entries differ from the JSON")
        check(st.total_calls == sum(v[0] for v in want.values()), f"{base}: total_calls")
        check(abs(st.total_tt - sum(v[1] for v in want.values()) * 1e-9) < 1e-6,
              f"{base}: total_tt {st.total_tt}")
        # cudaLaunchKernel is a callee of the ops, as in key_averages()
        launch = ("~", 0, "<cudaLaunchKernel>")
        if launch in st.stats:
            check(any(k[2].startswith("<aten::") for k in st.stats[launch][4]),
                  f"{base}: cudaLaunchKernel has op callers")
        # pstats' listings and gprof2dot's reader (the same dict) take it
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_callees(5)
        check("{" in out.getvalue(), f"{base}: print_callees lists built-ins")


def test_nothing_to_write(tmp):
    """A trace with GPU records only: a one-line error, exit 1, no file."""
    src = os.path.join(tmp, "gpu.json")
    with open(src, "w") as f:
        json.dump({"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10,
             "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1}}]}, f)
    trace = os.path.join(tmp, "gpu.ptg")
    prof = os.path.join(tmp, "gpu.prof")
    run("import", src, "-o", trace)
    p = run("export", "--pstats", prof, trace, ok=False)
    check(p.returncode == 1, f"nothing to write: exit {p.returncode}")
    check(len(p.stderr.strip().splitlines()) == 1 and "nothing to write" in p.stderr,
          f"nothing to write: {p.stderr!r}")
    check(not os.path.exists(prof), "nothing to write: no file left")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "trace.json")
        trace = os.path.join(tmp, "trace.ptg")
        prof = os.path.join(tmp, "trace.prof")
        with open(src, "w") as f:
            json.dump(kineto_trace(), f)
        run("import", src, "-o", trace)
        run("export", "--pstats", prof, trace)
        test_stats(prof)
        test_report_matches_pstats(trace, prof)
        test_one_thread(trace, tmp)
        test_ops(trace, tmp)
        test_errors(tmp)
        real = test_kineto_host_calls(tmp) is not False
        test_nothing_to_write(tmp)
    print(f"test_pstats: {'ok' if not failures else f'{failures} failed'}")
    return 1 if failures else 0 if real else 77


if __name__ == "__main__":
    sys.exit(main())
