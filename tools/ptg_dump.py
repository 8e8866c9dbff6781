# SPDX-License-Identifier: MIT
"""The lines of `ptrace-gpu dump`, for the GPU checks (tools/gpu-check*.sh);
tests/integration/ptg.py's Trace reads the same lines.

records(path) -> (meta, records, lost): meta the '# key: value' lines,
records (ts, pid, tid, kind, fields, symbol) with fields the key=value words
after the kind and symbol the rest of the line, spaces and all, up to an
args= blob; lost the loss counters by name.
"""
import re


def records(path):
    meta, recs, lost = {}, [], {}
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("# lost "):
            what, _, n = line[7:].rpartition(": ")
            lost[what.split()[0]] = int(n)
            continue
        if line.startswith("# "):
            k, _, v = line[2:].partition(": ")
            meta[k] = v
            continue
        tok = line.split(" ")
        if len(tok) < 3 or line.startswith("#"):
            continue
        i = 3
        while i < len(tok) and re.fullmatch(r"[a-z0-9_]+=\S*", tok[i]):
            i += 1
        fields = dict(t.split("=", 1) for t in tok[3:i])
        sym = (" " + " ".join(tok[i:])).partition(" args=")[0][1:]
        pid, _, tid = tok[1].partition("/")
        recs.append((int(tok[0]), int(pid), int(tid or 0), tok[2], fields, sym))
    return meta, recs, lost
