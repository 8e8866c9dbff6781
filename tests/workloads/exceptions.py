"""A chain of three calls whose innermost raises, caught two frames up, 100 times."""
import sys

import gate


def innermost(i):
    raise ValueError(i)


def middle(i):
    return innermost(i) + 1


def outer(i):
    try:
        return middle(i)
    except ValueError:
        return -1


def main():
    for i in range(100):
        outer(i)


if __name__ == "__main__":
    if "--wait" in sys.argv:
        gate.wait_for_go()
    main()
    gate.done()
