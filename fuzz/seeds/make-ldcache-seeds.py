#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds of fuzz_ldcache: small ld.so.cache images in the three layouts
ldconfig writes (-c old, compat, new), built field by field (user/proc/ldcache.c
describes them), into fuzz/corpus/ldcache/."""
import os
import struct
import sys

ENTS = [(0x0303, b"libcuda.so.1", b"/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
        (0x0003, b"libcuda.so.1", b"/usr/lib/i386-linux-gnu/libcuda.so.1"),
        (0x0303, b"libcudart.so.12", b"/opt/cuda/lib64/libcudart.so.12"),
        (0x0303, b"libtorch_cpu.so", b"/usr/lib/x86_64-linux-gnu/libtorch_cpu.so")]


def build(layout):
    n = len(ENTS)
    old_end = 0 if layout == "new" else 16 + n * 12
    hdr = 0 if layout == "new" else (old_end + 7) & ~7
    start = old_end if layout == "old" else hdr + 48 + n * 24
    strings, offs = b"", []
    for _, name, path in ENTS:
        offs.append((start + len(strings), start + len(strings) + len(name) + 1))
        strings += name + b"\0" + path + b"\0"
    img = bytearray(start) + strings
    if layout != "new":
        img[0:16] = b"ld.so-1.7.0\0" + struct.pack("<I", n)
        for i, ((flags, _, _), (k, v)) in enumerate(zip(ENTS, offs)):
            struct.pack_into("<iII", img, 16 + i * 12, flags, k - old_end, v - old_end)
    if layout != "old":
        struct.pack_into("<20sII", img, hdr, b"glibc-ld.so.cache1.1", n, len(strings))
        for i, ((flags, _, _), (k, v)) in enumerate(zip(ENTS, offs)):
            struct.pack_into("<iIIIQ", img, hdr + 48 + i * 24, flags, k - hdr, v - hdr, 0, 0)
    return bytes(img)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "corpus", "ldcache")
    os.makedirs(out, exist_ok=True)
    for layout in ("old", "compat", "new"):
        with open(os.path.join(out, f"{layout}.cache"), "wb") as f:
            f.write(build(layout))


if __name__ == "__main__":
    main()
