"""Makes N functions by exec() in a loop (N the first argument, default
1,000,000) and calls each once, dropping it before the next: a program
that makes code objects without end. Each round's function is named
f<i % 7>, its first line 1 + i % 5, in the file GEN, so that new code
objects take the addresses (and names' addresses) of freed ones under
other names. Prints, at the end, how much the process's anonymous memory
(RssAnon: the heap, not the recorder's shared ring) grew at most above
what it was at the start, in KiB, sampled every 1,000 rounds."""
import sys

import gate

GEN = "<execloop>"


def rss_anon_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def run(n):
    start = peak = rss_anon_kib()
    for i in range(n):
        src = "\n" * (i % 5) + f"def f{i % 7}(x):\n    return x + {i}\n"
        ns = {}
        exec(compile(src, GEN, "exec"), ns)
        ns[f"f{i % 7}"](i)
        if i % 1000 == 999:
            peak = max(peak, rss_anon_kib())
    return max(peak, rss_anon_kib()) - start


if __name__ == "__main__":
    n = next((int(a) for a in sys.argv[1:] if a.isdigit()), 1000000)
    if "--oracle" in sys.argv:
        gate.print_oracle(lambda: run(n), GEN)
    else:
        if "--wait" in sys.argv:
            gate.wait_for_go()
        print("grew", run(n), flush=True)
        gate.done()
