"""Two of these, pinned to one CPU and recorded at once by one recorder
(tests/kernels/guest.py, on kernels whose uprobe programs are preemptible):
role alpha and role beta each call functions of their own, named after the
role, so that a frame of one process counted in the other, or a name taken
from the other's cache, shows.

  pinned.py ROLE [--rounds N] [--wait]   calls of ROLE, N rounds (default 300)
  pinned.py ROLE [--rounds N] --oracle   their counts, from sys.setprofile
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
import gate  # noqa: E402
from mixed import is_new_call  # noqa: E402


def alpha_leaf(i):
    return i + 1


def alpha_rec(n):
    return 0 if n == 0 else alpha_rec(n - 1) + 1


def alpha_gen(n):
    yield from range(n)


def alpha_fail(i):
    raise ValueError(i)


def alpha_round(i):
    for j in range(12):
        alpha_leaf(j)
    alpha_rec(8)
    sum(alpha_gen(4))
    try:
        alpha_fail(i)
    except ValueError:
        pass


def beta_leaf(i):
    return i * 2


def beta_pair(i):
    return beta_leaf(i) + beta_leaf(i + 1)


def beta_rec(n):
    return n if n < 2 else beta_rec(n - 1) + beta_rec(n - 2)


class Beta:
    def __init__(self, v):
        self.v = v

    @property
    def twice(self):
        return beta_leaf(self.v)


def beta_round(i):
    for j in range(5):
        beta_pair(j)
    beta_rec(5)
    Beta(i).twice


ROLES = {"alpha": alpha_round, "beta": beta_round}
ROLE = sys.argv[1] if len(sys.argv) > 1 else "alpha"
ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 300


def run():
    one = ROLES[ROLE]
    for i in range(ROUNDS):
        one(i)


if __name__ == "__main__":
    # not in a function: the frames there at the attach are <module>'s alone
    if "--oracle" in sys.argv:
        gate.print_oracle(run, __file__, is_new_call)
    else:
        if "--wait" in sys.argv:
            gate.wait_for_go()
        run()
        gate.done()
