#!/usr/bin/env bash
# Rebuilds the ELF seeds of fuzz/corpus/elf/ from the sources here (gcc 12,
# Debian bookworm); small files: no libc, no build id, no unwind tables.
set -euo pipefail
cd "$(dirname "$0")"
out=../corpus/elf
flags=(-g0 -nostdlib -fno-asynchronous-unwind-tables -Wl,--build-id=none)
gcc -Os "${flags[@]}" -Wl,-z,noseparate-code -pie -fPIE elf_eval.c -o "$out/eval_pie"
# separate code: the table must be in a segment without PF_X, as in python
gcc -Os "${flags[@]}" -DPY_VERSION_HEX=0x030d00f0 -no-pie -fno-pie elf_eval.c \
	-o "$out/eval_nopie"
gcc -O2 "${flags[@]}" -Wl,-z,noseparate-code -shared -fPIC -fcf-protection=full \
	-Wl,--no-as-needed elf_ops.c -o "$out/libops.so" -lc
