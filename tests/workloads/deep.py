"""Waits 20 frames deep (deep(19) .. deep(0) under main and <module>), then returns."""
import sys

import gate


def deep(n):
    if n == 0:
        if "--wait" in sys.argv:
            gate.wait_for_go()
        return 0
    return deep(n - 1) + 1


def main():
    return deep(19)


if __name__ == "__main__":
    main()
    gate.done()
