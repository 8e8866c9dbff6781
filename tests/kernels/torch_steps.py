"""PyTorch ops for the kernel matrix (tests/kernels/guest.py): mlp.py's
model trained STEPS steps once released (to be recorded), then, after a
second go (the recorder stopped meanwhile), the same steps of a fresh model
under torch.profiler, whose op counts it prints as "oracle JSON". One import
of torch for both: it takes 20 s and more on an emulated machine.

  torch_steps.py [--steps N] [--wait]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
import gate  # noqa: E402
import mlp  # noqa: E402
import torch  # noqa: E402
import torch.profiler  # noqa: E402,F401  (imported before the recording)


def fresh():
    """A new model, optimizer and data, the same each time."""
    torch.manual_seed(0)
    model = mlp.Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt, torch.randn(16, 32), torch.randn(16, 10)


def main():
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 3
    torch.set_num_threads(1)
    mlp.train(*fresh(), 1)  # whatever the first step ever does once, before the recording
    if "--wait" in sys.argv:
        gate.wait_for_go()
    mlp.train(*fresh(), steps)
    if "--wait" in sys.argv:
        print("trained", flush=True)
        sys.stdin.readline()
    print("oracle", json.dumps(mlp.oracle(*fresh(), steps), sort_keys=True), flush=True)
    gate.done()


if __name__ == "__main__":
    main()
