"""A PyTorch CPU training loop: a 3-layer MLP trained with Adam, 30 steps (x --scale).

One intra-op thread, so the run does not depend on what else the 2 cores
are doing and a tracer's loader has the other core, as it would on a real
host with cores to spare.
"""
import benchlib


def setup(args):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(32, 128)
    y = torch.randint(0, 10, (32,))
    steps = max(1, round(30 * args.scale))

    def train(n):
        for _ in range(n):
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()

    train(3)  # warm-up: lazy initialization (Adam state, allocator) is not the loop's cost

    def work():
        train(steps)
        return None

    return work


if __name__ == "__main__":
    benchlib.run("train", setup)
