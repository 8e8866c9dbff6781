"""CPU split 75/25 between two functions with the same body, by call counts.

Runs until killed (or for --seconds S). hot() and cold() do identical work
per call; each round calls hot three times and cold once, so on-CPU samples
land 75% in hot and 25% in cold. --threads N runs N such loops at once.
"""
import sys
import threading
import time


def work():
    x = 0
    for i in range(2000):
        x += i * i
    return x


def hot():
    return work()


def cold():
    return work()


def loop(deadline):
    while time.monotonic() < deadline:
        hot()
        hot()
        hot()
        cold()


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def main():
    deadline = time.monotonic() + arg("--seconds", 3600.0)
    threads = [threading.Thread(target=loop, args=(deadline,))
               for _ in range(arg("--threads", 1) - 1)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    loop(deadline)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
