"""Code objects freed and their addresses reused: 200 rounds, each exec()s
a function g<i> and a generator h<i>, calls g<i> 3 times and runs h<i> to
its end (3 values), then drops both. The next round's code objects often
land where the last ones were. Prints how many rounds found an address
taken before (the test needs some)."""
import sys

import gate

ROUNDS = 200


def main():
    seen, reused = set(), 0
    for i in range(ROUNDS):
        ns = {}
        exec(f"def g{i}(x):\n    return x + {i}\n"
             f"def h{i}():\n    yield {i}\n    yield {i}\n    yield {i}\n", ns)
        g, h = ns[f"g{i}"], ns[f"h{i}"]
        for k in range(3):
            g(k)
        sum(h())
        ids = (id(g.__code__), id(h.__code__))
        reused += any(c in seen for c in ids)
        seen.update(ids)
        del g, h, ns
    return reused


if __name__ == "__main__":
    if "--wait" in sys.argv:
        gate.wait_for_go()
    print("reused", main(), flush=True)
    gate.done()
