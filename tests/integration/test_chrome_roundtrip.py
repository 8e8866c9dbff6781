# SPDX-License-Identifier: MIT
"""import -> export --chrome -> import -> export --chrome must give the same bytes,
for the real torch.profiler traces, plain and gzip-compressed (standard library only)."""
import gzip
import json
import os
import subprocess
import sys
import tempfile

PTG = os.environ.get("PTRACE_GPU", "ptrace-gpu")
SHARED = os.environ.get("PTG_SHARED_DIR", "/work/shared")
TRACES = ["alexnet_1gpu", "sampled_rank0", "train_rank0"]
X_CATS = ("cpu_op", "python_function", "user_annotation", "gpu_user_annotation", "cuda_runtime",
          "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL", what, file=sys.stderr)
    return cond


def run(*args):
    r = subprocess.run([PTG, *args], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"ptrace-gpu {' '.join(args)}: {r.stderr.strip()}")
    return r.returncode == 0


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def events(doc):
    """(cat, name, ts, dur) of the X events, for comparing with the source."""
    return sorted((e["cat"], e["name"], round(float(e["ts"]), 3), round(float(e["dur"]), 3))
                  for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in X_CATS)


def test_trace(tmp, name):
    src = os.path.join(SHARED, "traces", "kineto", name + ".json.gz")
    p1, p2, p3 = (os.path.join(tmp, f"{name}.{i}.ptg") for i in (1, 2, 3))
    e1 = os.path.join(tmp, name + ".e1.json")
    e2 = os.path.join(tmp, name + ".e2.json")
    e3 = os.path.join(tmp, name + ".e3.json.gz")
    if not (run("import", src, "-o", p1) and run("export", "--chrome", e1, p1)
            and run("import", e1, "-o", p2) and run("export", "--chrome", e2, p2)
            and run("import", e2, "-o", p3) and run("export", "--chrome", e3, p3)):
        return
    b1, b2, b3 = read(e1), read(e2), read(e3)
    check(b1 == b2, f"{name}: export -> import -> export is not byte-identical")
    check(b1 == b3, f"{name}: gzip export differs")
    with gzip.open(src, "rt") as f:
        orig = json.load(f)
    out = json.loads(b1)
    check(list(out) == list(orig), f"{name}: top-level keys or their order differ")
    for key in orig:
        if key != "traceEvents":
            check(out.get(key) == orig[key], f"{name}: top-level key {key}")
    # the source has no overhanging events, so every X event comes back as it was
    check(events(out) == events(orig), f"{name}: X events differ from the source")
    flows = lambda d: sum(1 for e in d["traceEvents"] if e.get("ph") in ("s", "f"))
    check(flows(out) == flows(orig), f"{name}: flow events")
    print(f"{name}: {len(b1)} bytes, round trip stable")


def main():
    kineto = os.path.join(SHARED, "traces", "kineto")
    if not os.path.isdir(kineto):
        # the project's shared folder beside the clone (PTG_SHARED_DIR)
        print(f"test_chrome_roundtrip: skipped, no Kineto traces in {kineto}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for name in TRACES:
            test_trace(tmp, name)
    print(f"test_chrome_roundtrip: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
