"""A generator that yields 100 values: one call, resumed 100 times."""
import sys

import gate


def produce():
    for i in range(100):
        yield i


def main():
    return sum(produce())


if __name__ == "__main__":
    if "--wait" in sys.argv:
        gate.wait_for_go()
    main()
    gate.done()
