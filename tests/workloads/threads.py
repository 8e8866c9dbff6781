"""Four threads, each calling its own function 1000 times once released."""
import sys
import threading

import gate

start = threading.Event()


def leaf0():
    return 0


def leaf1():
    return 1


def leaf2():
    return 2


def leaf3():
    return 3


def worker(leaf):
    start.wait()
    for _ in range(1000):
        leaf()


def main():
    threads = [threading.Thread(target=worker, args=(leaf,), name=f"worker{i}")
               for i, leaf in enumerate((leaf0, leaf1, leaf2, leaf3))]
    for t in threads:
        t.start()
    if "--wait" in sys.argv:
        gate.wait_for_go()
    start.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
    gate.done()
