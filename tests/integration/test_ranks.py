# SPDX-License-Identifier: MIT
"""The cross-rank view of `idle` and `report` given several traces: per rank and per
ProfilerStep, checked against numbers computed here straight from the Kineto JSON
(standard library only), on real torch.profiler traces and on a synthetic job whose
answer is known by hand."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal

PTG = os.environ.get("PTRACE_GPU", "ptrace-gpu")
SHARED = os.environ.get("PTG_SHARED_DIR", "/work/shared")
KINETO = os.path.join(SHARED, "traces", "kineto")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
CALL_CATS = ("cuda_runtime", "cuda_driver")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what, file=sys.stderr)
    return cond


def run(*args, **kw):
    return subprocess.run([PTG, *args], capture_output=True, text=True, timeout=300, **kw)


def ns(v):
    """Kineto µs -> ns, exactly as the importer rounds."""
    return int((Decimal(str(v)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def union(iv):
    total, cur = 0, None
    for s, e in sorted(iv):
        if cur and s <= cur[1]:
            cur[1] = max(cur[1], e)
            continue
        if cur:
            total += cur[1] - cur[0]
        cur = [s, e]
    return total + (cur[1] - cur[0] if cur else 0)


def merged(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap(a, b):
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in merged(a) for s2, e2 in merged(b))


def oracle(doc):
    """Steps, per-step NCCL/compute unions, op counts and whole-trace overlap of one rank."""
    steps, launch, ops = {}, {}, []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args", {})
        start, end = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        if cat == "user_annotation" and e["name"].startswith("ProfilerStep#"):
            n = int(e["name"][13:])
            s0, e0 = steps.get(n, (start, end))
            steps[n] = (min(s0, start), max(e0, end))
        elif cat in CALL_CATS and args.get("correlation"):
            c = args["correlation"]
            launch[c] = min(launch.get(c, start), start)
        elif cat in GPU_CATS:
            ops.append((start, end, args.get("correlation", 0), cat == "kernel",
                        cat == "kernel" and "nccl" in e["name"].lower()))
    by_start = sorted((s, n) for n, (s, e) in steps.items())
    out = {n: {"start": s, "dur": e - s, "comm": [], "compute": [], "ops": 0}
           for n, (s, e) in steps.items()}
    for start, end, corr, kernel, comm in ops:
        t = launch.get(corr, start) if corr else start
        before = [n for s, n in by_start if s <= t]
        if not before or t >= steps[before[-1]][1]:
            continue
        st = out[before[-1]]
        st["ops"] += 1
        if kernel:
            st["comm" if comm else "compute"].append((start, end))
    for st in out.values():
        st["comm"], st["compute"] = union(st["comm"]), union(st["compute"])
    comm = [(s, e) for s, e, _, k, c in ops if c]
    comp = [(s, e) for s, e, _, k, c in ops if k and not c]
    return {"steps": out, "comm": union(comm), "overlap": overlap(comm, comp),
            "rank": doc.get("distributedInfo", {}).get("rank")}


def expected_rows(ranks):
    """Per step: slowest rank and each rank's wait, by the rule of docs/idle.md."""
    rows = {}
    for n in sorted({n for r in ranks.values() for n in r["steps"]}):
        have = {k: r["steps"][n] for k, r in ranks.items() if n in r["steps"]}
        by_comm = any(s["comm"] for s in have.values())
        if by_comm:
            slow = min(have, key=lambda k: (have[k]["comm"], k))
            wait = {k: s["comm"] - have[slow]["comm"] for k, s in have.items()}
        else:
            slow = min(have, key=lambda k: (-have[k]["dur"], k))
            wait = {k: have[slow]["dur"] - s["dur"] for k, s in have.items()}
        rows[n] = (slow, by_comm, wait)
    return rows


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f, parse_float=Decimal)


