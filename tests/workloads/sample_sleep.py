"""A thread that blocks most of the time: nap() sleeps 50 ms at a time.

For off-CPU sampling: nap's blocked time is about the wall time sampled.
Runs until killed (or for --seconds S).
"""
import sys
import threading
import time


def nap():
    time.sleep(0.05)


def sleeper(deadline):
    while time.monotonic() < deadline:
        nap()


def main():
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 3600
    t = threading.Thread(target=sleeper, args=(time.monotonic() + seconds,), name="sleeper")
    t.start()
    print("ready", flush=True)
    t.join()


if __name__ == "__main__":
    main()
