"""Recursive fib(15), three times: 5919 calls of f, 3 of them primitive."""
import sys

import gate


def f(n):
    return n if n < 2 else f(n - 1) + f(n - 2)


def main():
    for _ in range(3):
        f(15)


if __name__ == "__main__":
    if "--wait" in sys.argv:
        gate.wait_for_go()
    main()
    gate.done()