def write(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def import_all(tmp, srcs, names):
    """Each Kineto JSON file imported into tmp/NAME.ptg; returns the .ptg paths."""
    out = []
    for src, name in zip(srcs, names):
        ptg = os.path.join(tmp, name + ".ptg")
        r = run("import", src, "-o", ptg)
        check(r.returncode == 0, f"import {name}: {r.stderr.strip()}")
        out.append(ptg)
    return out


def compare(what, rep, ranks):
    """ranks: rank -> oracle(); rep: idle --json of the cross-rank view."""
    got_ranks = {r["rank"]: r for r in rep["ranks"]}
    check(sorted(got_ranks) == sorted(ranks), f"{what}: ranks {sorted(got_ranks)}")
    rows = expected_rows(ranks)
    check(rep["steps_total"] == len(rows), f"{what}: steps {rep['steps_total']} != {len(rows)}")
    got_rows = {s["step"]: s for s in rep["steps"]}
    check(sorted(got_rows) == sorted(rows), f"{what}: step numbers {sorted(got_rows)}")
    waited = {k: 0 for k in ranks}
    slowest = {k: 0 for k in ranks}
    for n, (slow, by_comm, wait) in rows.items():
        g = got_rows.get(n)
        if not g:
            continue
        check(g["slowest_rank"] == slow, f"{what}: step {n} slowest {g['slowest_rank']} != {slow}")
        check(g["slowest_by"] == ("nccl" if by_comm else "duration"), f"{what}: step {n} by")
        check(g["max_wait_ns"] == max(wait.values()), f"{what}: step {n} max wait")
        durs = [ranks[k]["steps"][n]["dur"] for k in wait]
        check(g["spread_ns"] == max(durs) - min(durs), f"{what}: step {n} spread")
        slowest[slow] += 1
        for p in g["per_rank"]:
            k, st = p["rank"], ranks[p["rank"]]["steps"][n]
            got = (p["start_ns"], p["dur_ns"], p["comm_ns"], p["compute_ns"], p["gpu_ops"],
                   p["wait_ns"])
            want = (st["start"], st["dur"], st["comm"], st["compute"], st["ops"], wait[k])
            check(got == want, f"{what}: step {n} rank {k}: {got} != {want}")
            waited[k] += wait[k]
        check(len(g["per_rank"]) == len(wait), f"{what}: step {n} ranks")
    for k, o in ranks.items():
        g = got_ranks.get(k, {})
        check((g.get("comm_ns"), g.get("comm_overlap_ns")) == (o["comm"], o["overlap"]),
              f"{what}: rank {k} comm, overlap {(g.get('comm_ns'), g.get('comm_overlap_ns'))} "
              f"!= {(o['comm'], o['overlap'])}")
        check(g.get("waited_ns") == waited[k], f"{what}: rank {k} waited")
        check(g.get("slowest_in_steps") == slowest[k], f"{what}: rank {k} slowest count")
    return rows


def same_idle(what, rep, ptgs):
    """The per-rank idle row is the single-trace analysis of that trace."""
    rows = {r["trace"]: r for r in rep["ranks"]}
    for ptg in ptgs:
        r = run("idle", "--json", ptg)
        if not check(r.returncode == 0, f"{what}: idle {ptg}"):
            continue
        one, row = json.loads(r.stdout), rows.get(ptg, {})
        gpu = one["gpu"]
        got = (row.get("gpu_span_ns"), row.get("gpu_idle_ns"), row.get("compute_ns"),
               row.get("host_wait_ns"), row.get("other_wait_ns"))
        want = (gpu["span_ns"], gpu["idle_ns"], sum(d["compute_ns"] for d in one["devices"]),
                sum(s["host_wait_ns"] for s in one["streams"]),
                sum(s["other_wait_ns"] for s in one["streams"]))
        check(got == want, f"{what}: idle row of {ptg}: {got} != {want}")


def real_pair(tmp):
    """sampled_rank0 of HTA's test data and its rank 1: the real one when the shared
    traces have it, else rank 0 with its NCCL kernels half as long (a faster peer)."""
    r0 = os.path.join(KINETO, "sampled_rank0.json.gz")
    r1 = os.path.join(KINETO, "sampled_rank1.json.gz")
    if not os.path.exists(r0):
        return None
    if os.path.exists(r1):
        return [r0, r1], "real rank 1"
    with gzip.open(r0, "rt") as f:
        doc = json.load(f)
    doc["distributedInfo"]["rank"] = 1
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and "nccl" in e["name"].lower():
            e["dur"] = int(e["dur"]) // 2
    return [r0, write(doc, os.path.join(tmp, "sampled_rank1.json"))], "rank 1 derived from rank 0"


def test_real(tmp):
    pair = real_pair(tmp)
    if not pair:
        print("real traces: skipped, no sampled_rank0.json.gz in", KINETO)
        return False
    srcs, how = pair
    d = os.path.join(tmp, "job")
    os.mkdir(d)
    # names against rank order: the ranks must come from the traces' distributedInfo
    ptgs = import_all(d, srcs, ["b-first", "a-second"])
    # what a directory holds besides traces is not a rank
    os.mkdir(os.path.join(d, "old.ptg"))
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("not a trace\n")
    ranks = {o["rank"]: o for o in (oracle(load(p)) for p in srcs)}
    r = run("idle", "--json", "-n", "1000", d)
    if not check(r.returncode == 0 and not r.stderr, f"idle DIR: {r.stderr.strip()}"):
        return True
    rep = json.loads(r.stdout)
    check(rep["rank_source"] == "trace", "ranks from the traces")
    check([x["trace"] for x in rep["ranks"]] == ptgs, "rank 0 is b-first.ptg")
    rows = compare("sampled", rep, ranks)
    same_idle("sampled", rep, ptgs)
    for n, (slow, by_comm, wait) in rows.items():
        print(f"sampled ({how}): step {n}: slowest rank {slow}, waits "
              + ", ".join(f"rank {k} {w / 1e6:.3f} ms" for k, w in sorted(wait.items()))
              + ", nccl " + ", ".join(f"rank {k} {ranks[k]['steps'][n]['comm'] / 1e6:.3f} ms"
                                      for k in sorted(ranks)))
    # the same two files as arguments, text: one "<- slowest" per step
    r = run("idle", ptgs[1], ptgs[0])
    check(r.returncode == 0 and r.stdout.count("<- slowest") == len(rows), "idle text")
    check("numbered by the rank each trace records" in r.stdout, "text says where ranks came from")
    r = run("report", ptgs[1], ptgs[0])
    check(r.returncode == 0 and r.stdout.count("<- slowest") == len(rows)
          and r.stdout.count("=== rank ") == 2, f"report of two ranks: {r.stderr.strip()}")
    # -n bounds the steps: the one with the longest wait
    r = run("idle", "--json", "-n", "1", d)
    worst = max(rows, key=lambda n: (max(rows[n][2].values()), -n))
    check(r.returncode == 0 and [s["step"] for s in json.loads(r.stdout)["steps"]] == [worst],
          "-n 1 keeps the step with the longest wait")
    # two files that claim the same rank: one line, then the file order
    r = run("idle", "--json", ptgs[0], ptgs[0])
    check(r.returncode == 0 and len(r.stderr.strip().splitlines()) == 1
          and "both claim rank 0" in r.stderr, f"same rank twice: {r.stderr.strip()}")
    check(r.returncode == 0 and json.loads(r.stdout)["rank_source"] == "file_order",
          "file order when a rank is claimed twice")
    return True


def kernel(name, ts, dur, corr, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 5, "args": {"correlation": corr}}


def step(n, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1,
            "tid": 1, "ts": ts, "dur": dur}


def synthetic(rank, steps, gpu):
    """A rank's trace: steps (n, ts, dur); gpu (name, launch ts, gpu ts, dur[, cat])."""
    ev = [step(*s) for s in steps]
    for corr, (name, lts, ts, dur, *cat) in enumerate(gpu, 1):
        ev += [launch(lts, corr), kernel(name, ts, dur, corr, *cat)]
    doc = {"schemaVersion": 1, "traceEvents": ev}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return doc


# Two ranks, three steps, times in µs. Step 0: rank 0 spends 400 in NCCL, rank 1
# 200: rank 1 came late and rank 0 waited 200. Step 1: 250 against 300, rank 0 is
# the slow one, rank 1 waited 50. Step 2 has no NCCL kernel: rank 0's step is 300
# longer. A kernel launched at 950 (step 0) runs at 1050 (in step 1's time) and
# counts for step 0; a memcpy counts as an op but not as compute.
RANK0 = ([(0, 0, 1000), (1, 1000, 1000), (2, 2000, 600)],
         [("gemm", 10, 100, 300), ("ncclKernel_AllReduce", 400, 500, 400),
          ("relu", 950, 1050, 30), ("Memcpy HtoD", 960, 1100, 10, "gpu_memcpy"),
          ("gemm", 1010, 1100, 200), ("ncclKernel_AllReduce", 1200, 1250, 250),
          ("gemm", 2010, 2050, 400)])
RANK1 = ([(0, 0, 1000), (1, 1000, 1000), (2, 2000, 300)],
         [("gemm", 10, 100, 600), ("ncclKernel_AllReduce", 700, 750, 200),
          ("gemm", 1010, 1100, 100), ("ncclKernel_AllReduce", 1300, 1400, 300),
          ("gemm", 2010, 2020, 100)])


def test_synthetic(tmp):
    d = os.path.join(tmp, "synthetic")
    os.mkdir(d)
    srcs = [write(synthetic(1, *RANK1), os.path.join(d, "r1.json")),
            write(synthetic(0, *RANK0), os.path.join(d, "r0.json"))]
    ptgs = import_all(d, srcs, ["r1", "r0"])
    ranks = {o["rank"]: o for o in (oracle(load(p)) for p in srcs)}
    r = run("idle", "--json", *ptgs)
    if not check(r.returncode == 0, f"synthetic idle: {r.stderr.strip()}"):
        return
    rep = json.loads(r.stdout)
    compare("synthetic", rep, ranks)
    # the answer by hand, in ns
    got = {s["step"]: (s["slowest_rank"], s["slowest_by"],
                       {p["rank"]: (p["comm_ns"], p["compute_ns"], p["gpu_ops"], p["wait_ns"])
                        for p in s["per_rank"]}) for s in rep["steps"]}
    want = {0: (1, "nccl", {0: (400000, 330000, 4, 200000), 1: (200000, 600000, 2, 0)}),
            1: (0, "nccl", {0: (250000, 200000, 2, 0), 1: (300000, 100000, 2, 50000)}),
            2: (0, "duration", {0: (0, 400000, 1, 0), 1: (0, 100000, 1, 300000)})}
    check(got == want, f"synthetic steps: {got} != {want}")
    r0 = next(x for x in rep["ranks"] if x["rank"] == 0)
    # rank 0: NCCL 500-900 and 1250-1500; gemm 1100-1300 overlaps the second by 50
    check((r0["comm_ns"], r0["comm_overlap_ns"], r0["waited_ns"], r0["slowest_in_steps"])
          == (650000, 50000, 200000, 2), f"synthetic rank 0: {r0}")
    # a trace without a rank: one line, the file order
    nor = import_all(d, [write(synthetic(None, *RANK0), os.path.join(d, "n.json"))], ["norank"])
    r = run("idle", ptgs[0], nor[0])
    check(r.returncode == 0 and r.stderr.count("\n") == 1 and "norank.ptg has no rank" in r.stderr
          and "ranks are the file order" in r.stderr, f"no rank: {r.stderr.strip()}")
    # a rank that is not a number a job can have is no rank
    for i, bad in enumerate(("1", -1, 2 ** 40, 1.5)):
        doc = synthetic(0, *RANK0)
        doc["distributedInfo"]["rank"] = bad
        p = import_all(d, [write(doc, os.path.join(d, f"bad{i}.json"))], [f"bad{i}"])[0]
        r = run("idle", "--json", ptgs[1], p)
        check(r.returncode == 0 and f"bad{i}.ptg has no rank" in r.stderr
              and json.loads(r.stdout)["ranks"][1]["claimed_rank"] is None, f"rank {bad!r}")


def test_recorded(tmp):
    """Ranks of recorded traces come from the RANK the process had (dist.rank)."""
    if os.geteuid() != 0:
        print("recorded ranks: skipped, recording needs root")
        return
    ptgs = []
    for rank in (1, 0):
        ptg = os.path.join(tmp, f"rec{rank}.ptg")
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2")
        r = subprocess.run([PTG, "record", "-q", "-o", ptg, "--", sys.executable, "-c",
                            "sum(range(1000))"], capture_output=True, text=True, env=env,
                           timeout=120)
        if not check(r.returncode == 0, f"record rank {rank}: {r.stderr.strip()}"):
            return
        ptgs.append(ptg)
    r = run("idle", "--json", *ptgs)
    if not check(r.returncode == 0, f"idle of recorded ranks: {r.stderr.strip()}"):
        return
    rep = json.loads(r.stdout)
    check([(x["rank"], x["claimed_rank"], os.path.basename(x["trace"])) for x in rep["ranks"]]
          == [(0, 0, "rec0.ptg"), (1, 1, "rec1.ptg")], f"recorded ranks: {rep['ranks']}")
    r = run("idle", *ptgs)
    check(r.returncode == 0 and "no ProfilerStep#N spans" in r.stdout
          and r.stdout.count("no GPU") == 2, "recorded: no GPU, no steps")


def test_bad_args(tmp):
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    for args in (["idle", empty], ["report", empty], ["idle", empty, "/nonexistent.ptg"]):
        r = run(*args)
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1,
              f"{args}: {r.returncode} {r.stderr.strip()}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        real = test_real(tmp)
        test_synthetic(tmp)
        test_recorded(tmp)
        test_bad_args(tmp)
    print(f"test_ranks: {len(failures)} failed")
    if failures:
        return 1
    return 0 if real else 77


if __name__ == "__main__":
    sys.exit(main())
