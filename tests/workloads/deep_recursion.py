"""Recurses N frames deep (default 300000) on a thread with a 1 GiB stack:
rec(N) .. rec(0) under main, each call one frame of the same function."""
import sys
import threading


def rec(n):
    return 0 if n == 0 else rec(n - 1) + 1


def main(n):
    return rec(n)


if __name__ == "__main__":
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 300000
    sys.setrecursionlimit(depth + 1000)
    threading.stack_size(1 << 30)
    t = threading.Thread(target=main, args=(depth,))
    t.start()
    t.join()
