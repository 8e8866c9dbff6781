"""record --in-process killed, then again: fib while recorded, and what sys.monitoring holds.

Each step waits for a line on stdin: go (the first recorder is attached),
then (it was killed with SIGKILL) the tool ids still taken once the agent
has had its chance to take its own out, then (a second recorder is
attached) fib again, then (it ended) the tool ids again.
"""
import json
import sys
import time

import gate


def f(n):
    return n if n < 2 else f(n - 1) + f(n - 2)


def tools():
    return {i: sys.monitoring.get_tool(i) for i in range(6) if sys.monitoring.get_tool(i)}


def until_free(timeout=10.0):
    """The agent's thread needs the GIL to take its tool out: sleep, which lets it."""
    end = time.monotonic() + timeout
    while tools() and time.monotonic() < end:
        time.sleep(0.01)
    return tools()


def main():
    gate.wait_for_go()
    for _ in range(3):
        f(15)
    print("phase1", flush=True)
    sys.stdin.readline()
    print(json.dumps({"tools": until_free(), "fib20": f(20)}), flush=True)
    sys.stdin.readline()
    for _ in range(3):
        f(15)
    print("phase2", flush=True)
    sys.stdin.readline()
    print(json.dumps({"tools": until_free()}), flush=True)


if __name__ == "__main__":
    main()
    gate.done()
