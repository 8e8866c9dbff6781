"""Many small tensor ops: 2,000 iterations (x --scale) of 4 ops on 16-element tensors.

Dispatcher-bound: each op does almost no arithmetic, so the cost of getting
into and out of an op is what is measured. The work returns its calls of step().
"""
import benchlib


def setup(args):
    import torch

    torch.set_num_threads(1)
    iters = max(1, round(2000 * args.scale))
    b = torch.full((16,), 0.5)

    def step(a):
        a = torch.relu(a * 0.999 + b)
        return a, a.sum()

    def loop(n):
        a = torch.ones(16)
        for _ in range(n):
            a, _ = step(a)

    loop(100)  # warm-up

    def work():
        loop(iters)
        return iters

    return work


if __name__ == "__main__":
    benchlib.run("small_ops", setup)
