"""Calls spread over many code objects: 4,096 small functions (SPREAD_FUNCS
in the environment), each called in turn, 20 rounds (x --scale / 2). Where
fib keeps one code object hot in every cache, here each call's code object
is one of 4,096 (about 1 MiB of code objects and their bytecode), as in a
program of many functions: what a probe reads of it is most often a cache
miss. With SPREAD_FUNCS=128 most of them fit the probes' per-CPU cache of
code objects (256 slots, by address) but not the CPU's L1.

The work returns the exact count of calls of the small functions.
"""
import os

import benchlib

FUNCS = int(os.environ.get("SPREAD_FUNCS", "4096"))

_src = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(FUNCS))
_ns = {}
exec(compile(_src, "spread_funcs", "exec"), _ns)
# a fixed order that is no allocation order: neighbours in memory are not called in turn
FUNCS_IN_ORDER = [_ns[f"f{(i * 2654435761) % FUNCS}"] for i in range(FUNCS)]


def setup(args):
    rounds = max(1, round(10 * args.scale))

    def work():
        fs = FUNCS_IN_ORDER
        for _ in range(rounds):
            for f in fs:
                f(1)
        return rounds * FUNCS

    return work


if __name__ == "__main__":
    benchlib.run("spread", setup)
