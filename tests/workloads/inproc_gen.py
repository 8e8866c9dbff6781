"""Generators left and entered every way: suspended, thrown into (caught and
uncaught), closed, thrown into before they started, and a coroutine that
awaits a suspended future."""
import sys

import gate


def gen():
    try:
        yield 1
    except KeyError:
        yield 2


class Later:
    def __await__(self):
        yield "later"
        return 3


async def coro():
    return await Later() + 1


def run():
    g = gen()
    next(g)              # start, yield
    g.throw(KeyError)    # throw, caught: yield
    g.close()            # throw (GeneratorExit), unwind
    try:
        gen().throw(KeyError)  # throw before its start: unwind
    except KeyError:
        pass
    c = coro()
    c.send(None)         # start, yield (through Later.__await__)
    try:
        c.send(None)     # resume, return
    except StopIteration:
        pass


if __name__ == "__main__":
    if "--wait" in sys.argv:
        gate.wait_for_go()
    run()
    gate.done()
