"""A child forked before the recording starts (a DataLoader worker already
running): record -p PARENT --children takes it too.

The child blocks in a read (C code) until the parent's go; then each calls
its leaf a known number of times: leaf_child 200, leaf_parent 300.
"""
import os

import gate


def leaf_child(i):
    return i


def leaf_parent(i):
    return i


def main():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        for i in range(200):
            leaf_child(i)
        print("child", os.getpid(), flush=True)
        os._exit(0)
    os.close(r)
    gate.wait_for_go()
    os.write(w, b"x")
    for i in range(300):
        leaf_parent(i)
    os.waitpid(pid, 0)
    gate.done()


main()
