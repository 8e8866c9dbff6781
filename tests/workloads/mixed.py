"""A mix of what Python code does, for comparison with an in-process oracle.

Run with --wait to be recorded (ready/go on stdin/stdout), or with --oracle
to count calls in-process with sys.setprofile and print them as JSON.
"""
import dis
import functools
import sys

import gate

RESUME = dis.opmap["RESUME"]


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))

    @property
    def norm(self):
        return abs(self.x) + abs(self.y)

    @staticmethod
    def origin():
        return Point(0, 0)

    @classmethod
    def diagonal(cls, v):
        return cls(v, v)


class Countdown:
    """An iterator class: __next__ ends with StopIteration that C code swallows."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@traced
def decorated(v):
    return v * 2


def squares(n):
    for i in range(n):
        yield i * i


def delegate(n):
    yield from squares(n)
    return n


def closure_maker(k):
    def inner(v):
        return v + k
    return inner


def may_fail(i):
    if i % 3 == 0:
        raise KeyError(i)
    return i


def guarded(i):
    try:
        return may_fail(i)
    except KeyError:
        return None
    finally:
        pass


def has_attr_probe(obj):
    return hasattr(obj, "missing")


class Lazy:
    def __getattr__(self, name):
        raise AttributeError(name)


def recurse(n):
    return 0 if n == 0 else recurse(n - 1) + 1


async def coro_leaf(v):
    return v + 1


async def coro_main(n):
    total = 0
    for i in range(n):
        total += await coro_leaf(i)
    return total


def run_coroutine(n):
    c = coro_main(n)
    try:
        c.send(None)
    except StopIteration as e:
        return e.value


def run():
    pts = {Point(i % 5, i % 7) for i in range(50)}
    sum(p.norm for p in pts)
    Point.origin() == Point.diagonal(0)
    sorted(range(30), key=lambda v: -v)
    list(map(closure_maker(3), range(20)))
    [decorated(i) for i in range(25)]
    sum(Countdown(40))
    list(delegate(15))
    [guarded(i) for i in range(30)]
    has_attr_probe(Lazy())
    recurse(30)
    run_coroutine(10)


def is_new_call(frame):
    """Whether a "call" event of sys.setprofile starts a call. It comes at the
    code's RESUME: its oparg says where it resumes, 0 at the start of the
    function, 1-3 after a yield, yield from or await (a generator or coroutine
    that continues, not a new call). 3.13 and later put flags in the bits
    above (the exception depth), so only the low two bits say which."""
    lasti = frame.f_lasti
    if lasti < 0:
        return True
    code = frame.f_code.co_code
    if code[lasti] != RESUME:
        raise AssertionError(f"call event of {frame.f_code.co_qualname} at "
                             f"{dis.opname[code[lasti]]}, not at RESUME")
    return code[lasti + 1] & 3 == 0


def oracle():
    gate.print_oracle(run, __file__, is_new_call)


if __name__ == "__main__":
    if "--oracle" in sys.argv:
        oracle()
    else:
        if "--wait" in sys.argv:
            gate.wait_for_go()
        run()
        gate.done()
