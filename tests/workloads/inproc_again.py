"""record --in-process killed, then again: fib while recorded, and what sys.monitoring holds
(3.11: the profile functions of this thread and of one that waits, and threading's hook).

Each step waits for a line on stdin: go (the first recorder is attached),
then (it was killed with SIGKILL) the tool ids still taken once the agent
has had its chance to take its own out, then (a second recorder is
attached) fib again, then (it ended) the tool ids again.

--torch: also 100 torch.mm calls in each phase (and in the JSON line after
the kill), while a thread runs torch.mm without pause all along, so that op
callbacks run while the agent takes its RecordFunction callback out.
"""
import json
import queue
import sys
import threading
import time

import gate


def f(n):
    return n if n < 2 else f(n - 1) + f(n - 2)


def waiter(asks, answers):
    """A thread that was there at the attach: its own sys.getprofile() on request."""
    while asks.get():
        answers.put(repr(sys.getprofile()))


ASKS, ANSWERS = queue.Queue(), queue.Queue()


def tools():
    if hasattr(sys, "monitoring"):
        return {i: sys.monitoring.get_tool(i) for i in range(6) if sys.monitoring.get_tool(i)}
    ASKS.put(True)
    held = {"main": sys.getprofile(), "waiter": ANSWERS.get(),
            "threading": threading._profile_hook}
    return {k: repr(v) for k, v in held.items() if v not in (None, "None")}


def until_free(timeout=10.0):
    """The agent's thread needs the GIL to take its tool out: sleep, which lets it."""
    end = time.monotonic() + timeout
    while tools() and time.monotonic() < end:
        time.sleep(0.01)
    return tools()


def mm_loop(torch, stop):
    a = torch.ones(4, 4)
    while not stop.is_set():
        torch.mm(a, a)


def mms(torch, n=100):
    a = torch.ones(4, 4)
    for _ in range(n):
        torch.mm(a, a)
    return n


def main():
    torch, stop = None, threading.Event()
    if "--torch" in sys.argv:
        import torch
        threading.Thread(target=mm_loop, args=(torch, stop), daemon=True).start()
    if not hasattr(sys, "monitoring"):
        threading.Thread(target=waiter, args=(ASKS, ANSWERS), daemon=True).start()
    gate.wait_for_go()
    for _ in range(3):
        f(15)
    if torch:
        mms(torch)
    print("phase1", flush=True)
    sys.stdin.readline()
    after = {"tools": until_free(), "fib20": f(20)}
    if torch:
        after["mm"] = mms(torch)
    print(json.dumps(after), flush=True)
    sys.stdin.readline()
    if torch:
        stop.set()
    for _ in range(3):
        f(15)
    if torch:
        mms(torch)
    print("phase2", flush=True)
    sys.stdin.readline()
    print(json.dumps({"tools": until_free()}), flush=True)


if __name__ == "__main__":
    main()
    gate.done()
