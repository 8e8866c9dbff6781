"""Call-heavy pure Python: recursive fib(20), twice (x --scale).

Each fib(20) makes 21,891 calls of fib; the work returns the exact count.
Small on purpose: a traced call costs microseconds where an untraced one
costs ~40 ns, and the traced runs must fit the benchmark's time budget.
"""
import benchlib


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def fib_calls(n):
    """Calls of fib that fib(n) makes: 2 * F(n + 1) - 1."""
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1


def setup(args):
    reps = max(1, round(2 * args.scale))

    def work():
        for _ in range(reps):
            fib(20)
        return reps * fib_calls(20)

    return work


if __name__ == "__main__":
    benchlib.run("fib", setup)
