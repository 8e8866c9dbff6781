"""Threads started after the tracer attached, exceptions nobody catches.

After the gate: three new threads call their own leaf 300 times each; a
fourth dies of an exception raised three frames down (the thread's
excepthook prints it); then the main thread says done and dies of an
exception raised three frames down too (exit status 1, traceback on
stderr). Run with --oracle to count the calls in-process with
sys.setprofile and threading.setprofile instead, printed as JSON (the
oracle catches the main thread's exception so it can print).
"""
import sys
import threading

import gate


def leaf_a():
    return 1


def leaf_b():
    return 2


def leaf_c():
    return 3


def worker(leaf):
    for _ in range(300):
        leaf()


def boom_inner(n):
    raise ValueError(n)


def boom_mid(n):
    return boom_inner(n) + 1


def boom_outer(n):
    return boom_mid(n) + 1


def run():
    threads = [threading.Thread(target=worker, args=(f,)) for f in (leaf_a, leaf_b, leaf_c)]
    threads.append(threading.Thread(target=boom_outer, args=(7,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def quiet_excepthook(args):
    """The dying thread's traceback is expected: keep stderr for real errors."""
    if args.exc_type is not ValueError:
        sys.__excepthook__(args.exc_type, args.exc_value, args.exc_traceback)


def run_and_fail():
    """run(), then the main thread's exception, caught so that the oracle can print."""
    run()
    try:
        boom_outer(8)
    except ValueError:
        pass


def oracle():
    # run_and_fail is the oracle's own wrapper: the recorded run has none
    gate.print_oracle(run_and_fail, __file__, lambda f: f.f_code.co_name != "run_and_fail",
                      threads=True)


if __name__ == "__main__":
    threading.excepthook = quiet_excepthook
    if "--oracle" in sys.argv:
        oracle()
    else:
        if "--wait" in sys.argv:
            gate.wait_for_go()
        run()
        gate.done()
        boom_outer(8)
