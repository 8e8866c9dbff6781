"""A small PyTorch training job (CPU): an MLP learning a noisy sine, with SGD.

The bundled example of ptrace-gpu's README: `tools/demo.sh` records it and
prints its reports. Runs without torch too (a pure-Python fallback), so the
demo works wherever CPython 3.11 does.
"""
import math
import random


def batches(n, size):
    rng = random.Random(0)
    for _ in range(n):
        xs = [rng.uniform(-3.0, 3.0) for _ in range(size)]
        yield xs, [math.sin(x) + rng.gauss(0.0, 0.05) for x in xs]


def train_torch(steps):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    for step, (xs, ys) in enumerate(batches(steps, 64)):
        x = torch.tensor(xs).unsqueeze(1)
        y = torch.tensor(ys).unsqueeze(1)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.4f}")


def train_python(steps):
    w, b = 0.0, 0.0
    for step, (xs, ys) in enumerate(batches(steps, 64)):
        grad_w = sum((w * x + b - y) * x for x, y in zip(xs, ys)) / len(xs)
        grad_b = sum((w * x + b - y) for x, y in zip(xs, ys)) / len(xs)
        w, b = w - 0.05 * grad_w, b - 0.05 * grad_b
        if step % 50 == 0:
            print(f"step {step}: w {w:.3f} b {b:.3f}")


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        train_python(200)
    else:
        train_torch(200)


if __name__ == "__main__":
    main()
