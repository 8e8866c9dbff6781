"""A Python parent that starts another interpreter: record --children follows
the fork and the exec into an interpreter file not probed yet.

  spawn.py --wait CMD...   after go: runs CMD -c CHILD (CHILD calls g 500
                           times and prints "child PID"), then leaf 100 times
"""
import os
import subprocess
import sys

import gate

CHILD = "import os\ndef g(i):\n    return i\nfor i in range(500):\n    g(i)\nprint('child', os.getpid(), flush=True)\n"


def leaf(i):
    return i


def main():
    cmd = [a for a in sys.argv[1:] if a != "--wait"]
    if "--wait" in sys.argv:
        gate.wait_for_go()
    print("parent", os.getpid(), flush=True)
    subprocess.run([*cmd, "-c", CHILD], check=True)
    for i in range(100):
        leaf(i)
    gate.done()


main()
