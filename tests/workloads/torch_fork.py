"""Forks, as a DataLoader worker is forked, after torch was imported: the
child multiplies matrices CHILD times, then the parent PARENT times.
Each prints "ROLE PID" (parent, child).

usage: torch_fork.py [--wait]
"""
import os
import sys

import gate
import torch

CHILD = 300
PARENT = 200


def mm(n):
    x = torch.ones(8, 8)
    for _ in range(n):
        torch.mm(x, x)


def main():
    torch.set_num_threads(1)
    if "--wait" in sys.argv:
        gate.wait_for_go()
    print("parent", os.getpid(), flush=True)
    pid = os.fork()
    if not pid:
        try:
            print("child", os.getpid(), flush=True)
            mm(CHILD)
            sys.stdout.flush()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
    mm(PARENT)
    gate.done()


if __name__ == "__main__":
    main()
