#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a .ptg trace in the uncompressed form fuzz_trace_reader packs
itself (fuzz/fuzz_trace_reader.c): magic PTGRAWCK, each chunk's payload
decompressed (zstd from version 3, through libzstd; zlib before), its
header's raw_len the payload's length.

usage: ptg-raw.py IN.ptg OUT
"""
import ctypes
import ctypes.util
import struct
import sys
import zlib


def unzstd(data, raw_len):
    lib = ctypes.CDLL(ctypes.util.find_library('zstd') or 'libzstd.so.1')
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                    ctypes.c_size_t]
    out = ctypes.create_string_buffer(raw_len + 1)
    n = lib.ZSTD_decompress(out, raw_len + 1, data, len(data))
    if n != raw_len:
        sys.exit('ptg-raw: a chunk does not decompress to its raw_len')
    return out.raw[:n]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    data = open(sys.argv[1], 'rb').read()
    if data[:8] != b'PTGTRACE':
        sys.exit('ptg-raw: %s: not a .ptg trace' % sys.argv[1])
    out = bytearray(b'PTGRAWCK' + data[8:16])
    version = struct.unpack_from('<I', data, 8)[0]
    off = 16
    while off < len(data):
        magic, ctype, raw_len, comp_len, crc, count = struct.unpack_from('<6I', data, off)
        stored = data[off + 24:off + 24 + comp_len]
        payload = unzstd(stored, raw_len) if version >= 3 else zlib.decompress(stored)
        out += struct.pack('<6I', magic, ctype, len(payload), 0, 0, count) + payload
        off += 24 + comp_len
    with open(sys.argv[2], 'xb') as f:
        f.write(out)


main()
