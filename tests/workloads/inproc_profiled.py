"""A profiler already in (3.11): a thread other than the main one runs under
sys.setprofile. After the gate (record --in-process was refused), the thread
calls leaf() 10 times and prints what its profiler saw, and what the main
thread and threading hold (both nothing), as JSON.
"""
import json
import sys
import threading

import gate

seen = []
profiling, go = threading.Event(), threading.Event()


def leaf():
    return 1


def profiler(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "leaf":
        seen.append(1)


def profiled():
    sys.setprofile(profiler)
    profiling.set()
    go.wait()
    for _ in range(10):
        leaf()
    sys.setprofile(None)


def main():
    t = threading.Thread(target=profiled)
    t.start()
    profiling.wait()
    gate.wait_for_go()
    go.set()
    t.join()
    print(json.dumps({"seen": len(seen), "main": repr(sys.getprofile()),
                      "threading": repr(threading._profile_hook)}), flush=True)


if __name__ == "__main__":
    main()
    gate.done()
