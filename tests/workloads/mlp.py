"""A two-layer MLP (fc1, fc2) trained with SGD for 5 steps on fixed data.

  --wait             say ready and block until go (record -p attaches then)
  --oracle           run the same steps under torch.profiler, in-process, and
                     print "oracle" and the count of every op as JSON
  --steps N          train N steps (default 5)
  --backward-thread  run each backward pass on a thread of its own
  --loop SECONDS     keep training that long (for benchmarks), then stop
  --errors N         first call torch.mm N times on shapes that do not fit: the
                     C++ exception unwinds through the op's probes
  --optim NAME       sgd (default) or adam
  --hooks            a forward pre-hook and a forward hook on fc1 (each runs
                     an op), a pre-hook on the model, and a Linear called
                     from a plain list: module calls that are not a plain
                     forward
  --wait-in-forward  with --wait: wait inside the model's first forward(), so
                     that the tracer attaches with module calls running
  --hold             with --wait: once trained, say "trained" and wait for go
                     again before exiting (the recorder stops meanwhile, so
                     that what it reads from memory is still there)
"""
import argparse
import json
import sys
import threading
import time

import gate
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, hooks=False, wait_in_forward=False):
        super().__init__()
        self.wait_in_forward = wait_in_forward
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)
        # a module its caller does not hold in _modules: named Linear#0
        self.extra = [nn.Linear(10, 10)] if hooks else []
        if hooks:
            self.fc1.register_forward_pre_hook(scale_input)
            self.fc1.register_forward_hook(Clamp().hook)
            self.register_forward_pre_hook(lambda module, args: None)

    def forward(self, x):
        if self.wait_in_forward:
            self.wait_in_forward = False
            gate.wait_for_go()
        x = self.fc2(torch.relu(self.fc1(x)))
        for m in self.extra:
            x = m(x)
        return x


def scale_input(module, args):
    return (torch.mul(args[0], 0.5),)


class Clamp:
    """A hook that is a bound method of another object: its first local is not the module."""

    def hook(self, module, args, out):
        return torch.clamp(out, -10, 10)


def backward(loss, on_thread):
    if not on_thread:
        loss.backward()
        return
    t = threading.Thread(target=loss.backward, name="backward")
    t.start()
    t.join()


def train(model, opt, x, y, steps, on_thread=False):
    loss_fn = nn.MSELoss()
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        backward(loss, on_thread)
        opt.step()


def oracle(model, opt, x, y, steps):
    """What torch.profiler counts for the same steps: {op name: calls}."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train(model, opt, x, y, steps)
    return {e.key: e.count for e in prof.key_averages()}


def errors(n):
    a, b = torch.ones(2, 3), torch.ones(4, 5)
    caught = 0
    for _ in range(n):
        try:
            torch.mm(a, b)
        except RuntimeError:
            caught += 1
    print("caught", caught, flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wait", action="store_true")
    p.add_argument("--oracle", action="store_true")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--backward-thread", action="store_true")
    p.add_argument("--loop", type=float, default=0)
    p.add_argument("--errors", type=int, default=0)
    p.add_argument("--optim", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--hooks", action="store_true")
    p.add_argument("--wait-in-forward", action="store_true")
    p.add_argument("--hold", action="store_true")
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net(a.hooks, a.wait and a.wait_in_forward)
    params = list(model.parameters()) + [p for m in model.extra for p in m.parameters()]
    if a.optim == "adam":
        opt = torch.optim.Adam(params, lr=0.01)
    else:
        opt = torch.optim.SGD(params, lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 10)
    if a.wait and not a.wait_in_forward:
        gate.wait_for_go()
    if a.errors:
        errors(a.errors)
    if a.oracle:
        print("oracle", json.dumps(oracle(model, opt, x, y, a.steps), sort_keys=True), flush=True)
    elif a.loop:
        end, n = time.monotonic() + a.loop, 0
        while time.monotonic() < end:
            train(model, opt, x, y, 1)
            n += 1
        print("steps", n, flush=True)
    else:
        train(model, opt, x, y, a.steps, a.backward_thread)
    if a.wait and a.hold:
        print("trained", flush=True)
        sys.stdin.readline()
    gate.done()


if __name__ == "__main__":
    main()
