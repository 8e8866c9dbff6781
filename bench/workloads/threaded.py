"""A threaded mix of I/O waits and compute: 4 workers, 150 items each (x --scale).

Per item a worker waits for its input on a socket (a feeder thread sends it
after 1 ms, like a network reply), hashes 64 KiB (C code that releases the
GIL) and runs a small pure-Python reduction of 16 calls (holds the GIL). The
work is done when every worker has handled all its items; it returns the
calls of reduce_py and mix.
"""
import hashlib
import socket
import threading
import time

import benchlib

WORKERS = 4
MIXES = 16


def mix(acc, data, i):
    for j in range(i, i + 32):
        acc = (acc * 31 + data[j]) & 0xFFFFFFFF
    return acc


def reduce_py(data):
    acc = 0
    for k in range(MIXES):
        acc = mix(acc, data, k * 256)
    return acc


def feeder(socks, items):
    for _ in range(items):
        time.sleep(0.001)
        for s in socks:
            s.sendall(b"x")


def worker(sock, items, out, idx):
    payload = bytes(range(256)) * 256
    acc = 0
    for _ in range(items):
        sock.recv(1)
        digest = hashlib.sha256(payload).digest()
        acc ^= reduce_py(payload) ^ digest[0]
    out[idx] = acc


def setup(args):
    items = max(1, round(150 * args.scale))

    def work():
        pairs = [socket.socketpair() for _ in range(WORKERS)]
        out = [0] * WORKERS
        threads = [threading.Thread(target=worker, args=(pairs[i][1], items, out, i),
                                    name=f"worker{i}") for i in range(WORKERS)]
        threads.append(threading.Thread(target=feeder, name="feeder",
                                        args=([p[0] for p in pairs], items)))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for a, b in pairs:
            a.close()
            b.close()
        return WORKERS * items * (1 + MIXES)

    return work


if __name__ == "__main__":
    benchlib.run("threaded", setup)
