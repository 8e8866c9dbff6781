"""Python calls as fast as the interpreter makes them, for the loader's capacity.

--threads T threads (default 1) each run fib(18) 8 times (x --scale; 0 = no
work at all, for the loader's fixed cost). The work returns the exact number
of calls: each fib(18) makes 8,361.
"""
import threading

import benchlib
from fib import fib, fib_calls


def setup(args):
    reps = round(8 * args.scale)

    def one():
        for _ in range(reps):
            fib(18)

    def work():
        threads = [threading.Thread(target=one, name=f"storm{i}") for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return args.threads * reps * fib_calls(18)

    return work


if __name__ == "__main__":
    benchlib.run("callstorm", setup)
