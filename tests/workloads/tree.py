"""A process tree for record --children, with a known call plan per process.

Every process says "ROLE PID" on stdout, so that a test can tell which pid
is which, then calls its own leaf function a known number of times:

  parent  (after go)       leaf_parent 300 times, fib(12): 465 calls of fib
  child   (os.fork)        child(), leaf_child 200 times, then forks:
  grand   (child's fork)   grandchild(), leaf_grand 100 times
  exec    (os.fork, then os.execv of this file with --exec)
                           leaf_exec 150 times, a fresh interpreter

All forks happen after go: with `record -p PID --children`, each process is
recorded from its first call.
"""
import os
import sys

import gate

PLAN = {
    "parent": {"leaf_parent": 300, "fib": 465},
    "child": {"child": 1, "leaf_child": 200},
    "grand": {"grandchild": 1, "leaf_grand": 100},
    "exec": {"leaf_exec": 150},
}


def leaf_parent(i):
    return i + 1


def leaf_child(i):
    return i * 2


def leaf_grand(i):
    return i - 1


def leaf_exec(i):
    return i ^ 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def say(role):
    print(role, os.getpid(), flush=True)


def grandchild():
    for i in range(100):
        leaf_grand(i)


def child():
    for i in range(200):
        leaf_child(i)
    pid = os.fork()
    if pid == 0:
        say("grand")
        grandchild()
        os._exit(0)
    os.waitpid(pid, 0)


def main():
    if "--exec" in sys.argv:
        say("exec")
        for i in range(150):
            leaf_exec(i)
        return
    if "--wait" in sys.argv:
        gate.wait_for_go()
    say("parent")
    forked = os.fork()
    if forked == 0:
        say("child")
        child()
        os._exit(0)
    execd = os.fork()
    if execd == 0:
        os.execv(sys.executable, [sys.executable, __file__, "--exec"])
    for i in range(300):
        leaf_parent(i)
    fib(12)
    os.waitpid(forked, 0)
    os.waitpid(execd, 0)
    gate.done()


main()
