# SPDX-License-Identifier: MIT
"""What torch.profiler's numbers for the host side of a Kineto trace are,
worked out from its JSON alone: the oracle that export --pstats --ops and
report --ops are checked against."""
import decimal
import gzip
import json

HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation")
# Of equal intervals, an annotation holds an op and an op a CUDA call; of two
# ops import decides by name (the JSON does not say which holds which).
RANK = {"user_annotation": 0, "cpu_op": 1, "cuda_runtime": 2, "cuda_driver": 2}


def host_stats(path):
    """cProfile's numbers for the host events of a Kineto trace, worked out
    from its JSON: per thread, events nested by time (start, then longer
    first; one that overhangs its parent is cut at the parent's end), self
    time = duration minus children, cumtime counted once per recursion.
    Returns {key: [ncalls, tottime_ns, cumtime_ns, {caller_key: ncalls}]}."""
    with gzip.open(path, "rt") as f:
        # exact decimals, in ns as import reads them: float µs would misplace
        # events that end where the next starts
        events = json.load(f, parse_float=decimal.Decimal)["traceEvents"]
    threads = {}
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in HOST_CATS:
            threads.setdefault((e["pid"], e["tid"]), []).append(
                (int(e["ts"] * 1000), -int(e["dur"] * 1000), RANK[e["cat"]],
                 e["name"] if e["cat"] == "cpu_op" else "", i, e["name"]))
    stats = {}

    def close(stack):
        end, start, name, child = stack.pop()
        dur = end - start
        if stack:
            stack[-1][3] += dur
        st = stats.setdefault(("~", 0, f"<{name}>"), [0, 0.0, 0.0, {}])
        st[0] += 1
        st[1] += dur - child
        if all(f[2] != name for f in stack):
            st[2] += dur
        if stack:
            caller = ("~", 0, f"<{stack[-1][2]}>")
            st[3][caller] = st[3].get(caller, 0) + 1

    for evs in threads.values():
        evs.sort()
        stack = []  # [end, start, name, child time]
        for ts, neg_dur, _, _, _, name in evs:
            while stack and stack[-1][0] <= ts:
                close(stack)
            end = ts - neg_dur
            if stack and end > stack[-1][0]:
                end = stack[-1][0]
            stack.append([end, ts, name, 0.0])
        while stack:
            close(stack)
    return stats
