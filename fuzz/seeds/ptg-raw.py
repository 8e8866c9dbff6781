#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a .ptg trace in the uncompressed form fuzz_trace_reader packs
itself (fuzz/fuzz_trace_reader.c): magic PTGRAWCK, each chunk's payload
inflated, its header's raw_len the payload's length.

usage: ptg-raw.py IN.ptg OUT
"""
import struct
import sys
import zlib


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    data = open(sys.argv[1], 'rb').read()
    if data[:8] != b'PTGTRACE':
        sys.exit('ptg-raw: %s: not a .ptg trace' % sys.argv[1])
    out = bytearray(b'PTGRAWCK' + data[8:16])
    off = 16
    while off < len(data):
        magic, ctype, raw_len, comp_len, crc, count = struct.unpack_from('<6I', data, off)
        payload = zlib.decompress(data[off + 24:off + 24 + comp_len])
        out += struct.pack('<6I', magic, ctype, len(payload), 0, 0, count) + payload
        off += 24 + comp_len
    with open(sys.argv[2], 'xb') as f:
        f.write(out)


main()
