"""Runs PyTorch's first op on a thread of its own, not the main one, then
more on the main thread, and prints how many torch.mm calls each made.

Under record -- CMD the hand-over's stop at the first op is for the main
thread (the op agent goes in through it): this one waits in its own stop
while the op probes go in, and every call must be in the trace.
"""
import threading

import torch

N_THREAD, N_MAIN = 300, 200


def work():
    x = torch.ones(4, 4)
    for _ in range(N_THREAD):
        torch.mm(x, x)


def main():
    t = threading.Thread(target=work)
    t.start()
    t.join()
    x = torch.ones(4, 4)
    for _ in range(N_MAIN):
        torch.mm(x, x)
    print("mm", N_THREAD + N_MAIN, flush=True)


if __name__ == "__main__":
    main()
